// The search under constraints (--plan/--set fields, a memory limit, a framework), its wider
// space (every axis degree that divides, uneven pipeline stages) and the smallest size that fits
// when nothing does.
#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <nlohmann/json.hpp>

#include "core/cluster_json.h"
#include "core/cluster_presets.h"
#include "core/error.h"
#include "core/inputs.h"
#include "core/model_presets.h"
#include "core/plan_json.h"
#include "planner/constraints.h"
#include "planner/min_devices.h"
#include "planner/search.h"
#include "strategies/plan_rules.h"

namespace shardsim::planner {
namespace {

using nlohmann::json;

SearchOptions Options(int64_t tokens, int64_t seq_len) {
  SearchOptions o;
  o.global_batch_tokens = tokens;
  o.seq_len = seq_len;
  o.threads = 2;
  return o;
}

PlanConstraints Fixed(const std::vector<std::string>& assignments) {
  json plan = json::object();
  for (const std::string& a : assignments) ApplyPlanOverride(plan, a);
  return ConstraintsFromJson(plan, "plan (from --set)");
}

ModelSpec Model(const char* name) { return FindModelPreset(name)->spec; }

TEST(ConstraintsTest, OnlyTheKeysGivenAreFixed) {
  const PlanConstraints c = Fixed({"mesh.tensor=8", "dtype=fp8", "recompute=selective"});
  EXPECT_TRUE(c.Fixes("mesh.tensor"));
  EXPECT_FALSE(c.Fixes("mesh.data"));
  EXPECT_TRUE(c.FixesAxis(MeshAxis::kTensor));
  EXPECT_EQ(c.values.dtype, "fp8");
  EXPECT_EQ(DescribeFixed(c), "dtype=fp8, mesh.tensor=8, recompute=selective");  // in key order
  PlanSpec plan;
  plan.mesh.tensor = 8;
  plan.dtype = "fp8";
  plan.recompute = Recompute::kSelective;
  EXPECT_TRUE(c.Allows(plan));
  plan.mesh.tensor = 4;
  EXPECT_FALSE(c.Allows(plan));
}

// offload_layers, which a plan's JSON leaves out at 0, reads back as the 0 it was fixed to.
TEST(ConstraintsTest, FixedNoOffloadIsShownAsZero) {
  const PlanConstraints c = Fixed({"offload_layers=0", "expert_axes="});
  EXPECT_EQ(DescribeFixed(c), "expert_axes=unset, offload_layers=0");
  EXPECT_EQ(FixedJson(c)["offload_layers"], 0);
}

TEST(ConstraintsTest, BadFixedValuesAreInputErrors) {
  EXPECT_THROW(Fixed({"zero_stage=7"}), InputError);
  EXPECT_THROW(Fixed({"mesh.tensor=0"}), InputError);
}

// Every plan the search returns keeps every fixed field, and the fixed values change the answer.
TEST(ConstraintsTest, EveryPlanKeepsTheFixedFields) {
  const ClusterSpec cluster = ParseClusterPreset("dgx-h100:64", "--cluster");
  SearchOptions o = Options(4 << 20, 8192);
  o.constraints = Fixed({"mesh.tensor=8", "dtype=fp8", "zero_stage=1", "recompute=selective"});
  const SearchResult r = Search(Model("llama3-70b"), cluster, o);
  ASSERT_FALSE(r.best.empty());
  auto check = [&](const PlanSpec& p) {
    EXPECT_EQ(p.mesh.tensor, 8);
    EXPECT_EQ(p.dtype, "fp8");
    EXPECT_EQ(p.zero_stage, 1);
    EXPECT_EQ(p.recompute, Recompute::kSelective);
  };
  for (const RankedPlan& p : r.best) check(p.plan);
  for (const RankedPlan& p : r.pareto) check(p.plan);
  for (const RankedPlan& p : r.family_best) check(p.plan);
}

TEST(ConstraintsTest, FixedScheduleAndOrder) {
  const ClusterSpec cluster = ParseClusterPreset("dgx-h100:64", "--cluster");
  SearchOptions o = Options(4 << 20, 8192);
  o.constraints = Fixed({"mesh.pipeline=4", "pipeline_schedule=interleaved-1f1b", "virtual_stages=2", "mesh_order=pipeline,data,fsdp,expert,tensor,context"});
  const SearchResult r = Search(Model("llama3-70b"), cluster, o);
  ASSERT_FALSE(r.best.empty());
  EXPECT_EQ(r.layouts, 0);  // a fixed layout: no other is tried
  for (const RankedPlan& p : r.best) {
    EXPECT_EQ(p.plan.mesh.pipeline, 4);
    EXPECT_EQ(p.plan.pipeline_schedule, "interleaved-1f1b");
    EXPECT_EQ(p.plan.virtual_stages, 2);
    EXPECT_EQ(p.plan.mesh_order, (std::vector<std::string>{"pipeline", "data", "fsdp", "expert", "tensor", "context"}));
  }
}

TEST(ConstraintsTest, FixedAxesNoMeshCanKeepIsAnInputError) {
  const ClusterSpec cluster = ParseClusterPreset("dgx-h100:64", "--cluster");
  SearchOptions o = Options(4 << 20, 8192);
  o.constraints = Fixed({"mesh.tensor=3"});  // 64 devices do not split in threes
  try {
    Search(Model("llama3-70b"), cluster, o);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("mesh.tensor=3"), std::string::npos) << e.what();
  }
}

// A lower memory limit never admits a plan above it, and can only slow the best plan down.
TEST(ConstraintsTest, MemoryLimitHolds) {
  const ClusterSpec cluster = ParseClusterPreset("dgx-h100:64", "--cluster");
  const SearchResult loose = Search(Model("llama3-70b"), cluster, Options(4 << 20, 8192));
  EXPECT_DOUBLE_EQ(loose.max_memory_bytes, kDefaultMemoryFraction * static_cast<double>(cluster.chip.hbm_bytes));
  SearchOptions o = Options(4 << 20, 8192);
  o.max_memory_bytes = 40.0 * (1 << 30);
  const SearchResult tight = Search(Model("llama3-70b"), cluster, o);
  ASSERT_FALSE(tight.best.empty());
  for (const RankedPlan& p : tight.best) EXPECT_LE(p.report.memory.peak.total(), o.max_memory_bytes);
  for (const RankedPlan& p : tight.pareto) EXPECT_LE(p.report.memory.peak.total(), o.max_memory_bytes);
  for (const RankedPlan& p : loose.best) EXPECT_LE(p.report.memory.peak.total(), loose.max_memory_bytes);
  EXPECT_LE(tight.best.front().report.tokens_per_s, loose.best.front().report.tokens_per_s);
}

// Every plan is one the framework runs exactly, and the search says how many it skipped.
TEST(ConstraintsTest, FrameworkSearchOnlyFindsWhatItRuns) {
  const ClusterSpec cluster = ParseClusterPreset("dgx-h100:64", "--cluster");
  for (Framework fw : {Framework::kMegatronCore, Framework::kTorchtitan, Framework::kMaxText, Framework::kDeepSpeed}) {
    SearchOptions o = Options(4 << 20, 8192);
    o.framework = fw;
    const SearchResult r = Search(Model("llama3-70b"), cluster, o);
    EXPECT_GT(r.unsupported, 0) << FrameworkName(fw);
    for (const RankedPlan& p : r.best) EXPECT_TRUE(FrameworkGaps(fw, Model("llama3-70b"), p.plan).empty()) << FrameworkName(fw);
    for (const RankedPlan& p : r.pareto) EXPECT_TRUE(FrameworkGaps(fw, Model("llama3-70b"), p.plan).empty()) << FrameworkName(fw);
  }
}

// A framework that runs tensor parallelism without sequence parallelism only (DeepSpeed's AutoTP)
// gets its tensor plans searched that way: with tensor 2 fixed it finds plans, all without it
// (the search once set it on with any tensor and found none).
TEST(ConstraintsTest, TensorPlansOfAFrameworkWithoutSequenceParallelismAreSearched) {
  SearchOptions o = Options(1 << 20, 4096);
  o.framework = Framework::kDeepSpeed;
  o.constraints = Fixed({"mesh.tensor=2"});
  const SearchResult r = Search(Model("llama3-8b"), ParseClusterPreset("dgx-h100:16", "--cluster"), o);
  ASSERT_FALSE(r.best.empty());
  for (const RankedPlan& p : r.best) {
    EXPECT_EQ(p.plan.mesh.tensor, 2);
    EXPECT_FALSE(p.plan.sequence_parallel);
  }
}

// MoE parallel folding is searched: with tensor 8 fixed, Mixtral's best plans split their
// experts over the tensor ranks (whole experts per rank), a fold the plan rules accept; a dense
// model, a fixed empty fold and a framework that does not fold get none; Megatron-core, which
// folds, picks a folded plan too.
TEST(ConstraintsTest, ExpertFoldsAreSearched) {
  const ClusterSpec cluster = ParseClusterPreset("dgx-h100:64", "--cluster");
  const ModelSpec mixtral = Model("mixtral-8x7b");
  auto search = [&](std::vector<std::string> fixed, std::optional<Framework> fw = std::nullopt) {
    SearchOptions o = Options(4 << 20, 4096);
    fixed.push_back("mesh.tensor=8");
    fixed.push_back("mesh.pipeline=1");
    o.constraints = Fixed(fixed);
    o.framework = fw;
    return Search(mixtral, cluster, o);
  };
  auto folded = [](const SearchResult& r) {
    int n = 0;
    for (const auto* list : {&r.best, &r.pareto, &r.family_best}) {
      for (const RankedPlan& p : *list) n += p.plan.expert_axes.empty() ? 0 : 1;
    }
    return n;
  };
  const SearchResult open = search({});
  ASSERT_FALSE(open.best.empty());
  EXPECT_GT(folded(open), 0);
  for (const RankedPlan& p : open.pareto) {
    EXPECT_FALSE(strategies::CheckPlan(p.plan, mixtral, 64, cluster.name)) << DescribeMesh(p.plan.mesh);
    if (!p.plan.expert_axes.empty()) {
      EXPECT_NE(p.family.find("(expert_axes)"), std::string::npos) << p.family;
    }
  }
  EXPECT_FALSE(open.best.front().plan.expert_axes.empty()) << DescribeMesh(open.best.front().plan.mesh);
  const SearchResult unfolded = search({"expert_axes="});
  ASSERT_FALSE(unfolded.best.empty());
  EXPECT_EQ(folded(unfolded), 0);
  EXPECT_LE(unfolded.best.front().report.tokens_per_s, open.best.front().report.tokens_per_s);
  EXPECT_EQ(folded(search({}, Framework::kTorchtitan)), 0);
  const SearchResult megatron = search({}, Framework::kMegatronCore);
  ASSERT_FALSE(megatron.best.empty());
  EXPECT_FALSE(megatron.best.front().plan.expert_axes.empty());
  // Megatron-core's experts must take the context ranks: where the widest dividing fold (tensor
  // x expert) leaves them out, the search falls through to the one it runs (context x expert).
  SearchOptions fall = Options(256 << 10, 4096);
  fall.constraints = Fixed({"mesh.tensor=2", "mesh.context=4", "mesh.expert=2"});
  fall.framework = Framework::kMegatronCore;
  const SearchResult through = Search(mixtral, ParseClusterPreset("dgx-h100:16", "--cluster"), fall);
  ASSERT_FALSE(through.best.empty());
  EXPECT_EQ(through.best.front().plan.expert_axes, (std::vector<std::string>{"context", "expert"}));
  SearchOptions dense = Options(4 << 20, 4096);
  dense.constraints = Fixed({"mesh.tensor=8", "mesh.pipeline=1"});
  EXPECT_EQ(folded(Search(Model("llama3-8b"), cluster, dense)), 0);
}

// 80 layers on 3 stages (27, 27, 26) x tensor 4 x fsdp 512 on the largest v5p slice: the search
// tries pipeline degrees that are neither powers of two nor divisors of the layers.
TEST(ConstraintsTest, UnevenPipelineDegreesAreSearched) {
#ifdef SHARDSIM_SANITIZE
  // Three cubes, 192 chips, under the sanitizers (the full slice takes a minute there): the same
  // 3 stages.
  const ClusterSpec cluster = ParseClusterPreset("tpu-v5p:4x4x12", "--cluster");
#else
  const ClusterSpec cluster = ParseClusterPreset("tpu-v5p:16x16x24", "--cluster");
#endif
  SearchOptions o = Options(4 << 20, 8192);
  o.constraints = Fixed({"mesh.pipeline=3", "mesh.tensor=4"});
  const SearchResult r = Search(Model("llama3-70b"), cluster, o);
  ASSERT_FALSE(r.best.empty());
  EXPECT_EQ(r.best.front().plan.mesh.pipeline, 3);
  // Unconstrained, the search finds plans too.
  const SearchResult free = Search(Model("llama3-70b"), cluster, Options(4 << 20, 8192));
  EXPECT_FALSE(free.best.empty());
}

// llama3-405b on 8 GPUs: nothing fits; a larger size of the same system does, and no smaller
// size of it that was searched fits.
TEST(ConstraintsTest, SmallestSizeThatFits) {
  const ClusterSpec cluster = ParseClusterPreset("dgx-h100:8", "--cluster");
  const SearchOptions o = Options(4 << 20, 8192);
  const SearchResult r = Search(Model("llama3-405b"), cluster, o);
  EXPECT_TRUE(r.best.empty());
  EXPECT_FALSE(r.nearest_misses.empty());
  for (const Miss& m : r.nearest_misses) EXPECT_GT(m.needed_bytes, r.max_memory_bytes);
  const SmallestFit fit = FindSmallestFit(Model("llama3-405b"), cluster, "dgx-h100:8", o);
  ASSERT_TRUE(fit.found) << fit.why_not;
  EXPECT_GT(fit.devices, 8);
  EXPECT_EQ(fit.devices % 8, 0);
  EXPECT_LE(fit.plan.report.memory.peak.total(), kDefaultMemoryFraction * static_cast<double>(cluster.chip.hbm_bytes));
  // One node fewer does not fit.
  const ClusterSpec fewer = ParseClusterPreset("dgx-h100:" + std::to_string(fit.devices - 8), "--cluster");
  try {
    EXPECT_TRUE(Search(Model("llama3-405b"), fewer, o).best.empty());
  } catch (const InputError&) {
    // no mesh of those devices splits the batch: nothing fits there either
  }
}

TEST(ConstraintsTest, NoLargerSizeForACustomCluster) {
  ClusterSpec cluster = ParseClusterPreset("dgx-h100:8", "--cluster");
  cluster.system = "custom";
  cluster.name = "my_cluster.json";
  const SmallestFit fit = FindSmallestFit(Model("llama3-405b"), cluster, "my_cluster.json", Options(4 << 20, 8192));
  EXPECT_FALSE(fit.found);
  EXPECT_FALSE(fit.why_not.empty());
}

// A cluster file searched at larger sizes stays that file: each size is FILE.json:SIZE with the
// file's own efficiencies (here, given at its own size and as FILE.json:SIZE).
TEST(ConstraintsTest, LargerSizesOfAClusterFileKeepItsFigures) {
  ClusterSpec file = ParseClusterPreset("dgx-h100:8", "--cluster");
  file.efficiency.matmul = 0.5;
  file.efficiency.source = "a test's";
  const std::string path = testing::TempDir() + "/larger_sizes.cluster.json";
  std::ofstream(path) << ClusterToJson(file).dump();
  for (const std::string& arg : {path, path + ":8"}) {
    const SmallestFit fit = FindSmallestFit(Model("llama3-70b"), LoadCluster(arg), arg, Options(1 << 20, 4096));
    ASSERT_TRUE(fit.found) << fit.why_not;
    EXPECT_EQ(fit.cluster, path + ":" + std::to_string(fit.devices));
    EXPECT_EQ(fit.spec.efficiency, file.efficiency);
    EXPECT_EQ(fit.tried.front(), path + ":16");
  }
  // Part of a node doubled is no size of the system: the next power of two is.
  const SmallestFit part = FindSmallestFit(Model("llama3-70b"), LoadCluster(path + ":7"), path + ":7", Options(1 << 20, 4096));
  ASSERT_TRUE(part.found) << part.why_not;
  EXPECT_EQ(part.tried.front(), path + ":16");
  // "local" comes in one size, and says so.
  const SmallestFit local = FindSmallestFit(Model("llama3-70b"), LoadCluster("local"), "local", Options(1 << 20, 4096));
  EXPECT_FALSE(local.found);
  EXPECT_NE(local.why_not.find("one size"), std::string::npos) << local.why_not;
}

}  // namespace
}  // namespace shardsim::planner
