#include "sim/des_collective.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include <simgrid/s4u.hpp>

#include "sim/child_process.h"

namespace shardsim::sim {
namespace {

namespace sg4 = simgrid::s4u;

// One step of one request, resolved to devices for every group, with flows sorted by source.
struct ResolvedStep {
  std::vector<int64_t> src, dst;
  std::vector<uint64_t> bytes;               // rounds x the per-round bytes (folded)
  std::unordered_map<int64_t, std::pair<size_t, size_t>> by_source;  // device -> [begin, end)
  std::unordered_map<int64_t, int64_t> incoming;                     // device -> flows it receives
  double sleep_s = 0;                        // (rounds - 1) x the step's slowest route latency
};

// Routes of every (source, destination) pair the simulation uses, found one source at a time.
class RouteTable {
 public:
  explicit RouteTable(const topologies::Cluster& cluster) : cluster_(cluster) {}
  // Routes every pair of `pairs` not yet known.
  void Add(const std::vector<std::pair<int64_t, int64_t>>& pairs) {
    std::map<int64_t, std::vector<int64_t>> missing;
    for (const auto& [src, dst] : pairs) {
      if (!routes_.count(Key(src, dst))) missing[src].push_back(dst);
    }
    for (auto& [src, dsts] : missing) {
      std::sort(dsts.begin(), dsts.end());
      dsts.erase(std::unique(dsts.begin(), dsts.end()), dsts.end());
      auto found = cluster_.RoutesFrom(src, dsts);
      for (size_t i = 0; i < dsts.size(); ++i) routes_[Key(src, dsts[i])] = std::move(found[i]);
    }
  }
  const std::vector<int64_t>& Get(int64_t src, int64_t dst) const { return routes_.at(Key(src, dst)); }

