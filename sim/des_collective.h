// The discrete-event engine for collectives: the same schedules as the analytic model, run as
// flows over the routed links on SimGrid (S4U, CM02 flow model), with every group of the mesh
// axis running at once so shared links slow each other. No SimGrid type leaves sim/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/collective_schedule.h"
#include "sim/des_budget.h"

namespace shardsim::sim {

struct DesRequest {
  std::vector<const Schedule*> schedules;  // one per group; REQUIRES: they outlive the call
  double bytes = 0;
  int64_t chunks = 1;  // pipeline chunks for pipelined steps
};

struct LinkLoad {
  int64_t link = -1;    // id in Cluster::links()
  double busy_s = 0;    // bytes it carries over all groups / (bandwidth x efficiency)
  int64_t groups = 0;   // how many groups' flows cross it (more than 1: contention)
};

struct DesReport {
  std::vector<double> times_s;                      // per request, simulated
  std::vector<std::vector<LinkLoad>> busiest_links;  // per request, the five busiest links
  int64_t messages = 0;                             // transfers simulated
  double wall_s = 0;                                // wall time of the simulation
  int64_t peak_rss_bytes = 0;                       // peak memory of the simulating process
  std::string folded;                               // what the engine folded, in words
  DesLoad load;                                     // what the simulation created, counted beforehand
  DesEstimate estimate;                             // its wall time and memory, estimated beforehand
};

// What SimulateCollectives will create for these requests (hosts, actors, routes, flows), from
// the schedules alone: nothing is routed or built, so it is cheap however large the request.
DesLoad CollectivesLoad(const std::vector<DeviceGroup>& groups, const std::vector<DesRequest>& requests);

// Before any schedule is built (an all-to-all over 4,096 devices has 16.8M flows): refuses with
// InputError, in milliseconds, a simulation of `requests` sizes of `op` over `groups` that passes
// `limits` even at the least any algorithm needs (every pair for an all-to-all, a ring's flows
// for the rest). SimulateCollectives checks the full estimate again once the schedules exist.
void CheckCollectivesFit(const std::vector<DeviceGroup>& groups, CollectiveOp op, size_t requests, const DesLimits& limits);

// Runs each request in turn (all `groups` at once, group g executing schedules[g] on its own
// devices; member indices map through the group's device list) and returns the simulated times.
// The simulation runs in a child process (SimGrid allows one engine per process), so this can be
// called repeatedly. Each step's identical rounds are folded into one transfer of rounds x the
// bytes after (rounds - 1) step latencies: exact when every round sees the same sharing.
// Limits: before anything is routed, the run's cost is estimated (CollectivesLoad,
// EstimateDesCost) and a run past `limits` refused with InputError; while it runs, the child is
// killed past the deadline or the memory ceiling (InputError naming the limit). Throws
// std::runtime_error if the child fails.
DesReport SimulateCollectives(const topologies::Cluster& cluster, const std::vector<DeviceGroup>& groups,
                              const std::vector<DesRequest>& requests, const DesLimits& limits = {});

}  // namespace shardsim::sim
