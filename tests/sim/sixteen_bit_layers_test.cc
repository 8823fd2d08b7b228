// An fp8 plan's first and last decoder layers kept at 16 bits (PlanSpec::sixteen_bit_first_layers,
// sixteen_bit_last_layers): the step program runs them as the kind's 16-bit twin, built from the
// plan at 16 bits; each costs what a layer of the bf16 plan costs, in the estimate and the
// simulation alike; their weights are neither cast nor cached nor gathered in FP8, and what they
// keep for the backward is 16-bit; plans that cannot hold such layers are refused naming the field.
#include <gtest/gtest.h>

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

using strategies::LayerKind;
using strategies::LayerRun;

struct Outcome {
  strategies::StepProgram program;
  StepReport estimated;
  double simulated_s = 0;
};

Outcome RunPlan(const std::string& model_name, const std::string& cluster_arg, const std::vector<std::string>& sets, bool simulate = false) {
  const ModelSpec model = FindModelPreset(model_name)->spec;
  const ClusterSpec cluster = LoadCluster(cluster_arg);
  const PlanSpec plan = LoadPlan("", sets);
  strategies::ValidatePlan(plan, model, DeviceCount(cluster), cluster.name, "plan:");
  Outcome run{strategies::BuildStep(model, plan), {}, 0};
  const topologies::Cluster graph(cluster);
  AxisCollectives collectives(graph, plan);
  run.estimated = Estimate(run.program, cluster, collectives);
  if (simulate) run.simulated_s = Simulate(run.program, cluster, graph, collectives, {}).step.step_time_s;
  return run;
}

std::vector<std::string> With(std::vector<std::string> sets, const std::vector<std::string>& more) {
  sets.insert(sets.end(), more.begin(), more.end());
  return sets;
}

// One device, one micro-batch: the step is its layers' compute, nothing overlapped.
const std::vector<std::string> kOneDevice = {"mesh.data=1", "global_batch_size=1", "seq_len=4096"};

TEST(SixteenBitLayers, RunTheKindsTwinInTheirPlaceInTheChunk) {
  const Outcome run = RunPlan("llama3-8b", "dgx-h100:1", With(kOneDevice, {"dtype=fp8", "sixteen_bit_first_layers=2", "sixteen_bit_last_layers=1"}));
  const std::vector<LayerRun> expected = {{.kind = LayerKind::kEmbedding, .count = 1},
                                          {.kind = LayerKind::kDense, .count = 2, .sixteen_bit = true},
                                          {.kind = LayerKind::kDense, .count = 29},
                                          {.kind = LayerKind::kDense, .count = 1, .sixteen_bit = true},
                                          {.kind = LayerKind::kHead, .count = 1}};
  EXPECT_EQ(run.program.stages[0].chunks[0].layers, expected);
  const strategies::LayerProgram& twin = run.program.Layer(expected[1]);
  ASSERT_FALSE(twin.ops.empty());
  EXPECT_TRUE(twin.sixteen_bit);
  EXPECT_EQ(&run.program.ProgramOfLayer(0), &twin);
  EXPECT_EQ(&run.program.ProgramOfLayer(2), &run.program.Layer(LayerKind::kDense));
  EXPECT_EQ(&run.program.ProgramOfLayer(31), &twin);
  // The twin is the bf16 plan's layer, its products marked 16-bit for the fp8 plan's roofline.
  const Outcome bf16 = RunPlan("llama3-8b", "dgx-h100:1", kOneDevice);
  const strategies::LayerProgram& plain = bf16.program.Layer(LayerKind::kDense);
  ASSERT_EQ(twin.ops.size(), plain.ops.size());
  for (size_t i = 0; i < twin.ops.size(); ++i) {
    EXPECT_EQ(twin.ops[i].name, plain.ops[i].name);
    EXPECT_EQ(twin.ops[i].flops, plain.ops[i].flops);
    EXPECT_EQ(twin.ops[i].sixteen_bit, twin.ops[i].kind == strategies::ComputeKind::kMatmul && !twin.ops[i].is_comm()) << twin.ops[i].name;
  }
  // None in a plan that keeps none.
  const Outcome fp8 = RunPlan("llama3-8b", "dgx-h100:1", With(kOneDevice, {"dtype=fp8"}));
  EXPECT_TRUE(fp8.program.Layer(LayerRun{.kind = LayerKind::kDense, .sixteen_bit = true}).ops.empty());
  EXPECT_EQ(fp8.program.stages[0].chunks[0].layers.size(), 3u);
}

