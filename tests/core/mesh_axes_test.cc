#include "core/mesh_axes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/plan_json.h"
#include "core/plan_spec.h"

namespace shardsim {
namespace {

std::vector<std::string> Where(bool (*rule)(const MeshAxisFacts&)) {
  std::vector<std::string> names;
  for (const MeshAxisFacts& axis : kMeshAxes) {
    if (rule(axis)) names.emplace_back(axis.name);
  }
  return names;
}

TEST(MeshAxesTest, ListsEveryAxisOnceInEnumOrder) {
  std::set<std::string> names;
  for (size_t i = 0; i < kMeshAxes.size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(kMeshAxes[i].axis), i);
    EXPECT_TRUE(names.insert(std::string(kMeshAxes[i].name)).second) << kMeshAxes[i].name;
    EXPECT_EQ(&AxisFacts(kMeshAxes[i].axis), &kMeshAxes[i]);
    EXPECT_EQ(FindMeshAxis(kMeshAxes[i].name), &kMeshAxes[i]);
    EXPECT_FALSE(kMeshAxes[i].role.empty());
    EXPECT_FALSE(kMeshAxes[i].overlaps.empty());
  }
  EXPECT_EQ(MeshAxisNames(),
            (std::vector<std::string>{"data", "fsdp", "tensor", "context", "pipeline", "expert"}));
  EXPECT_EQ(FindMeshAxis("sequence"),
            nullptr);  // Megatron's sequence parallelism lives inside tensor
}

TEST(MeshAxesTest, DefaultOrderIsTheTables) {
  const std::vector<std::string> order = DefaultMeshOrder();
  EXPECT_EQ(order,
            (std::vector<std::string>{"pipeline", "data", "fsdp", "expert", "context", "tensor"}));
  for (size_t i = 0; i < order.size(); ++i)
    EXPECT_EQ(AxisFacts(order[i]).default_order, static_cast<int>(i)) << order[i];
  std::vector<std::string> sorted = order, names = MeshAxisNames();
  std::sort(sorted.begin(), sorted.end());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(sorted, names);  // a permutation of the axes
}

// strategies/data_parallel.h: the batch splits over data x fsdp x expert; parameters are
// replicated over data and context, and over expert for dense ones only; fsdp shards them.
TEST(MeshAxesTest, ReplicaRolesMatchDataParallelRules) {
  EXPECT_EQ(Where([](const MeshAxisFacts& a) { return a.batch_replica; }),
            (std::vector<std::string>{"data", "fsdp", "expert"}));
  EXPECT_EQ(Where([](const MeshAxisFacts& a) { return ReplicatesParams(a, false); }),
            (std::vector<std::string>{"data", "context", "expert"}));
  EXPECT_EQ(Where([](const MeshAxisFacts& a) { return ReplicatesParams(a, true); }),
            (std::vector<std::string>{"data", "context"}));
  EXPECT_EQ(Where([](const MeshAxisFacts& a) { return a.params == ParamRole::kSharded; }),
            (std::vector<std::string>{"fsdp"}));
  EXPECT_EQ(Where([](const MeshAxisFacts& a) { return a.params == ParamRole::kSplit; }),
            (std::vector<std::string>{"tensor", "pipeline"}));

  MeshShape mesh;
  for (const MeshAxisFacts& axis : kMeshAxes)
    mesh.Size(axis.axis) = 2 + static_cast<int64_t>(axis.axis);  // 2, 3, 4, 5, 6, 7
  EXPECT_EQ(BatchReplicas(mesh), mesh.data * mesh.fsdp * mesh.expert);
  PlanSpec plan;
  plan.mesh = mesh;
  plan.global_batch_size = 2 * 3 * 7 * 4;
  EXPECT_EQ(DerivePlanShape(plan).batch_replicas, 42);
  EXPECT_EQ(DerivePlanShape(plan).sequences_per_replica, 4);
}

TEST(MeshAxesTest, SizeAndOverlapFollowTheNamedFields) {
  MeshShape mesh;
  mesh.data = 2, mesh.fsdp = 3, mesh.tensor = 4, mesh.context = 5, mesh.pipeline = 6,
  mesh.expert = 7;
  for (const MeshAxisFacts& axis : kMeshAxes)
    EXPECT_EQ(mesh.Size(axis.axis), mesh.Size(axis.name)) << axis.name;
  EXPECT_EQ(mesh.Size(MeshAxis::kContext), 5);
  EXPECT_EQ(mesh.Product(), 2 * 3 * 4 * 5 * 6 * 7);

  const OverlapSpec defaults;
  for (const MeshAxisFacts& axis : kMeshAxes)
    EXPECT_EQ(defaults.Overlaps(axis.axis), axis.default_overlap) << axis.name;
  EXPECT_TRUE(defaults.data && defaults.fsdp && defaults.context && defaults.pipeline);
  EXPECT_FALSE(defaults.tensor || defaults.expert);
  OverlapSpec o;
  o.Overlaps(MeshAxis::kTensor) = true;
  EXPECT_TRUE(o.tensor);
}

TEST(MeshAxesTest, PlanJsonOverlapKeysComeFromTheTable) {
  PlanSpec p;
  p.global_batch_size = 8;
  p.seq_len = 128;
  p.overlap.expert = true;
  p.overlap.pipeline = false;
  const nlohmann::json j = PlanToJson(p);
  EXPECT_EQ(
      j["overlap"].dump(),
      R"({"context":true,"data":true,"expert":true,"fsdp":true,"pipeline":false,"tensor":false})");
  EXPECT_EQ(j["mesh"].dump(),
            R"({"context":1,"data":1,"expert":1,"fsdp":1,"pipeline":1,"tensor":1})");
  EXPECT_EQ(PlanFromJson(j, "p.json").overlap, p.overlap);
}

TEST(MeshAxesTest, SearchedDegrees) {
  // Every divisor of the devices left, within the axis's search_max and the given bound.
  EXPECT_EQ(SearchedDegrees(MeshAxis::kTensor, 8), (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(SearchedDegrees(MeshAxis::kTensor, 24, 16), (std::vector<int64_t>{1, 2, 3, 4, 6, 8, 12}));
  EXPECT_EQ(SearchedDegrees(MeshAxis::kContext, 1024),
            (std::vector<int64_t>{1, 2, 4, 8, 16, 32}));  // search_max 32
  EXPECT_EQ(SearchedDegrees(MeshAxis::kExpert, 1), (std::vector<int64_t>{1}));
  EXPECT_EQ(SearchedDegrees(MeshAxis::kFsdp, 6), (std::vector<int64_t>{1, 2, 3, 6}));
  EXPECT_EQ(SearchedDegrees(MeshAxis::kData, 6), (std::vector<int64_t>{6}));  // what is left
  // Pipeline: any stage count the devices allow up to the layers (uneven stages differ by a
  // layer: 80 layers on 3 stages are 27, 27, 26), at most 128.
  EXPECT_EQ(SearchedDegrees(MeshAxis::kPipeline, 6144, 80),
            (std::vector<int64_t>{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64}));
  EXPECT_EQ(SearchedDegrees(MeshAxis::kPipeline, 1024, 256).back(), 128);
  EXPECT_TRUE(SearchedDegrees(MeshAxis::kTensor, 0).empty());
}

}  // namespace
}  // namespace shardsim
