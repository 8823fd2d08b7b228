#include "cli/sim_trace.h"

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/sim_view.h"
#include "core/plan_json.h"
#include "core/units.h"
#include "strategies/op_keys.h"

namespace shardsim::cli {
namespace {

using nlohmann::json;

int Tid(strategies::Stream stream) { return static_cast<int>(stream); }

// Microseconds, the trace format's unit. One conversion for starts and ends alike keeps events
// that follow each other on a stream in order after rounding.
double Micros(double seconds) { return seconds * 1e6; }

json Metadata(const std::string& name, int64_t pid, int tid, const json& args) {
  json event = {{"ph", "M"}, {"name", name}, {"pid", pid}, {"args", args}};
  if (tid >= 0) event["tid"] = tid;
  return event;
}

// The op names of the program's compute ops with their kind, for the trace's "kind" argument.
std::map<std::string, strategies::ComputeKind> ComputeKinds(
    const strategies::StepProgram& program) {
  std::map<std::string, strategies::ComputeKind> kinds;
  auto add = [&](const std::vector<strategies::Op>& ops) {
    for (const strategies::Op& op : ops) {
      if (!op.is_comm()) kinds.emplace(op.name, op.kind);
    }
  };
  for (const strategies::LayerProgram& layer : program.layer_programs) add(layer.ops);
  for (const strategies::Stage& stage : program.stages) add(stage.step_ops);
  return kinds;
}

json EventArgs(const sim::TimelineEvent& e,
               const std::map<std::string, strategies::ComputeKind>& kinds) {
  json args = {{"op", e.name}, {"key", e.key}, {"stream", strategies::ToString(e.stream)}};
  const std::vector<std::string> parts = strategies::SplitOpKey(e.key);
  if (parts.size() == 4)
    args.update({{"stage", parts[0]}, {"layer", parts[1]}, {"microbatch", parts[3]}});
  if (const auto kind = kinds.find(e.name); !e.is_comm && kind != kinds.end())
    args["kind"] = strategies::ToString(kind->second);
  if (e.is_comm) {
    args.update({{"collective", ToString(e.collective)},
                 {"bytes", WholeBytes(e.bytes)},
                 {"group_size", e.group.size()},
                 {"group_ranks", e.group},
                 {"axes", e.axes},
                 {"uncontended_us", Micros(e.uncontended_s)}});
    if (e.uncontended_s > 0) args["slowdown"] = (e.end_s - e.start_s) / e.uncontended_s;
  }
  if (e.flow_id >= 0) args["flow_id"] = e.flow_id;
  return args;
}

json ShardsimMetadata(const sim::SimReport& report, const strategies::StepProgram& program,
                      const std::map<int64_t, int64_t>& stages,
                      const std::map<int64_t, int64_t>& represents) {
  json devices = json::array();
  for (const auto& [rank, stage] : stages) {
    const auto it = represents.find(rank);
    devices.push_back({{"rank", rank},
                       {"stage", stage},
                       {"represents", it == represents.end() ? 1 : it->second}});
  }
  return {{"engine", "simgrid"},
          {"model", program.model.name},
          {"plan", PlanSummary(program)},
          {"plan_spec", PlanToJson(program.plan)},
          {"schedule", program.plan.pipeline_schedule},
          {"step_time_s", report.step.step_time_s},
          {"timeline_end_s", report.timeline_end_s},
          {"mfu", report.step.mfu},
          {"devices", devices},
          {"drawn_devices", DrawnDevices(report)},
          {"folded", report.folded},
          {"simulated", report.simulated},
          {"simulated_devices", report.simulated_devices},
          {"represented_devices", report.represented_devices},
          {"microbatches_simulated", report.microbatches_simulated},
          {"microbatches", report.microbatches}};
}

}  // namespace

json ChromeTrace(const sim::SimReport& report, const strategies::StepProgram& program) {
  const std::map<int64_t, int64_t> stages = DeviceStages(report);
  std::map<int64_t, int64_t> represents;
  for (const sim::DeviceUse& use : report.devices) represents[use.rank] = use.represents;
  std::map<int64_t, std::set<int>> streams;  // by rank: compute, and every stream with events
  for (const auto& [rank, stage] : stages) streams[rank].insert(Tid(strategies::Stream::kCompute));
  for (const sim::TimelineEvent& e : report.events) streams[e.device].insert(Tid(e.stream));

  json events = json::array();
  for (const auto& [rank, stage] : stages) {
    std::string name = "rank " + std::to_string(rank) + " (stage " + std::to_string(stage) + ")";
    if (const auto it = represents.find(rank); it != represents.end() && it->second > 1) {
      name += ", stands for " + std::to_string(it->second) + " devices";
    }
    events.push_back(Metadata("process_name", rank, -1, {{"name", name}}));
    events.push_back(Metadata("process_sort_index", rank, -1, {{"sort_index", rank}}));
    for (const int tid : streams[rank]) {
      events.push_back(
          Metadata("thread_name", rank, tid,
                   {{"name", strategies::ToString(static_cast<strategies::Stream>(tid))}}));
      events.push_back(Metadata("thread_sort_index", rank, tid, {{"sort_index", tid}}));
    }
  }

  const std::map<std::string, strategies::ComputeKind> kinds = ComputeKinds(program);
  for (const sim::TimelineEvent& e : report.events) {
    const double ts = Micros(e.start_s);
    const double end = Micros(e.end_s);
    events.push_back({{"ph", "X"},
                      {"name", e.key.empty() || e.key == "-" ? e.name : e.key},
                      {"cat", EventCategory(e)},
                      {"pid", e.device},
                      {"tid", Tid(e.stream)},
                      {"ts", ts},
                      {"dur", end > ts ? end - ts : 0.0},
                      {"args", EventArgs(e, kinds)}});
    if (e.flow_id < 0) continue;
    // At the slice's start, as Kineto places its flows: Chrome binds a flow event to the slice
    // with its timestamp, Perfetto to the slice enclosing it, and both draw the arrow from the
    // end of the send to the start of the receiving task.
    json flow = {{"ph", e.flow_start ? "s" : "f"},
                 {"id", e.flow_id},
                 {"name", "pipeline"},
                 {"cat", "pipeline"},
                 {"pid", e.device},
                 {"tid", Tid(e.stream)},
                 {"ts", ts}};
    if (!e.flow_start) flow["bp"] = "e";
    events.push_back(std::move(flow));
  }
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"shardsim", ShardsimMetadata(report, program, stages, represents)}};
}

}  // namespace shardsim::cli
