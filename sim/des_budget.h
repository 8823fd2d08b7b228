// What a SimGrid run will cost, decided before it starts, and the limits it must keep to.
// Both engines (the collective engine, sim/des_collective.h, and the step simulation,
// sim/simulate.h) describe what they are about to create as a DesLoad; EstimateDesCost turns it
// into wall seconds and resident bytes with a cost model measured on this project's machines
// (2-core AMD EPYC, 24 GiB, SimGrid 3.32, CM02 flows; docs/simulate.md "Time and memory
// limits"), and CheckDesFits refuses a run whose estimate passes the limits, in one line, before
// anything is built. The forked simulation is also guarded while it runs (sim/child_process.h).
#pragma once

#include <cstdint>
#include <string>

namespace shardsim::sim {

// The default wall-time limit of one simulation (`--max-seconds`).
inline constexpr double kDefaultMaxSimulationSeconds = 600;
// The default memory limit of the simulating processes together (`--max-host-memory`, what they
// add beyond the memory they share with the command): this fraction of MemAvailable
// (/proc/meminfo) when the command starts.
inline constexpr double kDefaultHostMemoryFraction = 0.5;

// What one SimGrid run creates (estimates; upper bounds where exact counts would cost as much as
// the run). Counts are over every simulating process of the run.
struct DesLoad {
  int64_t hosts = 0;           // SimGrid hosts: the full zone's routing table holds hosts^2 entries
  int64_t routes = 0;          // routed (source, destination) pairs
  int64_t actors = 0;
  int64_t flows = 0;           // transfers over the whole run
  int64_t largest_launch = 0;  // most flows put on the links at once by one launch
  int64_t in_flight = 0;       // most flows alive at once (all actors' launches together)
  int64_t activities = 0;      // executions, sleeps and waits besides the flows
  int64_t kept_records = 0;    // records held until the end (timeline events, queued items)
  double flow_seconds = 0;     // wall seconds the flows cost, summed by AddLaunches
  // Adds `times` launches of `concurrent` flows each (put on the links together) costing
  // `seconds_per_flow` each (CollectiveSecondsPerFlow or StepSecondsPerFlow of `concurrent`).
  void AddLaunches(int64_t concurrent, double times, double seconds_per_flow);
};

// Wall seconds per flow of the collective engine when `concurrent` flows start together (a
// collective step: same sizes, so many end at the same event): 2 us alone, 10 us at 4k flows,
// 14 us at 16k, 70 us at 64k, 160 us at 256k (measured all-to-alls over 64 to 512 devices and
// toolchain.md's ring figures; log-log interpolation, extrapolated along the last slope).
double CollectiveSecondsPerFlow(int64_t concurrent);
// Wall seconds per flow of the step engine, whose launches overlap other streams' so their flows
// end at different events, each re-solving the flows sharing their links: 2 us + 3.5 ns per flow
// of the launch (measured: 2 us with launches of 8 to 64 flows, 17 us with launches of 4,096 on
// a 4,096-chip torus).
double StepSecondsPerFlow(int64_t concurrent);

struct DesEstimate {
  double seconds = 0;  // wall time of the simulation
  double bytes = 0;    // peak resident memory of the simulating processes together
};
DesEstimate EstimateDesCost(const DesLoad& load);

// The limits a simulation must keep to, and the flags that set them (named in the errors).
struct DesLimits {
  double max_seconds = kDefaultMaxSimulationSeconds;  // wall time of the simulation
  double max_memory_bytes = 0;  // resident memory the simulating processes add; 0: the default
  std::string seconds_flag = "--max-seconds";
  std::string memory_flag = "--max-host-memory";
  bool refuse_beforehand = true;  // false: skip CheckDesFits and leave it to the running guard (its tests)
};

// MemAvailable from /proc/meminfo in bytes (0 when it cannot be read).
double MemAvailableBytes();
// `limits.max_memory_bytes`, or kDefaultHostMemoryFraction x MemAvailable (16 GiB x the fraction
// when MemAvailable cannot be read).
double MemoryLimitBytes(const DesLimits& limits);
// "600 s (--max-seconds)", "11.5 GiB (--max-host-memory, half of the 23.0 GiB available)".
std::string DescribeTimeLimit(const DesLimits& limits);
std::string DescribeMemoryLimit(const DesLimits& limits);

// Throws InputError naming the memory flag, then the time flag, when `estimate` passes that
// limit (unless `limits.refuse_beforehand` is false): `what` names the simulation ("the SimGrid all-to-all over 4096 devices"), `load` gives
// the counts quoted, `hint` what to do instead (fold more, the analytic engine, a smaller group).
void CheckDesFits(const DesLoad& load, const DesEstimate& estimate, const DesLimits& limits, const std::string& what,
                  const std::string& hint);

// `--max-host-memory`: a fraction of MemAvailable in (0, 1] ("0.5") or a size as ParseByteSize
// reads it ("8GiB"), in bytes. Throws InputError naming `where`.
double ParseHostMemoryLimit(const std::string& text, const std::string& where);

}  // namespace shardsim::sim
