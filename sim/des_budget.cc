#include "sim/des_budget.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/units.h"

namespace shardsim::sim {
namespace {

// Wall microseconds per flow of the collective engine at a concurrency (flows on the links at
// once), measured with `shardsim collective --engine des` (all-to-all over 64 to 512 devices:
// 4,032 to 261,632 flows in one launch, on a 2-core AMD EPYC shared with other work: the 512
// run took 28 to 52 s) and toolchain.md's ring figures (2 to 14 us at 1k to 16k flows).
struct CostPoint {
  double concurrent, us_per_flow;
};
constexpr CostPoint kCollectiveFlowCost[] = {{1, 2}, {1024, 4}, {4096, 10}, {16384, 14}, {65536, 70}, {262144, 160}};
// The step engine (its flows put by sim/flow_ports.h): 2 us per flow with launches of 8 to 64
// flows (gpt3-175b on dgx-a100:1024: 1M flows in 1.8 s), 17 us with launches of 4,096 sharing
// torus links with another stream's (llama3-70b on tpu-v5p:16x16x16: 2.4M flows in 40 s), 14 us
// with launches of 2,048 (16x16x8) and 7 us with launches of 1,024 (16x16x4).
constexpr double kStepFlowBaseSeconds = 2e-6;
constexpr double kStepFlowSecondsPerConcurrent = 3.5e-9;
// Every event of the engine also visits every host (SimGrid 3.32's host model): 16,384 hosts added
// about 5 us per flow to llama3-405b on dgx-h100:16384.
constexpr double kSecondsPerHostPerEvent = 0.3e-9;

// Memory of the simulating process (resident bytes), fitted on the same runs (ring, torus and
// all-to-all collectives over 64 to 16,384 hosts, and the step simulations of
// bench/simulate_targets.sh): within 10% of the measured peak where it is large (an all-to-all
// over 1,024 GPUs: 2.69 GiB estimated, 2.47 GiB measured), above it for small folded runs.
constexpr double kBaseBytes = 8.0 * (1 << 20);       // the engine and the binary
constexpr double kBytesPerHostPair = 8.5;            // SimGrid's full zone: a route slot per host pair
constexpr double kBytesPerActor = 16.0 * 1024;       // actor, its context and the stack pages it touches
constexpr double kBytesPerRoute = 2.0 * 1024;        // a routed pair: SimGrid's route and ours
constexpr double kBytesPerFlowInFlight = 512;        // a live transfer (communication and its LMM variable)
constexpr double kBytesPerRecord = 160;              // a resolved flow, queued item or timeline event
// Wall time besides the flows.
constexpr double kStartSeconds = 0.02;               // fork, engine and platform
constexpr double kSecondsPerHostPair = 1e-9;         // clearing the full zone's table
constexpr double kSecondsPerActor = 10e-6;
constexpr double kSecondsPerActivity = 1.5e-6;       // an execution, sleep or wait (1.5-1.8 us measured)

std::string Count(int64_t n, const std::string& noun) { return std::to_string(n) + " " + noun + (n == 1 ? "" : "s"); }

}  // namespace

double CollectiveSecondsPerFlow(int64_t concurrent) {
  const double c = std::max<double>(1, static_cast<double>(concurrent));
  constexpr size_t n = sizeof kCollectiveFlowCost / sizeof kCollectiveFlowCost[0];
  size_t i = 1;
  while (i + 1 < n && c > kCollectiveFlowCost[i].concurrent) ++i;
  const CostPoint& a = kCollectiveFlowCost[i - 1];
  const CostPoint& b = kCollectiveFlowCost[i];
  const double slope = std::log(b.us_per_flow / a.us_per_flow) / std::log(b.concurrent / a.concurrent);
  return 1e-6 * a.us_per_flow * std::pow(c / a.concurrent, slope);
}

double StepSecondsPerFlow(int64_t concurrent) {
  return kStepFlowBaseSeconds + kStepFlowSecondsPerConcurrent * static_cast<double>(std::max<int64_t>(1, concurrent));
}

void DesLoad::AddLaunches(int64_t concurrent, double times, double seconds_per_flow) {
  if (concurrent <= 0 || times <= 0) return;
  flows += static_cast<int64_t>(std::llround(static_cast<double>(concurrent) * times));
  largest_launch = std::max(largest_launch, concurrent);
  flow_seconds += static_cast<double>(concurrent) * times * seconds_per_flow;
}

DesEstimate EstimateDesCost(const DesLoad& load) {
  const double hosts = static_cast<double>(load.hosts);
  DesEstimate e;
  e.bytes = kBaseBytes + kBytesPerHostPair * hosts * hosts + kBytesPerActor * static_cast<double>(load.actors) +
            kBytesPerRoute * static_cast<double>(load.routes) +
            kBytesPerFlowInFlight * static_cast<double>(std::max(load.in_flight, load.largest_launch)) +
            kBytesPerRecord * static_cast<double>(load.kept_records);
  const double events = static_cast<double>(load.flows + load.activities);
  e.seconds = kStartSeconds + kSecondsPerHostPair * hosts * hosts + kSecondsPerActor * static_cast<double>(load.actors) + load.flow_seconds +
              kSecondsPerActivity * static_cast<double>(load.activities) + kSecondsPerHostPerEvent * hosts * events;
  return e;
}

double MemAvailableBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    double kib = 0;
    if (fields >> kib) return kib * 1024;
  }
  return 0;
}

