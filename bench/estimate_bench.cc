// Cost of predicting one plan (sim::Estimate, and building its StepProgram) for a 126-layer
// model, with the mesh's collectives already routed (the planner routes each axis mapping once).
#include <benchmark/benchmark.h>

#include "core/cluster_presets.h"
#include "core/model_presets.h"
#include "sim/estimate.h"
#include "strategies/build_step.h"

namespace shardsim::sim {
namespace {

struct Setup {
  ModelSpec model = FindModelPreset("llama3-405b")->spec;
  ClusterSpec cluster = ParseClusterPreset("dgx-h100:1008", "--cluster");
  PlanSpec plan;
  Setup() {
    plan.mesh.tensor = 8;
    plan.mesh.pipeline = 14;
    plan.mesh.data = 9;
    plan.global_batch_size = 9 * 126;  // 126 micro-batches per replica (a multiple of the 14 stages)
    plan.seq_len = 8192;
    plan.zero_stage = 1;
    plan.sequence_parallel = true;
    plan.recompute = Recompute::kSelective;
  }
};

void BM_BuildStep(benchmark::State& state) {
  Setup s;
  for (auto _ : state) benchmark::DoNotOptimize(strategies::BuildStep(s.model, s.plan));
}
BENCHMARK(BM_BuildStep)->Unit(benchmark::kMicrosecond);

void BM_Estimate(benchmark::State& state) {
  Setup s;
  s.plan.pipeline_schedule = state.range(0) == 0 ? "1f1b" : "interleaved-1f1b";
  s.plan.virtual_stages = state.range(0) == 0 ? 1 : 3;
  const topologies::Cluster graph(s.cluster);
  AxisCollectives collectives(graph, s.plan);
  const strategies::StepProgram program = strategies::BuildStep(s.model, s.plan);
  // The planner's way: the axes routed once, the schedule's task lists kept (range 1: made anew).
  strategies::TaskLists lists;
  strategies::TaskLists* kept = state.range(1) == 0 ? &lists : nullptr;
  benchmark::DoNotOptimize(Estimate(program, s.cluster, collectives, false, kept));
  for (auto _ : state) benchmark::DoNotOptimize(Estimate(program, s.cluster, collectives, false, kept));
  state.SetLabel(std::string(s.plan.virtual_stages == 1 ? "llama3-405b, 1f1b p=14 m=126" : "llama3-405b, interleaved v=3 p=14 m=126") +
                 (kept ? ", task lists kept" : ", task lists made"));
}
BENCHMARK(BM_Estimate)->Args({0, 0})->Args({1, 0})->Args({0, 1})->Args({1, 1})->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace shardsim::sim

BENCHMARK_MAIN();
