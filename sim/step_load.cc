#include "sim/step_load.h"

#include <algorithm>
#include <array>

#include "sim/flow_ports.h"
#include "sim/schedule_player.h"

namespace shardsim::sim {
namespace {

// Flows one launch of a flow step puts on the links (a device sending to itself sends nothing).
int64_t LaunchSize(const FlowStep& step) {
  int64_t flows = 0;
  for (size_t i = 0; i < step.src.size(); ++i) flows += step.src[i] != step.dst[i] ? 1 : 0;
  return flows;
}

// Adds `runs` runs of collective `plan` (launched once per meeting of its actor sets).
void AddComm(const CommPlan& plan, double runs, DesLoad& load, int64_t& largest) {
  const double launches = runs / static_cast<double>(std::max<int64_t>(1, plan.members));
  for (const FlowStep& step : plan.steps) {
    const int64_t size = LaunchSize(step);
    load.AddLaunches(size, launches, StepSecondsPerFlow(size));
    largest = std::max(largest, size);
  }
  load.activities += static_cast<int64_t>(runs);
}

}  // namespace

DesLoad StepLoad(const StepSetup& setup, int64_t microbatches, bool timeline, int64_t direct_flows) {
  const strategies::StepProgram& program = *setup.program;
  const double mb = static_cast<double>(microbatches);
  DesLoad load;
  load.hosts = static_cast<int64_t>(setup.hosts.size());
  load.routes = static_cast<int64_t>(setup.routes.size());
  const PipelinePath path = PathOf(program);
  // The flow ports' drains, one per host (sim/flow_ports.h); their couriers (for each set's
  // largest launch) are counted below.
  load.actors += load.hosts;
  for (const ActorSet& set : setup.sets) {
    load.actors += 1 + static_cast<int64_t>(strategies::kStreams) + static_cast<int64_t>(set.sends.size());
    const strategies::Stage& stage = program.stages[static_cast<size_t>(set.stage)];
    // Every micro-batch runs each phase of every layer of the stage once.
    std::array<int64_t, strategies::kLayerPrograms> layers{};
    for (const strategies::Chunk& chunk : stage.chunks) {
      for (const strategies::LayerRun& run : chunk.layers) layers[run.program()] += run.count;
    }
    int64_t largest = 0;
    const int64_t activities_before = load.activities;
    for (size_t k = 0; k < strategies::kLayerPrograms; ++k) {
      const double runs = mb * static_cast<double>(layers[k]);
      for (int32_t comm : set.layer_comm[k]) {
        if (comm >= 0) AddComm(set.comms[static_cast<size_t>(comm)], runs, load, largest);
      }
      for (const auto& actions : setup.actions[k]) {
        for (const Action& a : actions) load.activities += a.kind == Action::kCompute ? static_cast<int64_t>(runs) : 0;
      }
    }
    // Step ops: once, or once per layer of the stage for the overlapped gradient buckets.
    for (size_t i = 0; i < set.step_comm.size(); ++i) {
      if (set.step_comm[i] < 0) continue;
      const double runs = stage.step_ops[i].overlapped ? static_cast<double>(setup.stage_layers[static_cast<size_t>(set.stage)]) : 1.0;
      AddComm(set.comms[static_cast<size_t>(set.step_comm[i])], runs, load, largest);
    }
    // Pipeline transfers: per micro-batch, one per chunk boundary to another stage, each way.
    for (int64_t c = 0; c < path.chunks; ++c) {
      const int64_t slot = set.stage * path.chunks + c;
      for (const int64_t next : {path.after[static_cast<size_t>(slot)], path.before[static_cast<size_t>(slot)]}) {
        if (next < 0 || path.StageOf(next) == set.stage) continue;
        for (const PipeSend& send : set.sends) {
          if (send.to_stage != path.StageOf(next)) continue;
          const int64_t size = LaunchSize(send.flows);
          load.AddLaunches(size, mb, StepSecondsPerFlow(size));
          largest = std::max(largest, size);
          load.activities += microbatches;
        }
      }
    }
    load.in_flight += largest;
    load.actors += largest > direct_flows ? (largest + kFlowChunk - 1) / kFlowChunk : 0;
    // Queued items live to the end; with a timeline, so does every event.
    load.kept_records += timeline ? load.activities - activities_before : (load.activities - activities_before) / 4;
  }
  return load;
}

}  // namespace shardsim::sim
