// What `shardsim run` and `validate` check before launching ranks on this machine: the rank count
// against its cores, and the ranks' memory against what it has free, so that a plan too large
// for the machine is refused with the figures instead of ending in a failed allocation.
#pragma once

#include <cstdint>

#include "core/model_spec.h"
#include "core/plan_spec.h"

namespace shardsim::cli {

// Ranks per core past which time-sharing makes a step take minutes: more need --many-ranks.
inline constexpr int64_t kMaxRanksPerCore = 16;
// What a rank holds beyond the memory model's state: OpenMPI's shared-memory buffers, OpenBLAS,
// the program and its corpus. Measured: a tiny-dense rank (data=2) peaks at 83 MB resident, of
// which the memory model counts 52 MB.
inline constexpr double kRankOverheadBytes = 64.0 * (1 << 20);

struct RunLimitChecks {
  bool hostfile = false;        // ranks go to other machines: this one's limits do not apply
  bool many_ranks = false;      // --many-ranks
  bool skip_memory = false;     // --skip-memory-check
};

// Throws InputError naming the limit, the figures and the flag that lifts it.
void CheckRunFitsThisMachine(const ModelSpec& model, const PlanSpec& plan, int64_t ranks, const RunLimitChecks& checks);

}  // namespace shardsim::cli
