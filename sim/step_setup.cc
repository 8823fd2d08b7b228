#include "sim/step_setup.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <optional>
#include <set>

#include "core/error.h"
#include "core/suggest.h"
#include "sim/collective_schedule.h"
#include "sim/schedule_player.h"

namespace shardsim::sim {

using strategies::LayerKind;
using strategies::Op;
using strategies::Phase;
using strategies::StepProgram;

namespace {

uint64_t PairKey(int64_t src, int64_t dst, int64_t devices) { return static_cast<uint64_t>(src) * static_cast<uint64_t>(devices) + static_cast<uint64_t>(dst); }

// Builds the setup step by step; the member functions share the mesh, routes and schedules.
class Preparer {
 public:
  Preparer(const StepProgram& program, const ClusterSpec& cluster, const topologies::Cluster& graph, AxisCollectives& collectives, bool fold)
      : program_(program), plan_(program.plan), graph_(graph), collectives_(collectives), mesh_(plan_.mesh, plan_.mesh_order) {
    setup_.program = &program;
    setup_.roofline = RooflineOf(cluster, plan_.dtype, static_cast<double>(program.tokens_per_microbatch), Fp8RecipeOf(plan_), AttentionKernelOf(plan_));
    setup_.fold = fold;
    setup_.graph = &graph;
  }

  StepSetup Run() {
    MakeSets();
    MakeActions();
    MakeKinds();
    DecideFolding();
    for (ActorSet& set : setup_.sets) MakeComms(set);
    std::set<int64_t> hosts;
    for (const ActorSet& set : setup_.sets) {
      hosts.insert(set.rank);
      auto add = [&](const FlowStep& step) {
        hosts.insert(step.src.begin(), step.src.end());
        hosts.insert(step.dst.begin(), step.dst.end());
      };
      for (const CommPlan& c : set.comms) for (const FlowStep& s : c.steps) add(s);
      for (const PipeSend& s : set.sends) add(s.flows);
    }
    setup_.hosts.assign(hosts.begin(), hosts.end());
    return std::move(setup_);
  }

 private:
  int64_t StageOf(int64_t rank) const { return mesh_.Coordinate(rank, "pipeline"); }

  void MakeSets() {
    const int64_t n = mesh_.size(), p = plan_.mesh.pipeline;
    setup_.set_of_rank.assign(static_cast<size_t>(n), -1);
    if (setup_.fold) {
      setup_.sets.resize(static_cast<size_t>(p));
      for (int64_t s = 0; s < p; ++s) setup_.sets[static_cast<size_t>(s)].stage = s;
      for (int64_t r = 0; r < n; ++r) {
        ActorSet& set = setup_.sets[static_cast<size_t>(StageOf(r))];
        set.devices.push_back(r);
        setup_.set_of_rank[static_cast<size_t>(r)] = StageOf(r);
      }
      for (ActorSet& set : setup_.sets) set.rank = set.devices.front();
    } else {
      for (int64_t r = 0; r < n; ++r) {
        ActorSet set;
        set.rank = r;
        set.stage = StageOf(r);
        set.devices = {r};
        setup_.set_of_rank[static_cast<size_t>(r)] = r;
        setup_.sets.push_back(std::move(set));
      }
    }
    setup_.stage_layers.assign(static_cast<size_t>(p), 0);
    setup_.stage_last_backward_s.assign(static_cast<size_t>(p), 0);
    const ProgramCosts costs = CostProgram(program_, setup_.roofline, collectives_);
    for (int64_t s = 0; s < p; ++s) {
      const auto& chunks = program_.stages[static_cast<size_t>(s)].chunks;
      for (size_t c = 0; c < chunks.size(); ++c) {
        for (const auto& [kind, count, sixteen_bit] : chunks[c].layers) setup_.stage_layers[static_cast<size_t>(s)] += count;
        const auto& slot = costs.slots[costs.Slot(s, static_cast<int64_t>(c))];
        setup_.stage_last_backward_s[static_cast<size_t>(s)] += slot[1].total_s + slot[2].total_s;
      }
    }
  }

