#include "sim/simulate.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "core/mesh.h"
#include "core/suggest.h"
#include "sim/child_process.h"
#include "sim/schedule_player.h"
#include "sim/step_engine.h"
#include "sim/step_load.h"
#include "sim/step_setup.h"
#include "strategies/op_keys.h"
#include "strategies/op_names.h"

namespace shardsim::sim {
namespace {

using strategies::Op;
using strategies::Stream;

std::string LayerLabel(int32_t label) {
  if (label == -1) return std::string(strategies::kEmbeddingLayer);
  if (label == -2) return std::string(strategies::kHeadLayer);
  return strategies::DecoderLayer(label);
}

TimelineEvent Name(const RawEvent& raw, const StepSetup& setup) {
  const strategies::StepProgram& program = *setup.program;
  const ActorSet& set = setup.sets[static_cast<size_t>(raw.set)];
  TimelineEvent event;
  event.device = set.rank;
  event.stream = static_cast<Stream>(raw.stream);
  event.start_s = raw.start_s;
  event.end_s = raw.end_s;
  event.flow_id = raw.flow_id;
  const Op* op = nullptr;
  switch (raw.what) {
    case RawEvent::kLayerOp:
      op = &program.layer_programs[static_cast<size_t>(raw.layer_program)].ops[static_cast<size_t>(raw.op)];
      event.key = strategies::OpKey(set.stage, LayerLabel(raw.label), op->name, raw.microbatch);
      break;
    case RawEvent::kStepOp:
      op = &program.stages[static_cast<size_t>(set.stage)].step_ops[static_cast<size_t>(raw.op)];
      event.key = strategies::OpKey(set.stage, strategies::kStepLayer, op->name, -1);
      break;
    case RawEvent::kSend:
    case RawEvent::kReceive: {
      const bool forward = raw.phase == static_cast<int8_t>(strategies::Phase::kForward);
      const std::string_view name = raw.what == RawEvent::kSend ? (forward ? strategies::ops::kSendForward : strategies::ops::kSendBackward)
                                                                : (forward ? strategies::ops::kRecvForward : strategies::ops::kRecvBackward);
      event.key = strategies::OpKey(set.stage, strategies::ChunkLayer(raw.label), name, raw.microbatch);
      event.name = std::string(name);
      event.flow_start = raw.what == RawEvent::kSend;
      if (raw.what == RawEvent::kSend) {
        const PipeSend& send = set.sends[static_cast<size_t>(raw.comm)];
        event.is_comm = true;
        event.collective = CollectiveOp::kPermute;
        event.axes = "pipeline";
        event.bytes = send.flows.bytes.empty() ? 0 : send.flows.bytes.front();
        event.group = {send.flows.src.front(), send.flows.dst.front()};
        event.uncontended_s = send.uncontended_s;
      }
      return event;
    }
  }
  event.name = raw.waited ? "wait " + op->name : op->name;
  if (op->is_comm() && raw.comm >= 0) {
    const CommPlan& plan = set.comms[static_cast<size_t>(raw.comm)];
    event.is_comm = true;
    event.collective = op->collective;
    event.axes = JoinNames(op->axes, ",");
    event.bytes = plan.bytes;
    event.group = plan.group;
    event.uncontended_s = plan.uncontended_s;
  }
  return event;
}

// Link loads from what each set launched: every run of a collective or transfer puts its flows'
// bytes on their routes.
struct LinkTally {
  std::map<int64_t, double> bytes;
  std::map<int64_t, std::set<int>> kinds;
  std::map<int64_t, std::set<int64_t>> senders;
  void Add(const StepSetup& setup, const FlowStep& step, double runs, int kind) {
    for (size_t i = 0; i < step.src.size(); ++i) {
      if (step.src[i] == step.dst[i]) continue;
      for (int64_t id : setup.Route(step.src[i], step.dst[i])) {
        bytes[id] += step.bytes[i] * runs;
        kinds[id].insert(kind);
        senders[id].insert(step.src[i]);
      }
    }
  }
};

// Counts of `add` added to `into` (the two plays of one simulation).
void AddLoad(const DesLoad& add, DesLoad& into) {
  into.hosts = std::max(into.hosts, add.hosts);  // each play has the same platform
  into.routes = std::max(into.routes, add.routes);
  into.actors += add.actors;
  into.flows += add.flows;
  into.largest_launch = std::max(into.largest_launch, add.largest_launch);
  into.in_flight += add.in_flight;
  into.activities += add.activities;
  into.kept_records += add.kept_records;
  into.flow_seconds += add.flow_seconds;
}

std::string KindText(const StepSetup& setup, int kind, const std::string& collective) {
  const std::string& name = setup.kinds[static_cast<size_t>(kind)].name;
  if (name == "pipeline-neighbours") return "pipeline transfers";
  if (name == "host") return "host offload copies";
  return collective + " over " + name;
}

}  // namespace

SimReport Simulate(const strategies::StepProgram& given, const ClusterSpec& cluster, const topologies::Cluster& graph, AxisCollectives& collectives,
                   const SimulateOptions& options) {
  const auto wall_start = std::chrono::steady_clock::now();
  std::optional<strategies::StepProgram> blocking;
  const strategies::StepProgram& program = ProgramOnCluster(given, cluster, blocking);
  SimReport report;
  // The analytic report gives what does not depend on the engine (memory, FLOPs, the list of
  // collectives) and the baseline the simulation is compared with.
  report.estimate = Estimate(program, cluster, collectives, options.every_microbatch);
  report.step = report.estimate;
  const StepSetup setup = PrepareStep(program, cluster, graph, collectives, options.fold);
  const SteadyStatePlays plays = PlaysFor(program, options.every_microbatch);
  // What both plays will cost, refused beforehand past the limits.
  report.engine_load = StepLoad(setup, plays.scheduled, options.timeline, options.direct_flows);
  report.engine_estimate = EstimateDesCost(report.engine_load);
  if (plays.extended()) {
    const DesLoad fewer = StepLoad(setup, plays.fewer, false, options.direct_flows);
    const DesEstimate cost = EstimateDesCost(fewer);
    AddLoad(fewer, report.engine_load);
    report.engine_estimate.bytes += cost.bytes;
    // The plays run at once: side by side on two cores, one after the other on one.
    report.engine_estimate.seconds = std::thread::hardware_concurrency() >= 2 ? std::max(report.engine_estimate.seconds, cost.seconds)
                                                                              : report.engine_estimate.seconds + cost.seconds;
  }
  ChildGuard guard;
  guard.limits = options.limits;
  guard.what = "the SimGrid step simulation (" + std::to_string(setup.sets.size()) + (setup.sets.size() == 1 ? " actor set" : " actor sets") +
               " for " + std::to_string(program.plan.mesh.Product()) + " devices, " + std::to_string(plays.scheduled) + " of " +
               std::to_string(program.microbatches) + " micro-batches)";
  guard.hint = "leave folding on, simulate fewer devices or micro-batches, or use the analytic estimate (shardsim estimate)";
  guard.estimated_seconds = report.engine_estimate.seconds;
  guard.estimated_bytes = report.engine_estimate.bytes;
  guard.clear_progress_line = options.progress;
  CheckDesFits(report.engine_load, report.engine_estimate, options.limits, guard.what, guard.hint);
  // Both plays run at once, each in its own process.
  std::vector<Child> children;
  children.push_back(StartChild([&](int fd) { WriteAll(fd, Serialize(RunStepEngine(setup, plays.scheduled, options.timeline, options.progress, options.direct_flows))); }));
  if (plays.extended()) children.push_back(StartChild([&](int fd) { WriteAll(fd, Serialize(RunStepEngine(setup, plays.fewer, false, false, options.direct_flows))); }));
  const std::vector<std::string> outputs = FinishChildren(std::move(children), guard);
  const EngineResult full = Deserialize(outputs.front());
  const EngineResult few = plays.extended() ? Deserialize(outputs.back()) : EngineResult{};
  auto extend = [&](double at, double at_fewer) { return plays.extended() ? plays.Extend(at, at_fewer) : at; };

  // Per set, extended over the steady state.
  const size_t sets = setup.sets.size();
  const int64_t p = program.plan.mesh.pipeline;
  std::vector<double> end(sets);
  report.step.stage_time_s.assign(static_cast<size_t>(p), 0);
  size_t critical = 0;
  for (size_t s = 0; s < sets; ++s) {
    const SetResult& a = full.sets[s];
    const SetResult b = plays.extended() ? few.sets[s] : a;
    end[s] = extend(a.end_s, b.end_s);
    double& stage_time = report.step.stage_time_s[static_cast<size_t>(setup.sets[s].stage)];
    stage_time = std::max(stage_time, end[s]);
    if (end[s] > end[critical]) critical = s;
    DeviceUse use;
    use.rank = setup.sets[s].rank;
    use.stage = setup.sets[s].stage;
    use.represents = static_cast<int64_t>(setup.sets[s].devices.size());
    for (size_t st = 0; st < strategies::kStreams; ++st) use.stream_busy_s[st] = extend(a.stream_busy_s[st], b.stream_busy_s[st]);
    use.compute_s = extend(a.compute_s, b.compute_s);
    use.stream_busy_s[static_cast<size_t>(Stream::kCompute)] = use.compute_s;
    use.exposed_comm_s = extend(a.exposed.Total(), b.exposed.Total());
    use.waiting_s = extend(a.bubble_s, b.bubble_s);
    use.overlapped_comm_s = std::max(0.0, extend(a.overlapped_issued_s - a.comm_waited_s, b.overlapped_issued_s - b.comm_waited_s));
    use.memory_bytes = report.step.memory.stages[static_cast<size_t>(use.stage)].total();
    report.devices.push_back(use);
  }
  StepReport& step = report.step;
  const SetResult& ca = full.sets[critical];
  const SetResult cb = plays.extended() ? few.sets[critical] : ca;
  step.critical_stage = setup.sets[critical].stage;
  step.step_time_s = end[critical];
  step.compute_s = extend(ca.compute_s, cb.compute_s);
  step.pipeline_s = step.step_time_s;
  // Idle: what the compute stream neither computes nor waits on a collective for, over the whole
  // step (waiting for pipeline inputs, and after its last task for the step's end).
  for (DeviceUse& use : report.devices) use.bubble_s = std::max(0.0, end[critical] - use.compute_s - use.exposed_comm_s);
  step.bubble_s = report.devices[critical].bubble_s;
  ExposedByKind exposed;
  for (size_t i = 0; i < exposed.seconds.size(); ++i) exposed.seconds[i] = extend(ca.exposed.seconds[i], cb.exposed.seconds[i]);
  step.exposed_comm_s = exposed.Named();
  {
    // Per stage, the work of its busiest set (NameHeaviestStage); the named stage's parts from it.
    std::vector<double> work(static_cast<size_t>(p), 0);
    std::vector<size_t> busiest_set(static_cast<size_t>(p), critical);
    for (size_t s = 0; s < sets; ++s) {
      const size_t stage = static_cast<size_t>(setup.sets[s].stage);
      const double set_work = report.devices[s].compute_s + report.devices[s].exposed_comm_s;
      if (set_work > work[stage]) {
        work[stage] = set_work;
        busiest_set[stage] = s;
      }
    }
    const size_t heaviest = NameHeaviestStage(step, work);
    if (step.heaviest_stage >= 0) {
      const size_t s = busiest_set[heaviest];
      ExposedByKind by_kind;
      for (size_t i = 0; i < by_kind.seconds.size(); ++i)
        by_kind.seconds[i] = extend(full.sets[s].exposed.seconds[i], (plays.extended() ? few.sets[s] : full.sets[s]).exposed.seconds[i]);
      step.heaviest_compute_s = report.devices[s].compute_s;
      step.heaviest_exposed_comm_s = by_kind.Named();
    }
  }
  const double devices = static_cast<double>(program.plan.mesh.Product());
  const double capacity = step.step_time_s * devices * step.peak_flop_per_s;
  step.mfu = step.model_flops_per_step / capacity;
  step.mfu_palm = step.palm_flops_per_step / capacity;
  step.hfu = step.hardware_flops_per_step / capacity;
  step.tokens_per_s = static_cast<double>(program.plan.global_batch_size * program.plan.seq_len) / step.step_time_s;
  step.why = WhatLimits(step);

  // Links, from what every set launched.
  LinkTally tally, tally_few;
  for (size_t s = 0; s < sets; ++s) {
    const ActorSet& set = setup.sets[s];
    for (size_t c = 0; c < set.comms.size(); ++c) {
      for (const FlowStep& fs : set.comms[c].steps) {
        tally.Add(setup, fs, static_cast<double>(full.comm_runs[s][c]), set.comms[c].kind);
        if (plays.extended()) tally_few.Add(setup, fs, static_cast<double>(few.comm_runs[s][c]), set.comms[c].kind);
      }
    }
    const int pipeline_kind = static_cast<int>(setup.kinds.size()) - 1;
    for (size_t i = 0; i < set.sends.size(); ++i) {
      tally.Add(setup, set.sends[i].flows, static_cast<double>(full.send_runs[s][i]), pipeline_kind);
      if (plays.extended()) tally_few.Add(setup, set.sends[i].flows, static_cast<double>(few.send_runs[s][i]), pipeline_kind);
    }
  }
  auto kind_name = [&](int kind) {
    const std::string& name = setup.kinds[static_cast<size_t>(kind)].name;
    return name == "pipeline-neighbours" ? std::string("pipeline") : name;
  };
  for (const auto& [id, bytes] : tally.bytes) {
    const topologies::Link& link = graph.links()[static_cast<size_t>(id)];
    LinkUse use;
    use.link = id;
    use.name = link.name;
    use.busy_s = extend(bytes, tally_few.bytes[id]) / (link.bandwidth_bytes_per_s * link.efficiency);
    use.utilisation = use.busy_s / step.step_time_s;
    for (int k : tally.kinds[id]) use.kinds.push_back(kind_name(k));
    use.senders = static_cast<int64_t>(tally.senders[id].size());
    report.links.push_back(std::move(use));
  }
  std::sort(report.links.begin(), report.links.end(), [](const LinkUse& a, const LinkUse& b) { return a.busy_s != b.busy_s ? a.busy_s > b.busy_s : a.link < b.link; });

  // Contention on the critical set: each kind's simulated time against its uncontended time,
  // with the shared links its flows crossed.
  {
    const ActorSet& set = setup.sets[critical];
    std::map<std::string, Contention> by_kind;
    std::map<std::string, std::set<int64_t>> links_of;
    auto note = [&](const std::string& name, double simulated, double uncontended, const FlowStep& flows) {
      Contention& c = by_kind[name];
      c.kind = name;
      c.simulated_s += simulated;
      c.uncontended_s += uncontended;
      for (size_t i = 0; i < flows.src.size(); ++i) {
        if (flows.src[i] == flows.dst[i]) continue;
        for (int64_t id : setup.Route(flows.src[i], flows.dst[i])) {
          if (tally.kinds[id].size() > 1) links_of[name].insert(id);
        }
      }
    };
    for (size_t c = 0; c < set.comms.size(); ++c) {
      const CommPlan& plan = set.comms[c];
      const double runs = extend(static_cast<double>(full.comm_runs[critical][c]), plays.extended() ? static_cast<double>(few.comm_runs[critical][c]) : 0);
      const double seconds = extend(full.comm_seconds[critical][c], plays.extended() ? few.comm_seconds[critical][c] : 0);
      const std::string name = KindText(setup, plan.kind, ToString(plan.op->collective));
      for (size_t i = 0; i < plan.steps.size(); ++i) note(name, i == 0 ? seconds : 0, i == 0 ? runs * plan.uncontended_s : 0, plan.steps[i]);
    }
    for (size_t i = 0; i < set.sends.size(); ++i) {
      const double runs = extend(static_cast<double>(full.send_runs[critical][i]), plays.extended() ? static_cast<double>(few.send_runs[critical][i]) : 0);
      const double seconds = extend(full.send_seconds[critical][i], plays.extended() ? few.send_seconds[critical][i] : 0);
      note("pipeline transfers", seconds, runs * set.sends[i].uncontended_s, set.sends[i].flows);
    }
    for (auto& [name, c] : by_kind) {
      if (c.uncontended_s <= 0 || c.simulated_s < 1.02 * c.uncontended_s) continue;
      std::vector<int64_t> shared(links_of[name].begin(), links_of[name].end());
      std::sort(shared.begin(), shared.end(), [&](int64_t a, int64_t b) { return tally.bytes[a] > tally.bytes[b]; });
      std::set<std::string> with;
      for (size_t i = 0; i < shared.size(); ++i) {
        if (i < 5) c.links.push_back(graph.links()[static_cast<size_t>(shared[i])].name);
        for (int k : tally.kinds[shared[i]]) with.insert(kind_name(k));
      }
      c.with.assign(with.begin(), with.end());
      report.contention.push_back(c);
    }
    std::sort(report.contention.begin(), report.contention.end(),
              [](const Contention& a, const Contention& b) { return a.simulated_s - a.uncontended_s > b.simulated_s - b.uncontended_s; });
  }

  report.folded = setup.folded;
  report.simulated = setup.simulated;
  report.microbatches = program.microbatches;
  report.microbatches_simulated = plays.scheduled;
  if (plays.extended()) {
    report.folded.push_back("the pipeline's steady state: " + std::to_string(plays.scheduled) + " and " + std::to_string(plays.fewer) + " of " +
                            std::to_string(program.microbatches) + " micro-batches simulated, the step extended at the rate between them");
  }
  report.simulated_devices = static_cast<int64_t>(sets);
  report.represented_devices = program.plan.mesh.Product();
  report.flows = full.flows + few.flows;
  report.activities = full.activities + few.activities;
  report.peak_rss_bytes = std::max(full.peak_rss_bytes, few.peak_rss_bytes);
  if (options.timeline) {
    report.events.reserve(full.events.size());
    for (const RawEvent& raw : full.events) {
      report.events.push_back(Name(raw, setup));
      report.timeline_end_s = std::max(report.timeline_end_s, raw.end_s);
    }
  }
  report.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return report;
}

}  // namespace shardsim::sim
