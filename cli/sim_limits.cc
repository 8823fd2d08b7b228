#include "cli/sim_limits.h"

namespace shardsim::cli {

sim::DesLimits SimLimitsFrom(double max_seconds, const std::string& max_host_memory) {
  sim::DesLimits limits;
  if (max_seconds > 0) limits.max_seconds = max_seconds;
  if (!max_host_memory.empty()) limits.max_memory_bytes = sim::ParseHostMemoryLimit(max_host_memory, "--max-host-memory");
  return limits;
}

}  // namespace shardsim::cli