  void MakeActions() {
    for (size_t k = 0; k < program_.layer_programs.size(); ++k) {
      const auto& ops = program_.layer_programs[k].ops;
      for (int ph = 0; ph < 4; ++ph) {
        std::vector<Action>& actions = setup_.actions[k][static_cast<size_t>(ph)];
        // Tensor collectives overlapped with their own product, by that product.
        std::vector<std::vector<int32_t>> fused_on(ops.size());
        std::vector<bool> fused(ops.size(), false);
        for (size_t i = 0; i < ops.size(); ++i) {
          if (ActionPhase(ops[i].phase) != ph || !ops[i].is_comm() || collectives_.Seconds(ops[i]) <= 0) continue;
          if (const int64_t partner = strategies::OverlapPartner(ops, i); partner >= 0) {
            fused_on[static_cast<size_t>(partner)].push_back(static_cast<int32_t>(i));
            fused[i] = true;
          }
        }
        for (size_t i = 0; i < ops.size(); ++i) {
          const Op& op = ops[i];
          if (ActionPhase(op.phase) != ph || fused[i]) continue;
          if (!fused_on[i].empty()) {
            // The product in parts, cut where a collective's part of it (Op::partner_from,
            // partner_to) starts or ends: each collective is posted as its part starts and
            // waited for as it ends (a context all-gather under the attention's local block,
            // dK/dV under the rest). Collectives over the whole product: one part.
            std::set<double> cuts = {0.0, 1.0};
            for (int32_t c : fused_on[i]) cuts.insert({ops[static_cast<size_t>(c)].partner_from, ops[static_cast<size_t>(c)].partner_to});
            const double seconds = setup_.roofline.Seconds(op);
            const bool whole = cuts.size() == 2;
            for (auto from = cuts.begin(), to = std::next(from); to != cuts.end(); ++from, ++to) {
              int32_t posted = 0;
              for (int32_t c : fused_on[i]) {
                if (ops[static_cast<size_t>(c)].partner_from != *from) continue;
                actions.push_back({Action::kFused, 0, 0, 0, c});
                ++posted;
              }
              actions.push_back({Action::kCompute, seconds * (*to - *from), static_cast<int32_t>(i), 1, -1, posted, !whole});
            }
            continue;
          }
          if (!op.is_comm()) {
            const double seconds = setup_.roofline.Seconds(op);
            if (!actions.empty() && actions.back().kind == Action::kCompute && actions.back().fused == 0 && !actions.back().part &&
                actions.back().first_op + actions.back().ops == static_cast<int32_t>(i)) {
              actions.back().seconds += seconds;
              ++actions.back().ops;
            } else {
              actions.push_back({Action::kCompute, seconds, static_cast<int32_t>(i), 1, -1});
            }
            continue;
          }
          if (collectives_.Seconds(op) <= 0) continue;  // one device on its axes
          actions.push_back({op.overlapped ? Action::kOverlapped : Action::kBlocking, 0, 0, 0, static_cast<int32_t>(i)});
        }
        // What the compute loses to collectives' kernels on its units (PhaseCost::borrowed_s),
        // run after it, as the estimate counts it: the engine shares links, not SMs.
        const double borrowed = CostPhase(program_.layer_programs[k], static_cast<strategies::Phase>(ph), setup_.roofline, collectives_).borrowed_s;
        if (borrowed > 0) actions.push_back({Action::kCompute, borrowed, 0, 0, -1, 0, true});
      }
    }
  }

  int KindOf(const std::vector<std::string>& axes) {
    const std::string name = JoinNames(axes, ",");
    for (size_t i = 0; i < setup_.kinds.size(); ++i) {
      if (setup_.kinds[i].name == name) return static_cast<int>(i);
    }
    setup_.kinds.push_back({name, axes, {}});
    return static_cast<int>(setup_.kinds.size() - 1);
  }

  // Every collective op of the program with more than one device on its axes.
  std::vector<const Op*> CommOps() const {
    std::vector<const Op*> out;
    auto add = [&](const Op& op) {
      if (op.is_comm() && op.stream != strategies::Stream::kHost && collectives_.Seconds(op) > 0) out.push_back(&op);
    };
    for (const auto& layer : program_.layer_programs) for (const Op& op : layer.ops) add(op);
    for (const auto& stage : program_.stages) for (const Op& op : stage.step_ops) add(op);
    return out;
  }

