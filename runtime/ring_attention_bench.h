// `shardsim-runtime ring-attention`: ring attention alone over every rank of the job (the
// context axis), measured, checked against full attention, and set beside what the context-
// parallel cost model predicts from this machine's measured kernel rate and point-to-point
// bandwidth.
#pragma once

#include <cstdint>
#include <string>

namespace shardsim::runtime {

struct RingAttentionBenchOptions {
  int64_t seq_len = 4096, heads = 8, kv_heads = 8, head_dim = 64, batch = 1;
  bool causal = false;
  std::string layout = "zigzag";  // zigzag, striped, contiguous
  int64_t repeats = 3;            // timed forward+backward passes (median)
  bool check = false;             // compare with full attention (needs O(S^2) work per rank)
  bool json = false;
};

// Runs on MPI_COMM_WORLD; prints the report on rank 0. Returns 1 when --check finds an output or
// gradient more than 1e-5 from full attention, else 0. Throws InputError for shapes that do not
// split over the ranks.
int RunRingAttentionBench(const RingAttentionBenchOptions& options);

}  // namespace shardsim::runtime