 private:
  uint64_t Key(int64_t src, int64_t dst) const {
    return static_cast<uint64_t>(src) * static_cast<uint64_t>(cluster_.num_devices()) + static_cast<uint64_t>(dst);
  }
  const topologies::Cluster& cluster_;
  std::unordered_map<uint64_t, std::vector<int64_t>> routes_;
};

std::vector<std::vector<ResolvedStep>> Resolve(const topologies::Cluster& cluster, const std::vector<DeviceGroup>& groups,
                                               const std::vector<DesRequest>& requests, RouteTable& table, DesReport& report) {
  std::vector<std::vector<ResolvedStep>> resolved;
  for (const DesRequest& request : requests) {
    std::vector<ResolvedStep> steps;
    std::map<int64_t, std::pair<double, std::set<size_t>>> load;  // link -> busy seconds, groups
    const size_t step_count = request.schedules.front()->steps.size();
    for (size_t s = 0; s < step_count; ++s) {
      const Step& step = request.schedules.front()->steps[s];
      ResolvedStep r;
      const int64_t k = step.pipelined ? request.chunks : 1;
      const int64_t rounds = step.rounds + k - 1;
      if (step.flows.empty() || step.rounds == 0) {
        steps.push_back(r);
        continue;
      }
      std::vector<std::tuple<int64_t, int64_t, uint64_t>> flows;
      std::vector<std::pair<int64_t, int64_t>> pairs;
      for (size_t g = 0; g < groups.size(); ++g) {
        for (const Flow& f : request.schedules[g]->steps[s].flows) {
          pairs.emplace_back(groups[g].devices[static_cast<size_t>(f.src)], groups[g].devices[static_cast<size_t>(f.dst)]);
        }
      }
      table.Add(pairs);
      double latency = 0;
      for (size_t g = 0; g < groups.size(); ++g) {
        const Step& group_step = request.schedules[g]->steps[s];
        for (const Flow& f : group_step.flows) {
          const int64_t src = groups[g].devices[static_cast<size_t>(f.src)];
          const int64_t dst = groups[g].devices[static_cast<size_t>(f.dst)];
          const double bytes = f.fraction * request.bytes / static_cast<double>(k) * static_cast<double>(rounds);
          flows.emplace_back(src, dst, static_cast<uint64_t>(std::max(1.0, std::llround(bytes) * 1.0)));
          double route_latency = 0;
          for (int64_t id : table.Get(src, dst)) {
            const topologies::Link& link = cluster.links()[static_cast<size_t>(id)];
            route_latency += link.latency_s;
            auto& [busy, users] = load[id];
            busy += bytes / (link.bandwidth_bytes_per_s * link.efficiency);
            users.insert(g);
          }
          latency = std::max(latency, route_latency);
        }
      }
      std::sort(flows.begin(), flows.end());
      for (const auto& [src, dst, bytes] : flows) {
        if (!r.by_source.count(src)) r.by_source[src] = {r.src.size(), r.src.size()};
        r.by_source[src].second = r.src.size() + 1;
        r.src.push_back(src);
        r.dst.push_back(dst);
        r.bytes.push_back(bytes);
        ++r.incoming[dst];
      }
      r.sleep_s = static_cast<double>(rounds - 1) * latency;
      report.messages += static_cast<int64_t>(flows.size());
      steps.push_back(std::move(r));
    }
    // The call's fixed cost before its first step that moves anything (a step without flows is
    // skipped whole, its sleep too).
    const auto first = std::find_if(steps.begin(), steps.end(), [](const ResolvedStep& r) { return !r.src.empty(); });
    if (first != steps.end()) first->sleep_s += request.schedules.front()->launch_s;
    std::vector<LinkLoad> busiest;
    for (const auto& [id, entry] : load) busiest.push_back({id, entry.first, static_cast<int64_t>(entry.second.size())});
    std::sort(busiest.begin(), busiest.end(), [](const LinkLoad& a, const LinkLoad& b) {
      return a.busy_s != b.busy_s ? a.busy_s > b.busy_s : a.link < b.link;
    });
    if (busiest.size() > 5) busiest.resize(5);
    report.busiest_links.push_back(busiest);
    resolved.push_back(std::move(steps));
  }
  return resolved;
}

// A reusable barrier over `parties` actors whose cost per round is O(parties): a counter under a
// mutex and one notify_all (SimGrid 3.32's s4u::Barrier costs O(parties) per wait, O(parties^2)
// per round, which dominated runs on thousands of devices).
class RoundBarrier {
 public:
  explicit RoundBarrier(int64_t parties)
      : parties_(parties), mutex_(sg4::Mutex::create()), released_(sg4::ConditionVariable::create()) {}
  void Wait() {
    std::unique_lock<sg4::Mutex> lock(*mutex_);
    const int64_t round = round_;
    if (++arrived_ == parties_) {
      arrived_ = 0;
      ++round_;
      released_->notify_all();
      return;
    }
    while (round_ == round) released_->wait(lock);
  }