TEST(SixteenBitLayers, EachCostsWhatALayerOfTheSixteenBitPlanCosts) {
  const double fp8 = RunPlan("llama3-8b", "dgx-h100:1", With(kOneDevice, {"dtype=fp8"})).estimated.step_time_s;
  const double bf16 = RunPlan("llama3-8b", "dgx-h100:1", kOneDevice).estimated.step_time_s;
  const double three = RunPlan("llama3-8b", "dgx-h100:1", With(kOneDevice, {"dtype=fp8", "sixteen_bit_first_layers=2", "sixteen_bit_last_layers=1"}))
                           .estimated.step_time_s;
  ASSERT_LT(fp8, bf16);
  // The head and embedding cost the same in both plans, so the 32 layers make the difference.
  EXPECT_NEAR((three - fp8) / (bf16 - fp8), 3.0 / 32, 1e-9);
}

TEST(SixteenBitLayers, TheSimulationRunsTheTwinsToo) {
  struct Case {
    std::string cluster;
    std::vector<std::string> sets;  // the 16-bit layers' field last
  };
  const std::vector<Case> cases = {
      {"dgx-h100:1", With(kOneDevice, {"dtype=fp8", "sixteen_bit_first_layers=1"})},
      {"dgx-h100:8", {"mesh.pipeline=4", "mesh.tensor=2", "global_batch_size=8", "seq_len=2048", "dtype=fp8", "sixteen_bit_last_layers=3"}}};
  for (const Case& c : cases) {
    const Outcome run = RunPlan("llama3-8b", c.cluster, c.sets, true);
    EXPECT_NEAR(run.simulated_s / run.estimated.step_time_s, 1.0, 1e-3) << c.cluster;
    const Outcome fp8 = RunPlan("llama3-8b", c.cluster, {c.sets.begin(), c.sets.end() - 1}, true);
    EXPECT_GT(run.simulated_s, fp8.simulated_s) << c.cluster;
  }
}

TEST(SixteenBitLayers, TheirWeightsAreNeitherCachedNorGatheredInFp8) {
  const std::vector<std::string> base = {"mesh.fsdp=8", "zero_stage=3", "global_batch_size=8", "seq_len=2048", "dtype=fp8"};
  // Transformer Engine's weight workspaces: the 16-bit layers' weights hold no FP8 copy.
  const Outcome cached = RunPlan("llama3-8b", "dgx-h100:8", With(base, {"fp8_weight_casts=per-step"}));
  const Outcome four = RunPlan("llama3-8b", "dgx-h100:8", With(base, {"fp8_weight_casts=per-step", "sixteen_bit_first_layers=2", "sixteen_bit_last_layers=2"}));
  const strategies::Stage& stage = four.program.stages[0];
  const strategies::Stage& all = cached.program.stages[0];
  const double layer = (stage.sixteen_bit_params - all.sixteen_bit_params) / 4;
  EXPECT_GT(layer, 0);
  EXPECT_NEAR(stage.params(), all.params(), 1e-6 * all.params());
  const double cache_per_weight = cached.estimated.memory.peak.fp8_weight_cache / (all.params() - all.sixteen_bit_params);
  EXPECT_NEAR(cached.estimated.memory.peak.fp8_weight_cache - four.estimated.memory.peak.fp8_weight_cache, 4 * layer * cache_per_weight, 1e-6 * layer);
  // FP8 weight gathers: the 16-bit layers' gathers move 16 bits, the others one byte a weight.
  const Outcome gathered = RunPlan("llama3-8b", "dgx-h100:8", With(base, {"param_gather_dtype=fp8", "sixteen_bit_last_layers=1"}));
  auto gather_bytes = [](const strategies::LayerProgram& l) {
    for (const strategies::Op& op : l.ops) {
      if (op.is_comm() && op.collective == CollectiveOp::kAllGather && op.phase == strategies::Phase::kForward) return op.comm_bytes;
    }
    return 0.0;
  };
  const double fp8_gather = gather_bytes(gathered.program.Layer(LayerKind::kDense));
  EXPECT_GT(fp8_gather, 0);
  EXPECT_NEAR(gather_bytes(gathered.program.ProgramOfLayer(31)) / fp8_gather, 2.0, 0.01);
}