  void MakeKinds() {
    for (const Op* op : CommOps()) KindOf(op->axes);
    // Host copies (activation offloading): their own kind, no flows; before the pipeline's,
    // which stays the last.
    if (plan_.offload_layers > 0) host_kind_ = KindOf({"host"});
    if (plan_.mesh.pipeline > 1) pipeline_kind_ = KindOf({"pipeline-neighbours"});
    for (CommKind& kind : setup_.kinds) kind.folded.assign(static_cast<size_t>(plan_.mesh.pipeline), setup_.fold);
  }

  const std::vector<int64_t>& Route(int64_t src, int64_t dst) {
    const uint64_t key = PairKey(src, dst, graph_.num_devices());
    auto it = setup_.routes.find(key);
    if (it == setup_.routes.end()) it = setup_.routes.emplace(key, graph_.Route(src, dst)).first;
    return it->second;
  }

  const Schedule& ScheduleFor(const std::vector<int64_t>& group, CollectiveOp op, Algorithm algorithm, const TokenRouting& routing) {
    const auto key = std::make_tuple(group, static_cast<int>(op), static_cast<int>(algorithm), routing);
    auto it = schedules_.find(key);
    if (it == schedules_.end()) {
      std::string why;
      std::optional<Schedule> schedule = BuildSchedule(graph_, DeviceGroup{group}, op, algorithm, &why, routing);
      SHARDSIM_CHECK(schedule.has_value(), "the analytic model's algorithm cannot run on a group: " + why);
      it = schedules_.emplace(key, std::move(*schedule)).first;
    }
    return it->second;
  }

  // The pipeline's stage-to-stage transfers (both directions of every neighbour pair).
  std::set<std::pair<int64_t, int64_t>> Transfers() const {
    std::set<std::pair<int64_t, int64_t>> out;
    const PipelinePath path = PathOf(program_);
    for (size_t slot = 0; slot < path.after.size(); ++slot) {
      if (path.after[slot] < 0) continue;
      const int64_t a = path.StageOf(static_cast<int64_t>(slot)), b = path.StageOf(path.after[slot]);
      if (a == b) continue;
      out.insert({a, b});
      out.insert({b, a});
    }
    return out;
  }

