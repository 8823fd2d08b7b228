// Which tensor-parallel collectives overlap.tensor hides under tensor_overlap_scope
// single-product (torch's micro-pipeline TP pass): the step program's ops, their bytes and order.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "strategies/build_step.h"
#include "strategies/op_names.h"
#include "strategies/step_program.h"
#include "tests/strategies/test_models.h"

namespace shardsim::strategies {
namespace {

// Under tensor_overlap_scope single-product (torch's micro-pipeline TP over torchtitan's separate
// projections) the backward reductions of the attention's input gradient (Q, K, V) and a gated
// MLP's (gate, up) run blocking; every other tensor collective keeps overlap.tensor, and a GELU
// MLP's single up projection hides its reduction. The bytes and the order do not change.
TEST(TensorOverlapScopeTest, SingleProductScopeBlocksSummedReductions) {
  PlanSpec p = Plan(1, 4, 1, 4, 2048);
  p.sequence_parallel = true;
  p.overlap.tensor = true;
  struct TensorOp {
    std::string name;
    bool overlapped;
    double bytes;
  };
  auto tensor_ops = [&](const ModelSpec& m, const PlanSpec& plan, LayerKind kind = LayerKind::kDense) {
    std::vector<TensorOp> out;
    const StepProgram program = BuildStep(m, plan);  // kept alive: the loop reads its layer
    for (const Op& op : program.Layer(kind).ops) {
      if (op.is_comm() && op.stream == Stream::kTensor && !ops::IsRegather(op.name)) out.push_back({op.name, op.overlapped, op.comm_bytes});
    }
    return out;
  };
  for (const char* preset : {"llama3-8b", "gpt3-175b"}) {
    const ModelSpec m = FindModelPreset(preset)->spec;
    const bool gated = m.mlp == MlpKind::kSwiGlu;
    const auto all = tensor_ops(m, p);
    PlanSpec single = p;
    single.tensor_overlap_scope = "single-product";
    const auto scoped = tensor_ops(m, single);
    ASSERT_EQ(all.size(), scoped.size()) << preset;
    int blocking = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      EXPECT_EQ(all[i].name, scoped[i].name) << preset;
      EXPECT_EQ(all[i].bytes, scoped[i].bytes) << preset << " " << all[i].name;
      EXPECT_TRUE(all[i].overlapped) << preset << " " << all[i].name;
      const bool summed = all[i].name == ops::Grad(ops::kTensorEnterAttention) || (gated && all[i].name == ops::Grad(ops::TensorEnter(ops::kMlp)));
      EXPECT_EQ(scoped[i].overlapped, !summed) << preset << " " << all[i].name;
      blocking += scoped[i].overlapped ? 0 : 1;
    }
    EXPECT_EQ(blocking, gated ? 2 : 1) << preset;
  }
  // Routed experts split over tensor run grouped products, which the pass never fuses: their
  // collectives block both ways; the attention's stays as above.
  const ModelSpec mixtral = FindModelPreset("mixtral-8x7b")->spec;
  PlanSpec single = p;
  single.tensor_overlap_scope = "single-product";
  int expert_ops = 0;
  for (const TensorOp& op : tensor_ops(mixtral, single, LayerKind::kMoe)) {
    const bool experts = op.name.find(ops::kTensorEnterExperts) != std::string::npos || op.name.find(ops::kTensorExitExperts) != std::string::npos;
    const bool summed = experts || op.name == ops::Grad(ops::kTensorEnterAttention) || op.name == ops::Grad(ops::TensorEnter(ops::kMlp));
    EXPECT_EQ(op.overlapped, !summed) << op.name;
    expert_ops += experts ? 1 : 0;
  }
  EXPECT_EQ(expert_ops, 4);  // their gather and reduction, forward and backward
}

// With row-wise FP8 scales torch's pass does not fuse an all-gather into the product it feeds
// (pytorch/pytorch#149990): under single-product scope the gathers before FP8 products (the
// attention's and MLP's inputs forward, their output gradients backward) run blocking; the
// head's 16-bit gather, the reductions the scope allows and every collective of tensor-wise
// scaling or of scope "all" keep overlap.tensor.
TEST(TensorOverlapScopeTest, SingleProductScopeBlocksRowwiseGathers) {
  const ModelSpec m = FindModelPreset("llama3-8b")->spec;
  PlanSpec p = Plan(1, 4, 1, 4, 2048);
  p.sequence_parallel = true;
  p.overlap.tensor = true;
  p.dtype = "fp8";
  p.fp8_recipe = "rowwise";
  p.tensor_overlap_scope = "single-product";
  auto overlapped = [&](const PlanSpec& plan) {
    std::map<std::string, bool> out;
    for (const LayerKind kind : {LayerKind::kDense, LayerKind::kHead}) {
      const StepProgram program = BuildStep(m, plan);
      for (const Op& op : program.Layer(kind).ops) {
        if (op.is_comm() && op.stream == Stream::kTensor && !ops::IsRegather(op.name)) out[op.name] = op.overlapped;
      }
    }
    return out;
  };
  const std::set<std::string> gathers = {std::string(ops::kTensorEnterAttention), std::string(ops::TensorEnter(ops::kMlp)),
                                         ops::Grad(ops::kTensorExitAttention), ops::Grad(ops::TensorExit(ops::kMlp))};
  const std::set<std::string> summed = {ops::Grad(ops::kTensorEnterAttention), ops::Grad(ops::TensorEnter(ops::kMlp))};
  const std::map<std::string, bool> rowwise = overlapped(p);
  ASSERT_TRUE(rowwise.contains(std::string(ops::kTensorEnterHead)));
  for (const auto& [name, hides] : rowwise) EXPECT_EQ(hides, !gathers.contains(name) && !summed.contains(name)) << name;
  PlanSpec tensorwise = p;
  tensorwise.fp8_recipe = "tensorwise";
  for (const auto& [name, hides] : overlapped(tensorwise)) EXPECT_EQ(hides, !summed.contains(name)) << name;
  PlanSpec all = p;
  all.tensor_overlap_scope = "all";
  for (const auto& [name, hides] : overlapped(all)) EXPECT_TRUE(hides) << name;
}

}  // namespace
}  // namespace shardsim::strategies
