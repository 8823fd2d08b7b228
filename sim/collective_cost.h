// The analytic (alpha-beta) cost of a collective schedule on the links its flows really use:
// per step, the latency of its slowest route plus the bytes of its most loaded link over that
// link's bandwidth x efficiency. Routing happens once per schedule; a cost is then O(steps).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/collective_schedule.h"

namespace shardsim::sim {

struct StepProfile {
  double latency_s = 0;         // slowest route of the step: sum of its links' latencies
  double seconds_per_byte = 0;  // time per byte of `bytes` on the step's most loaded link
  int64_t bottleneck_link = -1; // that link's id in Cluster::links()
};

struct CollectiveEstimate {
  double time_s = 0;
  int64_t chunks = 1;  // pipeline chunks chosen for pipelined steps (1 when none)
};

class CollectiveModel {
 public:
  // Routes every flow of `schedule` over `cluster`. REQUIRES: the schedule's members index into
  // `group`. `cluster` must outlive the model. `scratch`, when given, is one zero per link of the
  // cluster, used and left zero (models built one after another share it).
  CollectiveModel(const topologies::Cluster& cluster, const DeviceGroup& group, Schedule schedule, std::vector<double>* scratch = nullptr);

  // Time for `bytes` (nccl-tests size). Pipelined steps use the chunk count that minimises the
  // time (powers of two up to 2^20), as a tuned implementation would.
  CollectiveEstimate Cost(double bytes) const;
  // Time with a given chunk count.
  double CostWithChunks(double bytes, int64_t chunks) const;

  const Schedule& schedule() const { return schedule_; }
  const std::vector<StepProfile>& profiles() const { return profiles_; }

 private:
  Schedule schedule_;
  std::vector<StepProfile> profiles_;
  bool pipelined_ = false;
};

// The model for `algorithm` (or, with kAuto, one model per applicable algorithm of
// AutoAlgorithmsFor's). Throws
// InputError(where, ...) naming why when a requested algorithm cannot run on the group.
std::vector<CollectiveModel> BuildCollectiveModels(const topologies::Cluster& cluster, const DeviceGroup& group,
                                                   CollectiveOp op, Algorithm algorithm, const std::string& where);

// The fastest of `models` for `bytes`: its index and estimate.
std::pair<size_t, CollectiveEstimate> Fastest(const std::vector<CollectiveModel>& models, double bytes);

// A collective over a mesh axis runs on all the axis's groups at once. This holds, for each
// algorithm of AutoAlgorithmsFor's that can run on every group (or the one requested), its schedule per group and its
// analytic model on up to `max_modelled_groups` groups spread evenly (routing every group of a
// large mesh would cost more than it tells); an algorithm's time is its slowest modelled group.
class GroupCollective {
 public:
  // Throws InputError(where, ...) when the requested algorithm cannot run on some group, or when
  // a group has a single device (nothing to communicate).
  // With `every_group` false, only the modelled groups get a schedule (and decide which
  // algorithms can run): enough for the analytic model on regular meshes, not for the simulator.
  // `routing`: an expert all-to-all's tokens (BuildSchedule).
  GroupCollective(const topologies::Cluster& cluster, const std::vector<DeviceGroup>& groups, CollectiveOp op,
                  Algorithm algorithm, const std::string& where, size_t max_modelled_groups = 64, bool every_group = true,
                  const TokenRouting& routing = {});

  struct Choice {
    size_t candidate = 0;      // index into candidates()
    CollectiveEstimate estimate;
    size_t slowest_group = 0;  // index into groups
  };
  // The algorithm whose slowest group is fastest for `bytes`.
  Choice Fastest(double bytes) const;

  struct Candidate {
    Algorithm algorithm;
    std::vector<Schedule> schedules;          // one per group (every_group), else per modelled group
    std::vector<size_t> modelled;             // groups with a distinct model, in order
    std::vector<CollectiveModel> models;      // their models (groups costing the same share one)
  };
  const std::vector<Candidate>& candidates() const { return candidates_; }
  size_t group_count() const { return group_count_; }

 private:
  std::vector<Candidate> candidates_;
  size_t group_count_ = 0;
};

}  // namespace shardsim::sim