  // The symmetry rule: a kind's groups on a stage fold into one when they use pairwise disjoint
  // links that no other group of any kind uses, and see the same links (latency and bandwidth).
  void DecideFolding() {
    if (!setup_.fold) {
      setup_.simulated.push_back("every device and every group's flows (--no-fold)");
      return;
    }
    struct GroupLinks {
      int kind;
      int64_t stage;
      std::vector<int64_t> links;
      double signature = 0;
    };
    std::vector<GroupLinks> groups;
    auto links_of = [&](const std::vector<std::pair<int64_t, int64_t>>& pairs, GroupLinks& g) {
      for (const auto& [src, dst] : pairs) {
        for (int64_t id : Route(src, dst)) {
          g.links.push_back(id);
          const topologies::Link& link = graph_.links()[static_cast<size_t>(id)];
          g.signature += link.latency_s * 1e6 + 1e9 / (link.bandwidth_bytes_per_s * link.efficiency);
        }
      }
      std::sort(g.links.begin(), g.links.end());
      g.links.erase(std::unique(g.links.begin(), g.links.end()), g.links.end());
    };
    // Collectives: every group of each kind, the flows of each algorithm its ops use.
    std::map<int, std::set<std::tuple<int, int, TokenRouting>>> algorithms;  // kind -> (op, algorithm, routing)
    for (const Op* op : CommOps()) {
      const auto [algorithm, chunks] = collectives_.Choice(op->collective, op->axes, op->comm_bytes, op->routing);
      algorithms[KindOf(op->axes)].insert({static_cast<int>(op->collective), static_cast<int>(algorithm), op->routing});
    }
    for (const auto& [kind, used] : algorithms) {
      for (const std::vector<int64_t>& group : mesh_.Groups(setup_.kinds[static_cast<size_t>(kind)].axes)) {
        std::vector<std::pair<int64_t, int64_t>> pairs;
        for (const auto& [op, algorithm, routing] : used) {
          for (const Step& step : ScheduleFor(group, static_cast<CollectiveOp>(op), static_cast<Algorithm>(algorithm), routing).steps) {
            for (const Flow& f : step.flows) pairs.emplace_back(group[static_cast<size_t>(f.src)], group[static_cast<size_t>(f.dst)]);
          }
        }
        std::sort(pairs.begin(), pairs.end());
        pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
        GroupLinks g{kind, StageOf(group.front()), {}, 0};
        links_of(pairs, g);
        groups.push_back(std::move(g));
      }
    }
    // Pipeline neighbours: one lane per device and transfer, both directions.
    if (pipeline_kind_ >= 0) {
      const int64_t stride = mesh_.Stride("pipeline");
      for (const auto& [a, b] : Transfers()) {
        if (a > b) continue;
        for (int64_t r : setup_.sets[static_cast<size_t>(a)].devices) {
          const int64_t peer = r + (b - a) * stride;
          GroupLinks g{pipeline_kind_, a, {}, 0};
          links_of({{r, peer}, {peer, r}}, g);
          groups.push_back(std::move(g));
        }
      }
    }
    std::vector<int64_t> owner(graph_.links().size(), -1);
    std::vector<char> shared(graph_.links().size(), 0);
    for (size_t g = 0; g < groups.size(); ++g) {
      for (int64_t id : groups[g].links) {
        if (owner[static_cast<size_t>(id)] < 0) {
          owner[static_cast<size_t>(id)] = static_cast<int64_t>(g);
        } else {
          shared[static_cast<size_t>(id)] = 1;
        }
      }
    }
    std::map<std::pair<int, int64_t>, std::pair<int64_t, bool>> count;  // (kind, stage) -> groups, foldable
    std::map<std::pair<int, int64_t>, double> signature;
    for (const GroupLinks& g : groups) {
      auto& [n, foldable] = count.try_emplace({g.kind, g.stage}, 0, true).first->second;
      ++n;
      const bool private_links = std::none_of(g.links.begin(), g.links.end(), [&](int64_t id) { return shared[static_cast<size_t>(id)] != 0; });
      const auto sig = signature.try_emplace({g.kind, g.stage}, g.signature).first->second;
      if (!private_links || std::abs(sig - g.signature) > 1e-9 * std::max(1.0, std::abs(sig))) foldable = false;
    }
    std::map<int, std::pair<int64_t, int64_t>> folded_stages;  // kind -> (stages folded, groups stood for)
    for (const auto& [key, value] : count) {
      const auto& [kind, stage] = key;
      setup_.kinds[static_cast<size_t>(kind)].folded[static_cast<size_t>(stage)] = value.second;
      auto& [stages, stood] = folded_stages[kind];
      if (value.second) ++stages, stood += value.first;
    }
    const int64_t p = plan_.mesh.pipeline;
    setup_.folded.push_back("the devices of each pipeline stage: one actor set per stage (" + std::to_string(p) + " sets for " +
                            std::to_string(mesh_.size()) + " devices): they run the same ops in the same order");
    for (size_t k = 0; k < setup_.kinds.size(); ++k) {
      const auto found = folded_stages.find(static_cast<int>(k));
      if (found == folded_stages.end()) continue;
      const auto& [stages, stood] = found->second;
      const std::string what = setup_.kinds[k].name == "pipeline-neighbours" ? "pipeline transfers" : "collectives over " + setup_.kinds[k].name;
      int64_t total = 0;
      for (const auto& [key, value] : count) total += key.first == static_cast<int>(k) ? 1 : 0;
      if (stages > 0) {
        setup_.folded.push_back(what + ": one group simulated for " + std::to_string(stood) + " groups on " + std::to_string(stages) +
                                " stage(s) (disjoint, identical links no other traffic uses)");
      }
      if (stages < total) {
        setup_.simulated.push_back(what + ": every group's flows on " + std::to_string(total - stages) +
                                   " stage(s) (their links carry other groups' traffic)");
      }
    }
  }