 private:
  int64_t parties_;
  int64_t arrived_ = 0;
  int64_t round_ = 0;
  sg4::MutexPtr mutex_;
  sg4::ConditionVariablePtr released_;
};

// Runs the simulation in this (child) process and writes "wall_s rss_bytes time_0 time_1 ...".
void RunEngine(const topologies::Cluster& cluster, const std::vector<DeviceGroup>& groups, const RouteTable& table,
               const std::vector<std::vector<ResolvedStep>>& requests, int fd) {
  std::vector<std::string> args = SimGridArguments("shardsim-des");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  int argc = static_cast<int>(argv.size());
  sg4::Engine engine(&argc, argv.data());
  sg4::NetZone* zone = sg4::create_full_zone("cluster");

  std::vector<int64_t> participants;
  for (const DeviceGroup& g : groups) participants.insert(participants.end(), g.devices.begin(), g.devices.end());
  std::sort(participants.begin(), participants.end());
  participants.erase(std::unique(participants.begin(), participants.end()), participants.end());
  std::unordered_map<int64_t, sg4::Host*> host;
  for (int64_t d : participants) host[d] = zone->create_host("d" + std::to_string(d), 1e9);
  std::unordered_map<int64_t, sg4::Link*> links;
  std::set<std::pair<int64_t, int64_t>> routed;
  for (const auto& steps : requests) {
    for (const ResolvedStep& step : steps) {
      for (size_t i = 0; i < step.src.size(); ++i) {
        if (!routed.insert({step.src[i], step.dst[i]}).second) continue;
        std::vector<sg4::LinkInRoute> route;
        for (int64_t id : table.Get(step.src[i], step.dst[i])) {
          auto it = links.find(id);
          if (it == links.end()) {
            const topologies::Link& l = cluster.links()[static_cast<size_t>(id)];
            sg4::Link* link = zone->create_link("l" + std::to_string(id), l.bandwidth_bytes_per_s * l.efficiency)->set_latency(l.latency_s);
            link->seal();
            it = links.emplace(id, link).first;
          }
          route.emplace_back(it->second);
        }
        zone->add_route(host[step.src[i]]->get_netpoint(), host[step.dst[i]]->get_netpoint(), nullptr, nullptr, route, false);
      }
    }
  }
  zone->seal();

  // One actor per device. Steps are synchronous, as in the analytic model: every device finishes
  // step s (its sends and its receives) before any starts step s + 1.
  std::vector<double> start(requests.size(), 0), end(requests.size(), 0);
  RoundBarrier barrier(static_cast<int64_t>(participants.size()));
  int payload = 0;  // what every message carries (its size is what counts); outlives engine.run()
  for (size_t p = 0; p < participants.size(); ++p) {
    const int64_t device = participants[p];
    sg4::Actor::create("a" + std::to_string(device), host[device], [&, device, p] {
      for (size_t r = 0; r < requests.size(); ++r) {
        barrier.Wait();
        if (p == 0) start[r] = sg4::Engine::get_clock();
        for (size_t s = 0; s < requests[r].size(); ++s) {
          const ResolvedStep& step = requests[r][s];
          if (step.src.empty()) continue;
          const auto in = step.incoming.find(device);
          const auto out = step.by_source.find(device);
          if (step.sleep_s > 0) sg4::this_actor::sleep_for(step.sleep_s);
          const std::string suffix = "/" + std::to_string(r) + "/" + std::to_string(s);
          std::vector<sg4::CommPtr> comms;
          if (out != step.by_source.end()) {
            for (size_t i = out->second.first; i < out->second.second; ++i) {
              comms.push_back(sg4::Mailbox::by_name("m" + std::to_string(step.dst[i]) + suffix)->put_async(&payload, step.bytes[i]));
            }
          }
          std::vector<int*> received(in == step.incoming.end() ? 0 : static_cast<size_t>(in->second));
          sg4::Mailbox* mine = sg4::Mailbox::by_name("m" + std::to_string(device) + suffix);
          for (int*& slot : received) comms.push_back(mine->get_async<int>(&slot));
          sg4::Comm::wait_all(comms);
          barrier.Wait();
        }
        end[r] = std::max(end[r], sg4::Engine::get_clock());
      }
    });
  }
  const auto wall_start = std::chrono::steady_clock::now();
  engine.run();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::ostringstream message;
  message.precision(17);
  message << wall << " " << static_cast<int64_t>(usage.ru_maxrss) * 1024;
  for (size_t r = 0; r < requests.size(); ++r) message << " " << end[r] - start[r];
  message << "\n";
  WriteAll(fd, message.str());
}

// Distinct (source, destination) members of a schedule's flows; past 2^20 flows, the flows
// themselves (an upper bound that costs nothing to count).
int64_t RoutedPairs(const Schedule& schedule) {
  int64_t flows = 0;
  for (const Step& step : schedule.steps) flows += static_cast<int64_t>(step.flows.size());
  if (flows > (int64_t{1} << 20)) return flows;
  std::vector<uint64_t> pairs;
  pairs.reserve(static_cast<size_t>(flows));
  for (const Step& step : schedule.steps) {
    for (const Flow& f : step.flows) pairs.push_back(static_cast<uint64_t>(static_cast<uint32_t>(f.src)) << 32 | static_cast<uint32_t>(f.dst));
  }
  std::sort(pairs.begin(), pairs.end());
  return static_cast<int64_t>(std::unique(pairs.begin(), pairs.end()) - pairs.begin());
}

}  // namespace

DesLoad CollectivesLoad(const std::vector<DeviceGroup>& groups, const std::vector<DesRequest>& requests) {
  DesLoad load;
  std::vector<int64_t> participants;
  for (const DeviceGroup& g : groups) participants.insert(participants.end(), g.devices.begin(), g.devices.end());
  std::sort(participants.begin(), participants.end());
  load.hosts = std::unique(participants.begin(), participants.end()) - participants.begin();
  load.actors = load.hosts;  // one per device
  std::set<const Schedule*> routed;
  for (const DesRequest& request : requests) {
    const size_t steps = request.schedules.front()->steps.size();
    for (size_t s = 0; s < steps; ++s) {
      int64_t flows = 0;
      for (const Schedule* schedule : request.schedules) {
        const Step& step = schedule->steps[s];
        if (step.rounds > 0) flows += static_cast<int64_t>(step.flows.size());
      }
      load.AddLaunches(flows, 1, CollectiveSecondsPerFlow(flows));
      load.in_flight = std::max(load.in_flight, flows);
      load.kept_records += flows;                   // resolved in the parent, kept to the end
      load.activities += 2 * load.actors;           // every device's barrier waits
    }
    for (const Schedule* schedule : request.schedules) {
      if (routed.insert(schedule).second) load.routes += RoutedPairs(*schedule);
    }
  }
  return load;
}

namespace {

std::string Describe(CollectiveOp op, const std::vector<DeviceGroup>& groups) {
  return "the SimGrid " + ToString(op) + " over " + std::to_string(groups.size()) + (groups.size() == 1 ? " group" : " groups") + " of " +
         std::to_string(groups.front().devices.size()) + " devices";
}

constexpr const char* kHint = "use the analytic engine (the same schedules, without contention), fewer sizes or a smaller group";

}  // namespace

void CheckCollectivesFit(const std::vector<DeviceGroup>& groups, CollectiveOp op, size_t requests, const DesLimits& limits) {
  DesLoad load = CollectivesLoad(groups, {});
  for (size_t r = 0; r < requests; ++r) {
    int64_t flows = 0;
    for (const DeviceGroup& g : groups) {
      const int64_t n = static_cast<int64_t>(g.devices.size());
      flows += op == CollectiveOp::kAllToAll ? n * (n - 1) : n - 1;
    }
    load.AddLaunches(flows, 1, CollectiveSecondsPerFlow(flows));
    load.in_flight = std::max(load.in_flight, flows);
    load.kept_records += flows;
    if (r == 0) load.routes = flows;
  }
  CheckDesFits(load, EstimateDesCost(load), limits, Describe(op, groups), kHint);
}

DesReport SimulateCollectives(const topologies::Cluster& cluster, const std::vector<DeviceGroup>& groups,
                              const std::vector<DesRequest>& requests, const DesLimits& limits) {
  DesReport report;
  report.folded = "each step's identical rounds run as one transfer of rounds x the bytes after (rounds - 1) latencies";
  report.load = CollectivesLoad(groups, requests);
  report.estimate = EstimateDesCost(report.load);
  ChildGuard guard;
  guard.limits = limits;
  guard.what = Describe(requests.front().schedules.front()->op, groups);
  guard.hint = kHint;
  guard.estimated_seconds = report.estimate.seconds;
  guard.estimated_bytes = report.estimate.bytes;
  CheckDesFits(report.load, report.estimate, limits, guard.what, guard.hint);
  RouteTable table(cluster);
  const auto resolved = Resolve(cluster, groups, requests, table, report);
  Child child = StartChild([&](int fd) { RunEngine(cluster, groups, table, resolved, fd); });
  const std::string text = std::move(FinishChildren({child}, guard).front());
  if (text.empty()) throw std::runtime_error("the SimGrid simulation process returned nothing");
  std::istringstream in(text);
  in >> report.wall_s >> report.peak_rss_bytes;
  report.times_s.resize(requests.size());
  for (double& t : report.times_s) {
    in >> t;
    if (!in || !(t >= 0)) throw std::runtime_error("the SimGrid simulation returned no time for a request");
  }
  return report;
}

}  // namespace shardsim::sim
