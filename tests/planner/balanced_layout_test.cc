// Balanced pipeline stages (planner/balanced_layout.h): the partition, the layout for a plan, and
// the search's last rung that tries it on the leading pipelined plans.
#include "planner/balanced_layout.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/cluster_presets.h"
#include "core/model_presets.h"
#include "core/plan_json.h"
#include "planner/constraints.h"
#include "planner/search.h"
#include "sim/estimate.h"
#include "strategies/build_step.h"
#include "strategies/stage_layout.h"
#include "topologies/cluster.h"

namespace shardsim::planner {
namespace {

// The costliest part as small as it can be; then the evenest; ties give the later parts the
// extra layers.
TEST(BalancedLayoutTest, PartitionMinimisesTheCostliestPart) {
  const std::vector<double> even(8, 1.0);
  EXPECT_EQ(BalancedPartLayers(even, 4, 0, 0), (std::vector<int64_t>{2, 2, 2, 2}));
  // A head worth 1.5 layers on the last part: it keeps one layer, the others share seven.
  EXPECT_EQ(BalancedPartLayers(even, 4, 0, 1.5), (std::vector<int64_t>{2, 2, 3, 1}));
  // An embedding worth 2 layers on the first part.
  EXPECT_EQ(BalancedPartLayers(even, 4, 2, 0), (std::vector<int64_t>{1, 2, 2, 3}));
  EXPECT_EQ(BalancedPartLayers(even, 8, 0, 5), (std::vector<int64_t>(8, 1)));
  // Cheaper first layers (DeepSeek-V3's dense ones among MoE layers): more of them in a part.
  EXPECT_EQ(BalancedPartLayers({0.5, 0.5, 0.5, 1, 1, 1, 1, 1}, 2, 0, 0), (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(BalancedPartLayers({3}, 1, 1, 1), (std::vector<int64_t>{1}));
  // Equal costs that floating point does not add exactly tie all the same: 61 layers on 16
  // positions, the three short ones first.
  std::vector<int64_t> expected(16, 4);
  expected[0] = expected[1] = expected[2] = 3;
  EXPECT_EQ(BalancedPartLayers(std::vector<double>(61, 1.0), 16, 0, 0), expected);
  EXPECT_EQ(BalancedPartLayers(std::vector<double>(61, 0.1), 16, 0, 0), expected);
  EXPECT_EQ(BalancedPartLayers(std::vector<double>(61, 0.0173), 16, 0, 0), expected);
}

// A model with a multi-token-prediction module: its stage (the head's) gets fewer decoder layers,
// the layout names the module, and the step is faster than the default split's.
TEST(BalancedLayoutTest, TheHeadsStageTakesFewerLayersAndTheStepIsFaster) {
  ModelSpec model = FindModelPreset("llama3-8b")->spec;
  model.mtp_layers = 1;
  const ClusterSpec cluster = ParseClusterPreset("dgx-h100:8", "--cluster");
  PlanSpec plan;
  plan.mesh.pipeline = 4, plan.mesh.data = 2;
  plan.global_batch_size = 64, plan.seq_len = 4096, plan.micro_batch_size = 1;
  const topologies::Cluster graph(cluster);
  sim::AxisCollectives collectives(graph, plan);
  const std::string layout = BalancedLayout(model, plan, cluster, collectives);
  ASSERT_FALSE(layout.empty());
  EXPECT_NE(layout.find("mL"), std::string::npos) << layout;
  PlanSpec balanced = plan;
  balanced.pipeline_layout = layout;
  ASSERT_FALSE(strategies::CheckLayout(model, balanced).has_value()) << layout;
  const strategies::StageLayout laid = strategies::LayOut(model, balanced);
  EXPECT_LT(laid.Chunk(3, 0).layers, laid.Chunk(1, 0).layers) << layout;
  const double before = sim::Estimate(strategies::BuildStep(model, plan), cluster, collectives).step_time_s;
  const double after = sim::Estimate(strategies::BuildStep(model, balanced), cluster, collectives).step_time_s;
  EXPECT_LT(after, before) << layout;
  // Nothing to balance: a layout the plan sets, a schedule of two directions.
  EXPECT_EQ(BalancedLayout(model, balanced, cluster, collectives), "");
  PlanSpec dualpipe = plan;
  dualpipe.pipeline_schedule = "dualpipe";
  EXPECT_EQ(BalancedLayout(model, dualpipe, cluster, collectives), "");
  // Nor a model deeper than the partition's bound (it costs positions x layers^2).
  ModelSpec deep = model;
  deep.num_layers = kMaxBalancedLayers + 4;
  EXPECT_EQ(BalancedLayout(deep, plan, cluster, collectives), "");
}

// `plan` on dgx-h100:8 with BalancedLayout's layout, and the step times before and after.
struct Balancing {
  PlanSpec balanced;
  double before_s = 0, after_s = 0;
};
Balancing Balance(const ModelSpec& model, const PlanSpec& plan) {
  const ClusterSpec cluster = ParseClusterPreset("dgx-h100:8", "--cluster");
  const topologies::Cluster graph(cluster);
  sim::AxisCollectives collectives(graph, plan);
  Balancing b{plan};
  b.balanced.pipeline_layout = BalancedLayout(model, plan, cluster, collectives);
  if (b.balanced.pipeline_layout.empty() || strategies::CheckLayout(model, b.balanced).has_value()) return b;
  b.before_s = sim::Estimate(strategies::BuildStep(model, plan), cluster, collectives).step_time_s;
  b.after_s = sim::Estimate(strategies::BuildStep(model, b.balanced), cluster, collectives).step_time_s;
  return b;
}

// A hybrid model's blocks cost unlike amounts (Mamba-2 mixers, attention, experts) and its head
// is wide (131,072 tokens of vocabulary): balanced by their costs, its step is faster.
TEST(BalancedLayoutTest, AHybridModelsBlocksAreBalancedByTheirCosts) {
  PlanSpec plan;
  plan.mesh.pipeline = 4, plan.mesh.data = 2, plan.zero_stage = 1;
  plan.global_batch_size = 64, plan.seq_len = 4096, plan.micro_batch_size = 1;
  const Balancing b = Balance(FindModelPreset("nemotron-3-nano-30b-a3b")->spec, plan);
  ASSERT_GT(b.before_s, 0) << "no valid layout: '" << b.balanced.pipeline_layout << "'";
  EXPECT_LT(b.after_s, b.before_s) << b.balanced.pipeline_layout;
}

// An fp8 plan's first layers kept at 16 bits cost more: the first stage takes fewer of them.
TEST(BalancedLayoutTest, SixteenBitLayersWeighTheirOwnCost) {
  const ModelSpec model = FindModelPreset("llama3-8b")->spec;
  PlanSpec plan;
  plan.mesh.pipeline = 4, plan.mesh.data = 2, plan.dtype = "fp8", plan.sixteen_bit_first_layers = 6;
  plan.global_batch_size = 64, plan.seq_len = 4096, plan.micro_batch_size = 1;
  const Balancing b = Balance(model, plan);
  ASSERT_GT(b.before_s, 0) << "no valid layout: '" << b.balanced.pipeline_layout << "'";
  const strategies::StageLayout laid = strategies::LayOut(model, b.balanced);
  EXPECT_LT(laid.Chunk(0, 0).layers, laid.Chunk(1, 0).layers) << b.balanced.pipeline_layout;
  EXPECT_LT(b.after_s, b.before_s) << b.balanced.pipeline_layout;
}

PlanConstraints Fixed(const std::vector<std::string>& assignments) {
  nlohmann::json plan = nlohmann::json::object();
  for (const std::string& a : assignments) ApplyPlanOverride(plan, a);
  return ConstraintsFromJson(plan, "plan (from --set)");
}

// The search tries the leading pipelined plans with balanced stages and keeps what wins; not for
// a fixed split, nor a framework that splits its stages its own way.
TEST(BalancedLayoutTest, TheSearchTriesBalancedStages) {
  ModelSpec model = FindModelPreset("llama3-8b")->spec;
  model.mtp_layers = 1;
  const ClusterSpec cluster = ParseClusterPreset("dgx-h100:16", "--cluster");
  SearchOptions o;
  o.global_batch_tokens = 256 * 4096, o.seq_len = 4096, o.threads = 2;
  o.constraints = Fixed({"mesh.pipeline=4"});
  const SearchResult result = Search(model, cluster, o);
  EXPECT_GT(result.balanced, 0);
  ASSERT_FALSE(result.best.empty());
  EXPECT_NE(result.best.front().plan.pipeline_layout.find("mL"), std::string::npos) << result.best.front().plan.pipeline_layout;
  // Off where the stages' split is fixed, and for a framework that splits them its own way
  // (DeepSpeed's partition_balanced; a model it runs, without the MTP module).
  SearchOptions fixed = o;
  fixed.constraints = Fixed({"mesh.pipeline=4", "pipeline_layout="});
  EXPECT_EQ(Search(model, cluster, fixed).balanced, 0);
  const ModelSpec plain = FindModelPreset("llama3-8b")->spec;
  EXPECT_GT(Search(plain, cluster, o).balanced, 0);
  o.framework = Framework::kDeepSpeed;
  const SearchResult deepspeed = Search(plain, cluster, o);
  EXPECT_FALSE(deepspeed.best.empty());
  EXPECT_EQ(deepspeed.balanced, 0);
}

}  // namespace
}  // namespace shardsim::planner