  // Resolves `op` of `bytes` over the groups `groups` into flow steps (identical rounds folded).
  std::vector<FlowStep> Resolve(const Op& op, double bytes, const std::vector<std::vector<int64_t>>& groups, int64_t* flows) {
    const auto [algorithm, chunks] = collectives_.Choice(op.collective, op.axes, bytes, op.routing);
    std::vector<FlowStep> steps;
    double launch = 0;
    for (const std::vector<int64_t>& group : groups) {
      const Schedule& schedule = ScheduleFor(group, op.collective, algorithm, op.routing);
      launch = std::max(launch, schedule.launch_s);
      if (steps.size() < schedule.steps.size()) steps.resize(schedule.steps.size());
      for (size_t s = 0; s < schedule.steps.size(); ++s) {
        const Step& step = schedule.steps[s];
        if (step.flows.empty() || step.rounds == 0) continue;
        const int64_t k = step.pipelined ? chunks : 1, rounds = step.rounds + k - 1;
        double latency = 0;
        for (const Flow& f : step.flows) {
          const int64_t src = group[static_cast<size_t>(f.src)], dst = group[static_cast<size_t>(f.dst)];
          steps[s].src.push_back(src);
          steps[s].dst.push_back(dst);
          steps[s].bytes.push_back(std::max(1.0, f.fraction * bytes / static_cast<double>(k) * static_cast<double>(rounds)));
          double route_latency = 0;
          for (int64_t id : Route(src, dst)) route_latency += graph_.links()[static_cast<size_t>(id)].latency_s;
          latency = std::max(latency, route_latency);
          ++*flows;
        }
        steps[s].sleep_s = std::max(steps[s].sleep_s, static_cast<double>(rounds - 1) * latency);
      }
    }
    if (!steps.empty()) steps.front().sleep_s += launch;  // the call's fixed cost first (Schedule::launch_s)
    return steps;
  }

  CommPlan MakeComm(const ActorSet& set, const Op& op, double bytes, bool step_op, int64_t op_id) {
    CommPlan plan;
    plan.op = &op;
    if (op.stream == strategies::Stream::kHost) {
      // A copy between the device and its host's memory: its link is the device's own (no other
      // traffic crosses it), so it takes its uncontended time on the host stream.
      plan.kind = host_kind_;
      plan.bytes = bytes;
      plan.uncontended_s = collectives_.HostCopySeconds(bytes);
      plan.group = {set.rank};
      plan.rendezvous = set.rank * 65536 + op_id;
      FlowStep wait;
      wait.sleep_s = plan.uncontended_s;
      plan.steps.push_back(std::move(wait));
      return plan;
    }
    plan.kind = KindOf(op.axes);
    plan.bytes = bytes;
    plan.uncontended_s = collectives_.Seconds(op.collective, op.axes, bytes, op.routing);
    plan.group = mesh_.Group(set.rank, op.axes);
    plan.rendezvous = plan.group.front() * 65536 + op_id;
    std::set<int64_t> members;
    for (int64_t r : plan.group) {
      const int64_t s = StageOf(r);
      const auto& ops = program_.stages[static_cast<size_t>(s)].step_ops;
      const bool runs = !step_op || std::any_of(ops.begin(), ops.end(), [&](const Op& o) { return o.name == op.name; });
      if (runs) members.insert(setup_.set_of_rank[static_cast<size_t>(r)]);
    }
    plan.members = static_cast<int64_t>(members.size());
    std::vector<std::vector<int64_t>> groups;
    if (!setup_.fold || setup_.kinds[static_cast<size_t>(plan.kind)].folded[static_cast<size_t>(set.stage)]) {
      groups.push_back(plan.group);
    } else {
      // Every group among the devices the meeting sets stand for.
      std::set<std::vector<int64_t>> all;
      for (int64_t m : members) {
        for (int64_t d : setup_.sets[static_cast<size_t>(m)].devices) all.insert(mesh_.Group(d, op.axes));
      }
      groups.assign(all.begin(), all.end());
    }
    plan.steps = Resolve(op, bytes, groups, &plan.flows);
    // A calibrated cluster's measured curve: its time beyond the model's is waited out first.
    if (!plan.steps.empty()) plan.steps.front().sleep_s += collectives_.BeyondModelSeconds(op.collective, op.axes, bytes, op.routing);
    return plan;
  }

