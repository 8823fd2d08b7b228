// `shardsim-runtime ring-attention`: ring attention alone over every rank of the job (the
// context axis), measured, checked against full attention, its communication overlap measured
// the standard way, and set beside what the step program's context-parallel ops predict from
// this machine's kernel rate and point-to-point bandwidth, measured in the same run.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "validation/ring_attention_prediction.h"

namespace shardsim::validation {

struct RingAttentionBenchOptions {
  int64_t seq_len = 4096, heads = 8, kv_heads = 8, head_dim = 64, batch = 1;
  bool causal = false;
  std::string layout = "zigzag";  // zigzag, striped, contiguous
  int64_t repeats = 3;            // timed passes of each kind (median reported)
  bool check = false;             // compare with full attention (needs O(S^2) work per rank)
  bool json = false;
  // Block sizes (tokens per rank, S/c) to measure one after the other instead of seq_len, each
  // at S = block x ranks; the report then finds the crossover block size. Empty: one run at
  // seq_len.
  std::vector<int64_t> sweep_block_tokens;
};

// Runs the measurement on MPI_COMM_WORLD (collective: every rank calls it with the same
// options) and returns the report, the same on every rank. Throws InputError for options or
// shapes that do not split over the ranks.
nlohmann::json RingAttentionBenchReport(const RingAttentionBenchOptions& options);

// The report above printed on rank 0 (JSON with options.json, else text). Returns 1 when --check
// finds an output or gradient more than 1e-5 from full attention, else 0.
int RunRingAttentionBench(const RingAttentionBenchOptions& options);

}  // namespace shardsim::validation
