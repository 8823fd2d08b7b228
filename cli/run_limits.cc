#include "cli/run_limits.h"

#include "core/error.h"
#include "core/host_resources.h"
#include "core/units.h"
#include "strategies/memory_model.h"
#include "strategies/build_step.h"

namespace shardsim::cli {

void CheckRunFitsThisMachine(const ModelSpec& model, const PlanSpec& plan, int64_t ranks, const RunLimitChecks& checks) {
  if (checks.hostfile) return;
  const int64_t cores = UsableCores();
  if (!checks.many_ranks && ranks > kMaxRanksPerCore * cores) {
    throw InputError("the plan's mesh", std::to_string(ranks) + " ranks on " + std::to_string(cores) + " cores here",
                     "at most " + std::to_string(kMaxRanksPerCore) + " ranks per core (" + std::to_string(kMaxRanksPerCore * cores) + ")",
                     "shrink the mesh, spread it with --hostfile, or pass --many-ranks");
  }
  if (checks.skip_memory) return;
  const int64_t available = AvailableMemoryBytes();
  if (available < 0) return;  // nothing to compare with
  // The runtime trains in fp32 whatever the plan's dtype (that is for the estimate).
  PlanSpec fp32 = plan;
  fp32.dtype = "fp32";
  fp32.master_weights.clear();  // fp32 weights, their own master
  const strategies::MemoryReport memory = strategies::EstimateMemory(strategies::BuildStep(model, fp32));
  double needed = 0;
  for (const strategies::MemoryBreakdown& stage : memory.stages) needed += stage.total() + kRankOverheadBytes;
  needed *= static_cast<double>(ranks) / static_cast<double>(memory.stages.size());
  if (needed > static_cast<double>(available)) {
    throw InputError("the plan", "needs about " + FormatBinaryBytes(needed) + " over its " + std::to_string(ranks) + " ranks (memory model in fp32, plus " +
                                     FormatBinaryBytes(kRankOverheadBytes) + " per rank for MPI and the program), this machine has " +
                                     FormatBinaryBytes(static_cast<double>(available)) + " available",
                     "a plan that fits", "shard more (fsdp, tensor, pipeline), a smaller model, --hostfile, or --skip-memory-check to try anyway");
  }
}

}  // namespace shardsim::cli
