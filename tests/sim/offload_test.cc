// Activation offloading (PlanSpec::offload_layers): what the offloaded layers keep leaves the
// device for host memory, two layers' worth staying on the device; their copies cost time on
// the host link where they outlast the layer's phase, the same in the estimate and the
// simulation; plans and clusters that cannot offload are refused naming the field.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/inputs.h"
#include "core/model_presets.h"
#include "sim/estimate.h"
#include "sim/simulate.h"
#include "strategies/build_step.h"
#include "strategies/plan_rules.h"

namespace shardsim::sim {
namespace {

struct Outcome {
  StepReport estimated;
  double simulated_s = 0;
};

Outcome RunPlan(const std::string& model_name, const std::string& cluster_arg, std::vector<std::string> sets, bool simulate = false) {
  const ModelSpec model = FindModelPreset(model_name)->spec;
  const ClusterSpec cluster = LoadCluster(cluster_arg);
  const PlanSpec plan = LoadPlan("", sets);
  strategies::ValidatePlan(plan, model, DeviceCount(cluster), cluster.name, "plan:");
  CheckPlanOnCluster(plan, cluster, "plan");
  const strategies::StepProgram program = strategies::BuildStep(model, plan);
  const topologies::Cluster graph(cluster);
  AxisCollectives collectives(graph, plan);
  Outcome run;
  run.estimated = Estimate(program, cluster, collectives);
  if (simulate) run.simulated_s = Simulate(program, cluster, graph, collectives, {}).step.step_time_s;
  return run;
}

const std::vector<std::string> kFsdp = {"mesh.fsdp=8", "global_batch_size=8", "seq_len=8192", "micro_batch_size=1", "recompute=none"};

std::vector<std::string> With(std::vector<std::string> sets, const std::string& more) {
  sets.push_back(more);
  return sets;
}

// llama3-8b's 32 layers alike, one micro-batch in flight (no pipeline): each offloaded layer moves
// one layer's activations to the host; the device keeps the kept layers' and, at most, two
// offloaded layers' (the one at work beside the one in copy) where the kept ones are fewer.
TEST(Offload, MovesTheOffloadedLayersActivationsToHostMemory) {
  const Outcome none = RunPlan("llama3-8b", "dgx-h100:8", kFsdp);
  const double layer = none.estimated.memory.peak.activations / 32;
  EXPECT_EQ(none.estimated.memory.peak.host, 0);
  for (int64_t n : {1, 2, 4, 10, 31, 32}) {
    const Outcome some = RunPlan("llama3-8b", "dgx-h100:8", With(kFsdp, "offload_layers=" + std::to_string(n)));
    const strategies::MemoryBreakdown& peak = some.estimated.memory.peak;
    const double kept = static_cast<double>(32 - n) * layer;
    EXPECT_NEAR(peak.host, static_cast<double>(n) * layer, 1e-6 * layer) << n;
    EXPECT_NEAR(peak.activations, std::max(kept, static_cast<double>(std::min<int64_t>(n, 2)) * layer), 1e-6 * layer) << n;
    EXPECT_LT(peak.activations, none.estimated.memory.peak.activations) << n;
    EXPECT_EQ(peak.params + peak.grads + peak.optimizer + peak.buffers,
              none.estimated.memory.peak.params + none.estimated.memory.peak.grads + none.estimated.memory.peak.optimizer + none.estimated.memory.peak.buffers);
  }
}

// The copies hide under each offloaded layer's phase where the link keeps up; on an H100's PCIe
// link they outlast it: the step grows with every layer offloaded, by what they expose.
TEST(Offload, ExposesWhatTheCopiesTakeBeyondTheLayersPhases) {
  const Outcome none = RunPlan("llama3-8b", "dgx-h100:8", kFsdp);
  EXPECT_EQ(none.estimated.exposed_comm_s.count("host offload copies"), 0u);
  double previous = none.estimated.step_time_s;
  for (int64_t n : {8, 16, 32}) {
    const Outcome some = RunPlan("llama3-8b", "dgx-h100:8", With(kFsdp, "offload_layers=" + std::to_string(n)));
    ASSERT_EQ(some.estimated.exposed_comm_s.count("host offload copies"), 1u) << n;
    const double exposed = some.estimated.exposed_comm_s.at("host offload copies");
    EXPECT_GT(exposed, 0) << n;
    EXPECT_NEAR(some.estimated.step_time_s, none.estimated.step_time_s + exposed, 1e-9 * some.estimated.step_time_s) << n;
    EXPECT_GT(some.estimated.step_time_s, previous) << n;
    previous = some.estimated.step_time_s;
  }
  // Each copy alone: one layer's activations at the link's rate; every offloaded layer copies
  // out once and in once per micro-batch, and no more than that can be exposed.
  const Outcome all = RunPlan("llama3-8b", "dgx-h100:8", With(kFsdp, "offload_layers=32"));
  const double layer = none.estimated.memory.peak.activations / 32;
  const double copy = 1e-5 + layer / (64e9 * 0.8);  // dgx-h100's host link: latency, PCIe Gen5 one way x efficiency
  EXPECT_LE(all.estimated.exposed_comm_s.at("host offload copies"), 2 * 32 * copy * 1.000001);
}

// The simulation runs the same copies on the host stream: it agrees with the estimate, with and
// without pipeline stages (each stage's first layers offloaded).
TEST(Offload, SimulationAgreesWithTheEstimate) {
  for (const std::vector<std::string>& sets :
       {With(kFsdp, "offload_layers=12"),
        std::vector<std::string>{"mesh.pipeline=4", "mesh.data=2", "global_batch_size=16", "seq_len=4096", "micro_batch_size=1", "recompute=none",
                                 "pipeline_schedule=interleaved-1f1b", "virtual_stages=2", "offload_layers=2"}}) {
    const Outcome run = RunPlan("llama3-8b", "dgx-h100:8", sets, /*simulate=*/true);
    EXPECT_NEAR(run.simulated_s / run.estimated.step_time_s, 1.0, 0.02) << sets.back();
    EXPECT_GT(run.estimated.exposed_comm_s.count("host offload copies"), 0u);
  }
}

// Where both a collective and the copies stick out of a phase (llama3-70b over 64 A100s' FSDP,
// short sequences), the simulation waits for the collectives first and then the copies, as the
// estimate charges them: each kind's exposed time agrees, and the estimate lists the copies among
// its collectives with how often they run.
TEST(Offload, ExposedKindsAgreeWithTheSimulation) {
  const std::vector<std::string> sets = {"mesh.fsdp=64", "zero_stage=3", "global_batch_size=64", "seq_len=2048", "micro_batch_size=1",
                                         "recompute=none", "offload_layers=80"};
  const ModelSpec model = FindModelPreset("llama3-70b")->spec;
  const ClusterSpec cluster = LoadCluster("dgx-a100:64");
  const PlanSpec plan = LoadPlan("", sets);
  const strategies::StepProgram program = strategies::BuildStep(model, plan);
  const topologies::Cluster graph(cluster);
  AxisCollectives collectives(graph, plan);
  const StepReport estimated = Estimate(program, cluster, collectives);
  const SimReport simulated = Simulate(program, cluster, graph, collectives, {});
  ASSERT_EQ(estimated.exposed_comm_s.count("host offload copies"), 1u);
  EXPECT_GT(estimated.exposed_comm_s.at("host offload copies"), 0);
  for (const auto& [kind, seconds] : estimated.exposed_comm_s) {
    ASSERT_EQ(simulated.step.exposed_comm_s.count(kind), 1u) << kind;
    EXPECT_NEAR(simulated.step.exposed_comm_s.at(kind), seconds, 0.02 * estimated.step_time_s) << kind;
  }
  double copies = 0;
  for (const CollectiveCost& c : estimated.collectives) {
    if (c.stream == strategies::Stream::kHost) copies += c.per_step;
  }
  EXPECT_EQ(copies, 2.0 * 80);  // out and back, per offloaded layer and micro-batch (one per replica)
}

// What the offloaded layers hold must fit in the host memory the cluster spec gives per device
// (gb200-nvl72: a Grace's 480 GB over its two GPUs); a spec without one is not checked.
TEST(Offload, HostMemoryBoundsTheOffloadedActivations) {
  const std::vector<std::string> sets = {"mesh.fsdp=64", "mesh.tensor=2", "sequence_parallel=true", "zero_stage=3", "global_batch_size=128",
                                         "seq_len=8192", "micro_batch_size=2", "recompute=none"};
  const Outcome some = RunPlan("llama3-405b", "gb200-nvl72:128,domain=64", With(sets, "offload_layers=40"));
  EXPECT_EQ(some.estimated.host_bytes, 240e9);
  EXPECT_TRUE(some.estimated.host_fits);
  const Outcome most = RunPlan("llama3-405b", "gb200-nvl72:128,domain=64", With(sets, "offload_layers=125"));
  EXPECT_GT(most.estimated.memory.peak.host, 240e9);
  EXPECT_FALSE(most.estimated.host_fits);
  EXPECT_FALSE(most.estimated.fits);
  EXPECT_LE(most.estimated.memory.peak.total(), most.estimated.hbm_bytes);  // HBM alone would take it
}

// Refused, naming the field: more layers than the model has; a cluster without a host link
// (the TPU presets give none); a negative count in plan JSON.
TEST(Offload, RefusesWhatCannotOffload) {
  const ModelSpec model = FindModelPreset("llama3-8b")->spec;
  auto error_of = [&](const std::string& cluster_arg, const std::vector<std::string>& sets) -> std::string {
    try {
      const ClusterSpec cluster = LoadCluster(cluster_arg);
      const PlanSpec plan = LoadPlan("", sets);
      strategies::ValidatePlan(plan, model, DeviceCount(cluster), cluster.name, "plan:");
      CheckPlanOnCluster(plan, cluster, "plan");
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of("dgx-h100:8", With(kFsdp, "offload_layers=33")).find("offload_layers"), std::string::npos);
  const std::string tpu = error_of("tpu-v5p:2x2x2", With(kFsdp, "offload_layers=4"));
  EXPECT_NE(tpu.find("/offload_layers"), std::string::npos) << tpu;
  EXPECT_NE(tpu.find("host"), std::string::npos) << tpu;
  EXPECT_NE(error_of("dgx-h100:8", With(kFsdp, "offload_layers=-1")).find("offload_layers"), std::string::npos);
  EXPECT_EQ(error_of("dgx-h100:8", With(kFsdp, "offload_layers=32")), "");
}

}  // namespace
}  // namespace shardsim::sim
