// Cost of one analytic collective evaluation (the planner's inner loop) once the model for a
// group has been routed, and of routing it in the first place.
#include <benchmark/benchmark.h>

#include "core/cluster_presets.h"
#include "sim/collective_cost.h"

namespace shardsim::sim {
namespace {

struct Setup {
  const char* cluster;
  int64_t devices;
  CollectiveOp op;
  Algorithm algorithm;
};

constexpr Setup kSetups[] = {
    {"dgx-h100:8", 8, CollectiveOp::kAllReduce, Algorithm::kRing},
    {"dgx-h100:1024", 1024, CollectiveOp::kAllReduce, Algorithm::kHierarchical},
    {"dgx-h100:1024", 1024, CollectiveOp::kAllReduce, Algorithm::kTree},
    {"tpu-v5p:16x16x16", 4096, CollectiveOp::kAllReduce, Algorithm::kTorus},
    {"dgx-h100:1024", 1024, CollectiveOp::kAllReduce, Algorithm::kAuto},
};

DeviceGroup First(int64_t n) {
  DeviceGroup g;
  for (int64_t d = 0; d < n; ++d) g.devices.push_back(d);
  return g;
}

void BM_AnalyticEvaluation(benchmark::State& state) {
  const Setup& s = kSetups[state.range(0)];
  const topologies::Cluster cluster(ParseClusterPreset(s.cluster, "--cluster"));
  const auto models = BuildCollectiveModels(cluster, First(s.devices), s.op, s.algorithm, "bench");
  double bytes = 1 << 20;
  for (auto _ : state) {
    benchmark::DoNotOptimize(Fastest(models, bytes));
    bytes = bytes < 1e9 ? bytes * 2 : 8;  // sweep sizes so nothing is cached
  }
  state.SetLabel(std::string(s.cluster) + " " + ToString(s.op) + " " + ToString(s.algorithm));
}
BENCHMARK(BM_AnalyticEvaluation)->DenseRange(0, 4);

void BM_BuildModel(benchmark::State& state) {
  const Setup& s = kSetups[state.range(0)];
  const topologies::Cluster cluster(ParseClusterPreset(s.cluster, "--cluster"));
  for (auto _ : state) benchmark::DoNotOptimize(BuildCollectiveModels(cluster, First(s.devices), s.op, s.algorithm, "bench"));
  state.SetLabel(std::string(s.cluster) + " " + ToString(s.op) + " " + ToString(s.algorithm));
}
BENCHMARK(BM_BuildModel)->DenseRange(0, 4)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace shardsim::sim

BENCHMARK_MAIN();
