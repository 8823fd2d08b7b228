// The search against brute force: a space small enough to enumerate completely (every
// factorisation of the devices over the six axes, every layout of the axes the search moves,
// every ZeRO stage, micro-batch size, schedule with each chunk count, recomputation, and every
// expert fold of an MoE model) is
// estimated plan by plan, and the search's best must be as fast as the best found that way.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/cluster_presets.h"
#include "core/model_presets.h"
#include "core/plan_json.h"
#include "planner/constraints.h"
#include "planner/search.h"
#include "strategies/build_step.h"
#include "strategies/data_parallel.h"
#include "strategies/plan_rules.h"
#include "strategies/schedule.h"
#include "topologies/cluster.h"

namespace shardsim::planner {
namespace {

// Every mesh of `n` devices: each axis any divisor of what the axes before it leave.
std::vector<MeshShape> AllMeshes(int64_t n) {
  std::vector<MeshShape> meshes;
  std::function<void(size_t, int64_t, MeshShape)> place = [&](size_t axis, int64_t left, MeshShape mesh) {
    if (axis + 1 == kMeshAxisCount) {
      mesh.Size(kMeshAxes[axis].axis) = left;
      meshes.push_back(mesh);
      return;
    }
    for (int64_t d = 1; d <= left; ++d) {
      if (left % d != 0) continue;
      mesh.Size(kMeshAxes[axis].axis) = d;
      place(axis + 1, left / d, mesh);
    }
  };
  place(0, n, MeshShape{});
  return meshes;
}

// Every order of the mesh's movable axes of size > 1 (the others stay where the default has them).
std::vector<std::vector<std::string>> AllOrders(const MeshShape& mesh) {
  const std::vector<std::string> base = DefaultMeshOrder();
  std::vector<size_t> slots;
  std::vector<std::string> axes;
  for (size_t i = 0; i < base.size(); ++i) {
    if (AxisFacts(base[i]).search_reorders && mesh.Size(base[i]) > 1) slots.push_back(i), axes.push_back(base[i]);
  }
  std::sort(axes.begin(), axes.end());
  std::vector<std::vector<std::string>> orders;
  do {
    std::vector<std::string> order = base;
    for (size_t k = 0; k < slots.size(); ++k) order[slots[k]] = axes[k];
    orders.push_back(order);
  } while (std::next_permutation(axes.begin(), axes.end()));
  return orders;
}

struct Brute {
  double best_tokens_per_s = 0;
  int64_t estimated = 0;
};

// Every expert fold of an MoE model: unset and each set of the axes experts can be split over
// (the plan rules refuse those a mesh cannot take); only unset for a dense model.
std::vector<std::vector<std::string>> AllFolds(const ModelSpec& model) {
  std::vector<std::vector<std::string>> folds = {{}};
  if (!model.moe) return folds;
  const std::vector<std::string>& axes = ExpertAxisNames();
  for (unsigned subset = 1; subset < (1u << axes.size()); ++subset) {
    std::vector<std::string> fold;
    for (size_t i = 0; i < axes.size(); ++i) {
      if (subset & (1u << i)) fold.push_back(axes[i]);
    }
    folds.push_back(fold);
  }
  return folds;
}

Brute BruteForce(const ModelSpec& model, const ClusterSpec& cluster, int64_t sequences, int64_t seq_len) {
  const topologies::Cluster graph(cluster);
  const double limit = kDefaultMemoryFraction * static_cast<double>(cluster.chip.hbm_bytes);
  Brute brute;
  for (const MeshShape& mesh : AllMeshes(DeviceCount(cluster))) {
    for (const auto& order : AllOrders(mesh)) {
     for (const std::vector<std::string>& fold : AllFolds(model)) {
      PlanSpec base;
      base.expert_axes = fold;
      base.mesh = mesh;
      base.mesh_order = order;
      base.global_batch_size = sequences;
      base.seq_len = seq_len;
      base.sequence_parallel = mesh.tensor > 1;
      sim::AxisCollectives collectives(graph, base, 3);
      std::vector<std::pair<std::string, int64_t>> schedules = {{"1f1b", 1}};
      if (mesh.pipeline > 1) {
        for (const strategies::Schedule* s : strategies::AllSchedules()) {
          if (s->name() == "1f1b") continue;
          for (int64_t v : s->SearchedVirtualStages(mesh.pipeline)) schedules.push_back({std::string(s->name()), v});
        }
      }
      for (int64_t zero = 0; zero <= 3; ++zero) {
        for (int64_t mbs : {1, 2, 4, 8}) {
          for (const auto& [schedule, v] : schedules) {
            for (Recompute recompute : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
              PlanSpec plan = base;
              plan.zero_stage = zero, plan.micro_batch_size = mbs, plan.pipeline_schedule = schedule, plan.virtual_stages = v, plan.recompute = recompute;
              // The default resharding, and with pipeline stages (where the default keeps sharded
              // parameters gathered) re-gathering without recomputation everywhere: more than the
              // search tries (only where keeping does not fit), so equality also shows that bound
              // loses nothing on these spaces.
              std::vector<std::optional<bool>> reshards = {std::nullopt};
              if (mesh.pipeline > 1 && recompute == Recompute::kNone && !strategies::ParamShardAxes(plan, strategies::ParamKind::kDense).empty()) {
                reshards.push_back(true);
              }
              for (const std::optional<bool>& reshard : reshards) {
                plan.fsdp_reshard_after_forward = reshard;
                if (strategies::CheckPlan(plan, model, DeviceCount(cluster), cluster.name)) continue;
                const sim::StepReport r = sim::Estimate(strategies::BuildStep(model, plan), cluster, collectives);
                ++brute.estimated;
                if (r.memory.peak.total() <= limit) brute.best_tokens_per_s = std::max(brute.best_tokens_per_s, r.tokens_per_s);
              }
            }
          }
        }
      }
     }
    }
  }
  return brute;
}

void ExpectSearchFindsTheBest(const char* model_name, const char* cluster_name, int64_t sequences, int64_t seq_len) {
  const ModelSpec model = FindModelPreset(model_name)->spec;
  const ClusterSpec cluster = ParseClusterPreset(cluster_name, "--cluster");
  const Brute brute = BruteForce(model, cluster, sequences, seq_len);
  SearchOptions o;
  o.global_batch_tokens = sequences * seq_len;
  o.seq_len = seq_len;
  o.threads = 2;
  // The brute force splits the stages by default only: so does the search here (its balanced
  // stages rung off, as a fixed pipeline_layout turns it off).
  nlohmann::json fixed = nlohmann::json::object();
  ApplyPlanOverride(fixed, "pipeline_layout=");
  o.constraints = ConstraintsFromJson(fixed, "plan (from --set)");
  const SearchResult r = Search(model, cluster, o);
  EXPECT_EQ(r.balanced, 0);
  ASSERT_GT(brute.estimated, 1000) << "the space is not the one meant";
  std::printf("%s on %s: brute force estimated %lld plans, the search %lld\n", model_name, cluster_name, static_cast<long long>(brute.estimated),
              static_cast<long long>(r.evaluated));
  ASSERT_FALSE(r.best.empty());
  EXPECT_GT(brute.estimated, r.evaluated);  // the search estimates fewer plans ...
  EXPECT_DOUBLE_EQ(r.best.front().report.tokens_per_s, brute.best_tokens_per_s);  // ... and finds the best
}

// 24 GPUs in 3 nodes (not a power of two: the degrees 3, 6, 12 and 24 are in the space), a dense
// 8B model whose memory makes sharding matter.
TEST(ExhaustiveSearchTest, Llama8bOnThreeNodes) {
#ifdef SHARDSIM_SANITIZE
  GTEST_SKIP() << "every plan of 24 devices estimated one by one: release build only (Llama8bOnOneNode runs sanitized)";
#endif
  ExpectSearchFindsTheBest("llama3-8b", "dgx-h100:24", 48, 4096);
}

// The same on one node: small enough for the sanitizers.
TEST(ExhaustiveSearchTest, Llama8bOnOneNode) { ExpectSearchFindsTheBest("llama3-8b", "dgx-h100:8", 16, 4096); }

// An MoE model (expert axis, and every expert fold) on two nodes.
TEST(ExhaustiveSearchTest, MixtralOnTwoNodes) {
#ifdef SHARDSIM_SANITIZE
  GTEST_SKIP() << "190,000 brute-force estimates: release build only";
#endif
  ExpectSearchFindsTheBest("mixtral-8x7b", "dgx-h100:16", 32, 4096);
}

}  // namespace
}  // namespace shardsim::planner
