// A collective algorithm as a schedule of steps: the one description the analytic model and the
// discrete-event engine both read, so they can only differ by contention.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/collective.h"

namespace shardsim::sim {

// Group member `src` sends `fraction` x bytes to member `dst` (per chunk when the step is
// pipelined). Members are indices into DeviceGroup::devices.
struct Flow {
  int32_t src = 0;
  int32_t dst = 0;
  double fraction = 0;
};

// Flows that run at once, for `rounds` identical rounds back to back (a ring's N-1 steps). A
// pipelined step sends its data in K chunks: rounds + K - 1 rounds of fraction / K each.
struct Step {
  std::vector<Flow> flows;
  int64_t rounds = 1;
  bool pipelined = false;
};

struct Schedule {
  CollectiveOp op = CollectiveOp::kAllReduce;
  Algorithm algorithm = Algorithm::kRing;
  int64_t group_size = 0;
  std::vector<Step> steps;
  std::string description;  // "bidirectional ring over 16 devices", ...
  double launch_s = 0;      // a call's fixed cost before its steps (NCCL's base latency; BuildSchedule)
  // Compute units its kernel holds on each device while it runs (NCCL's channels, one thread
  // block each: ChipSpec::collective_units; BuildSchedule). 0: none.
  int64_t units = 0;
};

// The most flows one schedule may hold: 2^24 (16.8M). Every algorithm but the direct all-to-all
// has O(group) flows per step; the direct all-to-all has group x (group - 1), so this admits
// all-to-all groups of up to 4,096 devices (built and routed in about 3 s and 550 MiB on a
// 4,096-chip torus; 8,192 devices took 2.1 GiB, 65,536 would take 137 GiB).
inline constexpr int64_t kMaxScheduleFlows = int64_t{1} << 24;

// Throws InputError naming `where` when `op` over `group_size` devices would need a schedule of
// more than kMaxScheduleFlows flows (checked before anything is built).
void CheckScheduleSize(CollectiveOp op, int64_t group_size, const std::string& where);

// The algorithms that implement `op`, any of them on request.
std::vector<Algorithm> AlgorithmsFor(CollectiveOp op);
// The ones `auto` picks among, in the order it tries them: AlgorithmsFor's less `hierarchical`,
// which no collective library runs (it builds on NVSwitch clusters only, where NCCL never does).
std::vector<Algorithm> AutoAlgorithmsFor(CollectiveOp op);

// Builds the schedule of `algorithm` (not kAuto) for `op` over `group` on `cluster`, or nullopt
// with `*why_not` saying why it cannot run there (for example "the group is not a box of the
// torus", "no in-switch reduction on this NVSwitch"). A deduplicated `routing` makes the direct
// all-to-all's flows those of sim/routed_all_to_all.h. REQUIRES: the group is non-empty, its
// devices distinct and in range.
std::optional<Schedule> BuildSchedule(const topologies::Cluster& cluster, const DeviceGroup& group, CollectiveOp op,
                                      Algorithm algorithm, std::string* why_not, const TokenRouting& routing = {});

}  // namespace shardsim::sim
