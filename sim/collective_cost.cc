#include "sim/collective_cost.h"

#include <limits>
#include <unordered_map>

#include "core/error.h"

namespace shardsim::sim {

CollectiveModel::CollectiveModel(const topologies::Cluster& cluster, const DeviceGroup& group, Schedule schedule)
    : schedule_(std::move(schedule)) {
  const std::vector<topologies::Link>& links = cluster.links();
  for (const Step& step : schedule_.steps) {
    pipelined_ = pipelined_ || step.pipelined;
    StepProfile profile;
    std::unordered_map<int64_t, double> load;  // link id -> fraction of `bytes` it carries
    for (const Flow& flow : step.flows) {
      const auto route = cluster.Route(group.devices[static_cast<size_t>(flow.src)], group.devices[static_cast<size_t>(flow.dst)]);
      double latency = 0;
      for (int64_t id : route) {
        latency += links[static_cast<size_t>(id)].latency_s;
        load[id] += flow.fraction;
      }
      profile.latency_s = std::max(profile.latency_s, latency);
    }
    for (const auto& [id, fraction] : load) {
      const topologies::Link& link = links[static_cast<size_t>(id)];
      const double seconds = fraction / (link.bandwidth_bytes_per_s * link.efficiency);
      if (seconds > profile.seconds_per_byte || (seconds == profile.seconds_per_byte && id < profile.bottleneck_link)) {
        profile.seconds_per_byte = seconds;
        profile.bottleneck_link = id;
      }
    }
    profiles_.push_back(profile);
  }
}

double CollectiveModel::CostWithChunks(double bytes, int64_t chunks) const {
  double time = 0;
  for (size_t i = 0; i < profiles_.size(); ++i) {
    const Step& step = schedule_.steps[i];
    const StepProfile& p = profiles_[i];
    if (step.flows.empty() || step.rounds == 0) continue;
    const int64_t k = step.pipelined ? chunks : 1;
    const double rounds = static_cast<double>(step.rounds + k - 1);
    time += rounds * (p.latency_s + bytes * p.seconds_per_byte / static_cast<double>(k));
  }
  return time;
}

CollectiveEstimate CollectiveModel::Cost(double bytes) const {
  CollectiveEstimate best{CostWithChunks(bytes, 1), 1};
  if (!pipelined_) return best;
  for (int64_t k = 2; k <= (int64_t{1} << 20); k *= 2) {
    const double t = CostWithChunks(bytes, k);
    if (t >= best.time_s) break;  // the cost is convex in k: past the minimum it only grows
    best = {t, k};
  }
  return best;
}

std::vector<CollectiveModel> BuildCollectiveModels(const topologies::Cluster& cluster, const DeviceGroup& group,
                                                   CollectiveOp op, Algorithm algorithm, const std::string& where) {
  std::vector<CollectiveModel> models;
  if (algorithm != Algorithm::kAuto) {
    std::string why_not;
    auto schedule = BuildSchedule(cluster, group, op, algorithm, &why_not);
    if (!schedule) {
      std::string valid;
      for (Algorithm a : AlgorithmsFor(op)) {
        std::string unused;
        if (BuildSchedule(cluster, group, op, a, &unused)) valid += (valid.empty() ? "" : ", ") + ToString(a);
      }
      throw InputError(where, "algorithm '" + ToString(algorithm) + "' cannot run " + ToString(op) + " here: " + why_not,
                       "auto" + (valid.empty() ? std::string() : ", " + valid), "use --algorithm auto to pick the fastest");
    }
    models.emplace_back(cluster, group, std::move(*schedule));
    return models;
  }
  for (Algorithm a : AlgorithmsFor(op)) {
    std::string why_not;
    if (auto schedule = BuildSchedule(cluster, group, op, a, &why_not)) models.emplace_back(cluster, group, std::move(*schedule));
  }
  SHARDSIM_CHECK(!models.empty(), "no algorithm for " + ToString(op));
  return models;
}

std::pair<size_t, CollectiveEstimate> Fastest(const std::vector<CollectiveModel>& models, double bytes) {
  size_t best = 0;
  CollectiveEstimate best_estimate{std::numeric_limits<double>::infinity(), 1};
  for (size_t i = 0; i < models.size(); ++i) {
    const CollectiveEstimate e = models[i].Cost(bytes);
    if (e.time_s < best_estimate.time_s) {
      best = i;
      best_estimate = e;
    }
  }
  return {best, best_estimate};
}

}  // namespace shardsim::sim
