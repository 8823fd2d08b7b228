// Costs of the foundation pieces every later stage calls: building a cluster from a preset
// string, counting a model's parameters, reading and validating a plan.
#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>

#include "strategies/plan_rules.h"
#include "core/cluster_presets.h"
#include "core/model_presets.h"
#include "core/plan_json.h"

namespace shardsim {
namespace {

void BM_ParseClusterPreset(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(ParseClusterPreset("dgx-h100:16384,oversubscription=2", "--cluster"));
}
BENCHMARK(BM_ParseClusterPreset);

void BM_CountParams(benchmark::State& state) {
  const ModelSpec model = FindModelPreset("deepseek-v3")->spec;
  for (auto _ : state) benchmark::DoNotOptimize(CountParams(model));
}
BENCHMARK(BM_CountParams);

void BM_ValidatePlan(benchmark::State& state) {
  const ModelSpec model = FindModelPreset("llama3-405b")->spec;
  const nlohmann::json plan = {{"mesh", {{"data", 1024}, {"tensor", 8}, {"pipeline", 2}}}, {"global_batch_size", 2048},
                               {"seq_len", 8192}, {"pipeline_schedule", "interleaved-1f1b"}, {"virtual_stages", 3}};
  for (auto _ : state) {
    const PlanSpec p = PlanFromJson(plan, "plan.json");
    strategies::ValidatePlan(p, model, 16384, "dgx-h100:16384", "plan.json:");
    benchmark::DoNotOptimize(p);
  }
}
BENCHMARK(BM_ValidatePlan);

}  // namespace
}  // namespace shardsim

BENCHMARK_MAIN();
