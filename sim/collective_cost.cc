#include "sim/collective_cost.h"

#include <algorithm>
#include <limits>
#include <map>
#include <unordered_map>

#include "core/error.h"

namespace shardsim::sim {

CollectiveModel::CollectiveModel(const topologies::Cluster& cluster, const DeviceGroup& group, Schedule schedule, std::vector<double>* scratch)
    : schedule_(std::move(schedule)) {
  const std::vector<topologies::Link>& links = cluster.links();
  std::vector<double> own;
  if (!scratch) own.assign(links.size(), 0);
  std::vector<double>& load = scratch ? *scratch : own;  // link id -> fraction of `bytes` it carries
  SHARDSIM_CHECK(load.size() == links.size(), "scratch of another cluster");
  std::vector<int64_t> touched, path;  // path: one flow's route (storage reused)
  for (const Step& step : schedule_.steps) {
    pipelined_ = pipelined_ || step.pipelined;
    StepProfile profile;
    auto add = [&](const Flow& flow, const std::vector<int64_t>& route) {
      double latency = 0;
      for (int64_t id : route) {
        latency += links[static_cast<size_t>(id)].latency_s;
        if (load[static_cast<size_t>(id)] == 0) touched.push_back(id);
        load[static_cast<size_t>(id)] += flow.fraction;
      }
      profile.latency_s = std::max(profile.latency_s, latency);
    };
    if (cluster.fast_routes()) {
      for (const Flow& flow : step.flows) {
        cluster.Route(group.devices[static_cast<size_t>(flow.src)], group.devices[static_cast<size_t>(flow.dst)], &path);
        add(flow, path);
      }
    } else {
      // Route the step's flows source by source: one search per source, however many it feeds.
      std::map<int32_t, std::vector<const Flow*>> by_source;
      for (const Flow& flow : step.flows) by_source[flow.src].push_back(&flow);
      for (const auto& [src, flows] : by_source) {
        std::vector<int64_t> dsts;
        for (const Flow* f : flows) dsts.push_back(group.devices[static_cast<size_t>(f->dst)]);
        const auto routes = cluster.RoutesFrom(group.devices[static_cast<size_t>(src)], dsts);
        for (size_t i = 0; i < flows.size(); ++i) add(*flows[i], routes[i]);
      }
    }
    // In any order: ties go to the lowest link id below.
    for (int64_t id : touched) {
      const double fraction = load[static_cast<size_t>(id)];
      load[static_cast<size_t>(id)] = 0;
      const topologies::Link& link = links[static_cast<size_t>(id)];
      const double seconds = fraction / (link.bandwidth_bytes_per_s * link.efficiency);
      if (seconds > profile.seconds_per_byte || (seconds == profile.seconds_per_byte && id < profile.bottleneck_link)) {
        profile.seconds_per_byte = seconds;
        profile.bottleneck_link = id;
      }
    }
    touched.clear();
    profiles_.push_back(profile);
  }
}

double CollectiveModel::CostWithChunks(double bytes, int64_t chunks) const {
  double time = schedule_.launch_s;
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
  CheckScheduleSize(op, static_cast<int64_t>(group.devices.size()), where);
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
  for (Algorithm a : AutoAlgorithmsFor(op)) {
    std::string why_not;
    if (auto schedule = BuildSchedule(cluster, group, op, a, &why_not)) models.emplace_back(cluster, group, std::move(*schedule));
  }
  SHARDSIM_CHECK(!models.empty(), "no algorithm for " + ToString(op));
  return models;
}

namespace {

bool SameCost(const CollectiveModel& a, const CollectiveModel& b) {
  if (a.profiles().size() != b.profiles().size() || a.schedule().launch_s != b.schedule().launch_s) return false;
  for (size_t i = 0; i < a.profiles().size(); ++i) {
    if (a.profiles()[i].latency_s != b.profiles()[i].latency_s || a.profiles()[i].seconds_per_byte != b.profiles()[i].seconds_per_byte ||
        a.schedule().steps[i].rounds != b.schedule().steps[i].rounds || a.schedule().steps[i].pipelined != b.schedule().steps[i].pipelined) {
      return false;
    }
  }
  return true;
}

}  // namespace

GroupCollective::GroupCollective(const topologies::Cluster& cluster, const std::vector<DeviceGroup>& groups, CollectiveOp op,
                                 Algorithm algorithm, const std::string& where, size_t max_modelled_groups, bool every_group,
                                 const TokenRouting& routing)
    : group_count_(groups.size()) {
  SHARDSIM_CHECK(!groups.empty(), "no groups");
  if (groups[0].devices.size() < 2) {
    throw InputError(where, "a group of one device has nothing to communicate", "groups of 2 or more devices",
                     "use more devices or an axis of size > 1");
  }
  CheckScheduleSize(op, static_cast<int64_t>(groups[0].devices.size()), where);
  std::vector<size_t> modelled;
  const size_t step = std::max<size_t>(1, (groups.size() + max_modelled_groups - 1) / max_modelled_groups);
  for (size_t g = 0; g < groups.size(); g += step) modelled.push_back(g);
  if (modelled.back() != groups.size() - 1) modelled.push_back(groups.size() - 1);

  const std::vector<Algorithm> wanted = algorithm == Algorithm::kAuto ? AutoAlgorithmsFor(op) : std::vector<Algorithm>{algorithm};
  std::vector<double> scratch;  // the models' link loads, one zero per link between uses
  std::string first_reason;
  for (Algorithm a : wanted) {
    Candidate candidate{a, {}, modelled, {}};
    std::string why_not;
    // Every group's schedule (the simulator runs them all), or only the modelled groups'.
    std::vector<size_t> scheduled;
    if (every_group) {
      for (size_t g = 0; g < groups.size(); ++g) scheduled.push_back(g);
    } else {
      scheduled = modelled;
    }
    std::map<size_t, size_t> schedule_of;  // group -> index into candidate.schedules
    for (size_t g : scheduled) {
      auto schedule = BuildSchedule(cluster, groups[g], op, a, &why_not, routing);
      if (!schedule) {
        if (groups.size() > 1) why_not = "group " + std::to_string(g) + " of " + std::to_string(groups.size()) + ": " + why_not;
        break;
      }
      schedule_of[g] = candidate.schedules.size();
      candidate.schedules.push_back(std::move(*schedule));
    }
    if (candidate.schedules.size() != scheduled.size()) {
      if (first_reason.empty()) first_reason = why_not;
      continue;
    }
    // Groups that are translates of one another on a regular fabric cost the same: keep one
    // model per distinct cost profile.
    std::vector<size_t> kept;
    if (scratch.empty()) scratch.assign(cluster.links().size(), 0);
    for (size_t g : modelled) {
      CollectiveModel model(cluster, groups[g], candidate.schedules[schedule_of.at(g)], &scratch);
      bool same = false;
      for (const CollectiveModel& other : candidate.models) same = same || SameCost(other, model);
      if (same) continue;
      candidate.models.push_back(std::move(model));
      kept.push_back(g);
    }
    candidate.modelled = kept;
    candidates_.push_back(std::move(candidate));
  }
  if (candidates_.empty()) {
    std::string valid;
    for (Algorithm a : AlgorithmsFor(op)) {
      bool runs_everywhere = true;
      for (size_t g = 0; g < groups.size() && runs_everywhere; g += every_group ? 1 : std::max<size_t>(1, groups.size() - 1)) {
        std::string unused;
        runs_everywhere = BuildSchedule(cluster, groups[g], op, a, &unused, routing).has_value();
      }
      if (runs_everywhere) valid += ", " + ToString(a);
    }
    throw InputError(where, "algorithm '" + ToString(algorithm) + "' cannot run " + ToString(op) + " here: " + first_reason,
                     "auto" + valid, "use --algorithm auto to pick the fastest that can");
  }
}

GroupCollective::Choice GroupCollective::Fastest(double bytes) const {
  Choice best;
  best.estimate.time_s = std::numeric_limits<double>::infinity();
  for (size_t c = 0; c < candidates_.size(); ++c) {
    const Candidate& candidate = candidates_[c];
    Choice slowest{c, {-1.0, 1}, 0};
    for (size_t m = 0; m < candidate.models.size(); ++m) {
      const CollectiveEstimate e = candidate.models[m].Cost(bytes);
      if (e.time_s > slowest.estimate.time_s) slowest = {c, e, candidate.modelled[m]};
    }
    if (slowest.estimate.time_s < best.estimate.time_s) best = slowest;
  }
  return best;
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