  void MakeComms(ActorSet& set) {
    int64_t op_id = 0;
    for (size_t k = 0; k < program_.layer_programs.size(); ++k) {
      const auto& ops = program_.layer_programs[k].ops;
      set.layer_comm[k].assign(ops.size(), -1);
      for (size_t i = 0; i < ops.size(); ++i, ++op_id) {
        if (!ops[i].is_comm() || collectives_.Seconds(ops[i]) <= 0) continue;
        set.layer_comm[k][i] = static_cast<int32_t>(set.comms.size());
        set.comms.push_back(MakeComm(set, ops[i], ops[i].comm_bytes, false, op_id));
      }
    }
    const auto& step_ops = program_.stages[static_cast<size_t>(set.stage)].step_ops;
    set.step_comm.assign(step_ops.size(), -1);
    for (size_t i = 0; i < step_ops.size(); ++i) {
      const Op& op = step_ops[i];
      // Step ops are told apart by name (stages list different ones), numbered after the layer ops.
      const int64_t id = op_id + static_cast<int64_t>(step_op_ids_.try_emplace(op.name, step_op_ids_.size()).first->second);
      if (!op.is_comm() || collectives_.Seconds(op) <= 0) continue;
      // Overlapped gradient reductions go out in one bucket per layer of the stage.
      const double bytes = op.overlapped ? op.comm_bytes / static_cast<double>(std::max<int64_t>(1, setup_.stage_layers[static_cast<size_t>(set.stage)])) : op.comm_bytes;
      set.step_comm[i] = static_cast<int32_t>(set.comms.size());
      set.comms.push_back(MakeComm(set, op, bytes, true, id));
      if (op.overlapped) {
        const auto stage = static_cast<size_t>(set.stage);
        set.step_borrowed_s += OverlappedStepReduction(collectives_.Seconds(op), setup_.stage_layers[stage], setup_.stage_last_backward_s[stage],
                                                       collectives_.Units(op), setup_.roofline.units)
                                   .borrowed_s;
      }
    }
    if (pipeline_kind_ < 0) return;
    const int64_t stride = mesh_.Stride("pipeline");
    const double bytes = program_.pipeline_send.comm_bytes;
    for (const auto& [a, b] : Transfers()) {
      if (a != set.stage) continue;
      PipeSend send;
      send.to_stage = b;
      send.receiver = setup_.set_of_rank[static_cast<size_t>(set.rank + (b - a) * stride)];
      send.uncontended_s = collectives_.Seconds(CollectiveOp::kPermute, {"pipeline"}, bytes);
      const bool one_lane = !setup_.fold || setup_.kinds[static_cast<size_t>(pipeline_kind_)].folded[static_cast<size_t>(std::min(a, b))];
      for (int64_t r : set.devices) {
        if (one_lane && r != set.rank) continue;
        const int64_t peer = r + (b - a) * stride;
        send.flows.src.push_back(r);
        send.flows.dst.push_back(peer);
        send.flows.bytes.push_back(std::max(1.0, bytes));
        Route(r, peer);
      }
      set.sends.push_back(std::move(send));
    }
  }

  const StepProgram& program_;
  const PlanSpec& plan_;
  const topologies::Cluster& graph_;
  AxisCollectives& collectives_;
  LogicalMesh mesh_;
  StepSetup setup_;
  int pipeline_kind_ = -1, host_kind_ = -1;
  std::map<std::tuple<std::vector<int64_t>, int, int, TokenRouting>, Schedule> schedules_;
  std::map<std::string, size_t> step_op_ids_;  // step op name -> its number, the same on every stage
};

}  // namespace

const std::vector<int64_t>& StepSetup::Route(int64_t src, int64_t dst) const { return routes.at(PairKey(src, dst, graph->num_devices())); }

StepSetup PrepareStep(const StepProgram& program, const ClusterSpec& cluster, const topologies::Cluster& graph, AxisCollectives& collectives,
                      bool fold) {
  return Preparer(program, cluster, graph, collectives, fold).Run();
}

}  // namespace shardsim::sim