double MemoryLimitBytes(const DesLimits& limits) {
  if (limits.max_memory_bytes > 0) return limits.max_memory_bytes;
  const double available = MemAvailableBytes();
  return kDefaultHostMemoryFraction * (available > 0 ? available : 16.0 * (int64_t{1} << 30));
}

std::string DescribeTimeLimit(const DesLimits& limits) { return FormatSeconds(limits.max_seconds) + " (" + limits.seconds_flag + ")"; }

std::string DescribeMemoryLimit(const DesLimits& limits) {
  const double limit = MemoryLimitBytes(limits);
  if (limits.max_memory_bytes > 0) return FormatBinaryBytes(limit) + " (" + limits.memory_flag + ")";
  char fraction[16];
  std::snprintf(fraction, sizeof fraction, "%g", kDefaultHostMemoryFraction);
  return FormatBinaryBytes(limit) + " (" + limits.memory_flag + " default: " + fraction + " x MemAvailable " +
         FormatBinaryBytes(MemAvailableBytes()) + ")";
}

void CheckDesFits(const DesLoad& load, const DesEstimate& estimate, const DesLimits& limits, const std::string& what,
                  const std::string& hint) {
  if (!limits.refuse_beforehand) return;
  const std::string counts = Count(load.flows, "flow") + " (up to " + std::to_string(load.largest_launch) + " at once), " + Count(load.hosts, "host") +
                             ", " + Count(load.actors, "actor");
  if (estimate.bytes > MemoryLimitBytes(limits)) {
    throw InputError(limits.memory_flag,
                     what + " would need about " + FormatBinaryBytes(estimate.bytes) + " of memory (" + counts + "; SimGrid's routing table of " +
                         std::to_string(load.hosts) + " x " + std::to_string(load.hosts) + " hosts alone: " +
                         FormatBinaryBytes(kBytesPerHostPair * static_cast<double>(load.hosts) * static_cast<double>(load.hosts)) +
                         "), refused before starting",
                     "at most " + DescribeMemoryLimit(limits), hint);
  }
  if (estimate.seconds > limits.max_seconds) {
    throw InputError(limits.seconds_flag, what + " would take about " + FormatSeconds(estimate.seconds) + " (" + counts + "), refused before starting",
                     "at most " + DescribeTimeLimit(limits), hint + "; or raise " + limits.seconds_flag);
  }
}

double ParseHostMemoryLimit(const std::string& text, const std::string& where) {
  char* end = nullptr;
  const double fraction = std::strtod(text.c_str(), &end);
  if (!text.empty() && end == text.c_str() + text.size()) {
    if (!std::isfinite(fraction) || fraction <= 0 || fraction > 1) {
      throw InputError(where, "'" + text + "' is not a fraction of the available memory", "a fraction in (0, 1], e.g. 0.5, or a size such as 8GiB");
    }
    const double available = MemAvailableBytes();
    if (available <= 0) throw InputError(where, "cannot read MemAvailable from /proc/meminfo to take a fraction of it", "a size such as 8GiB");
    return fraction * available;
  }
  return static_cast<double>(ParseByteSize(text, where));
}

}  // namespace shardsim::sim