TEST(SixteenBitLayers, KeepSixteenBitInputsBesideFp8SavedInputs) {
  const std::vector<std::string> base = {"mesh.pipeline=2", "global_batch_size=8", "seq_len=2048", "dtype=fp8", "saved_input_dtype=fp8"};
  const Outcome fp8 = RunPlan("llama3-8b", "dgx-h100:2", base);
  const Outcome kept = RunPlan("llama3-8b", "dgx-h100:2", With(base, {"sixteen_bit_first_layers=4"}));
  // The first stage's activations grow, the last stage's (no 16-bit layer) do not.
  EXPECT_GT(kept.program.stages[0].activation_peak_bytes, fp8.program.stages[0].activation_peak_bytes);
  EXPECT_EQ(kept.program.stages[1].activation_peak_bytes, fp8.program.stages[1].activation_peak_bytes);
}

// The report names a twin's collectives by their layer's kind, flagged: a hybrid model's Mamba-2
// all-to-alls over context are labelled the same with 16-bit layers or without.
TEST(SixteenBitLayers, TheirCollectivesKeepTheirKindsLabel) {
  const std::vector<std::string> base = {"mesh.context=8", "global_batch_size=1", "seq_len=32768", "dtype=fp8"};
  const Outcome fp8 = RunPlan("nemotron-3-nano-30b-a3b", "dgx-h100:8", base);
  const Outcome kept = RunPlan("nemotron-3-nano-30b-a3b", "dgx-h100:8", With(base, {"sixteen_bit_first_layers=2", "sixteen_bit_last_layers=2"}));
  ASSERT_FALSE(fp8.estimated.exposed_comm_s.empty());
  for (const auto& [key, seconds] : fp8.estimated.exposed_comm_s) {
    EXPECT_EQ(ExposedLabel(kept.estimated, key), ExposedLabel(fp8.estimated, key)) << key;
  }
  int flagged = 0;
  for (const CollectiveCost& c : kept.estimated.collectives) {
    flagged += c.sixteen_bit ? 1 : 0;
    EXPECT_EQ(c.layer.find("16"), std::string::npos) << c.layer;
  }
  EXPECT_GT(flagged, 0);
}

TEST(SixteenBitLayers, PlansThatCannotHoldThemAreRefusedNamingTheField) {
  auto refusal = [](const std::vector<std::string>& sets) {
    try {
      RunPlan("llama3-8b", "dgx-h100:1", sets);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(refusal(With(kOneDevice, {"sixteen_bit_first_layers=1"})).find("sixteen_bit_first_layers with dtype bf16"), std::string::npos);
  EXPECT_NE(refusal(With(kOneDevice, {"dtype=fp8", "sixteen_bit_first_layers=16", "sixteen_bit_last_layers=16"})).find("keep all 32 decoder layers"),
            std::string::npos);
  EXPECT_NE(refusal(With(kOneDevice, {"dtype=fp8", "sixteen_bit_last_layers=-1"})).find("sixteen_bit_last_layers"), std::string::npos);
  EXPECT_EQ(refusal(With(kOneDevice, {"dtype=fp8", "sixteen_bit_first_layers=16", "sixteen_bit_last_layers=15"})), "");
  // 0 keeps none, at any dtype.
  EXPECT_EQ(refusal(With(kOneDevice, {"sixteen_bit_first_layers=0"})), "");
}

}  // namespace
}  // namespace shardsim::sim
