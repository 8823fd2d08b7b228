// FP8 sequence-parallel gathers (tensor_gather_dtype fp8): the all-gathers of the attention's, a
// dense MLP's and the Mamba mixer's inputs and output gradients move one byte plus the recipe's
// scales; the reduce-scatters and the MoE layer's and the head's gathers keep 16 bits.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "strategies/build_step.h"
#include "strategies/memory_model.h"
#include "strategies/op_names.h"
#include "strategies/plan_rules.h"
#include "tests/strategies/test_models.h"

namespace shardsim::strategies {
namespace {

// Each tensor collective of `kind`'s layer program, by name and phase, with its bytes.
std::map<std::pair<std::string, Phase>, double> TensorBytes(const ModelSpec& m, const PlanSpec& p, LayerKind kind) {
  std::map<std::pair<std::string, Phase>, double> out;
  const StepProgram program = BuildStep(m, p);  // kept alive: the loop reads its layer
  for (const Op& op : program.Layer(kind).ops) {
    if (op.is_comm() && op.stream == Stream::kTensor) out[{op.name, op.phase}] = op.comm_bytes;
  }
  return out;
}

// TensorBytes of `p` with 16-bit gathers and with tensor_gather_dtype fp8.
using GatherBytes = std::map<std::pair<std::string, Phase>, double>;
std::pair<GatherBytes, GatherBytes> WideAndNarrow(const ModelSpec& m, PlanSpec p, LayerKind kind) {
  p.tensor_gather_dtype = "";
  GatherBytes wide = TensorBytes(m, p, kind);
  p.tensor_gather_dtype = "fp8";
  return {std::move(wide), TensorBytes(m, p, kind)};
}

PlanSpec Fp8Plan(const std::string& recipe) {
  PlanSpec p = Plan(1, 4, 1, 4, 2048);
  p.sequence_parallel = true;
  p.dtype = "fp8";
  p.fp8_recipe = recipe;
  return p;
}

// Which ops of a layer move FP8 under tensor_gather_dtype fp8: the FP8 products' gathers.
bool QuantisedGather(const std::string& name, CollectiveOp op, bool moe) {
  if (op != CollectiveOp::kAllGather) return false;
  const bool attention = name.find(ops::kTensorEnterAttention) != std::string::npos || name.find(ops::kTensorExitAttention) != std::string::npos;
  const bool mlp = name.find(ops::TensorEnter(ops::kMlp)) != std::string::npos || name.find(ops::TensorExit(ops::kMlp)) != std::string::npos;
  return attention || (mlp && !moe);
}

TEST(TensorGatherTest, Fp8GathersHalveOnlyTheProductsInputs) {
  for (const auto& [preset, kind] : {std::pair{"llama3-8b", LayerKind::kDense}, std::pair{"mixtral-8x7b", LayerKind::kMoe}}) {
    const ModelSpec m = FindModelPreset(preset)->spec;
    const PlanSpec wide = Fp8Plan("tensorwise");
    PlanSpec narrow = wide;
    narrow.tensor_gather_dtype = "fp8";
    const auto before = TensorBytes(m, wide, kind), after = TensorBytes(m, narrow, kind);
    ASSERT_EQ(before.size(), after.size()) << preset;
    const StepProgram program = BuildStep(m, narrow);
    int quantised = 0;
    for (const Op& op : program.Layer(kind).ops) {
      if (!op.is_comm() || op.stream != Stream::kTensor) continue;
      const double was = before.at({op.name, op.phase});
      if (QuantisedGather(op.name, op.collective, kind == LayerKind::kMoe)) {
        EXPECT_DOUBLE_EQ(op.comm_bytes, was / 2) << preset << " " << op.name;  // per-tensor: 1 byte of 2
        ++quantised;
      } else {
        EXPECT_DOUBLE_EQ(op.comm_bytes, was) << preset << " " << op.name;
      }
    }
    // The attention's forward gather, its regather and its output gradient's gather; a dense
    // MLP's the same three.
    EXPECT_EQ(quantised, kind == LayerKind::kMoe ? 3 : 6) << preset;
    // The head's gathers stay 16-bit.
    EXPECT_EQ(TensorBytes(m, wide, LayerKind::kHead), TensorBytes(m, narrow, LayerKind::kHead)) << preset;
  }
}

// MXFP8 moves its 8-bit scale per 32 elements beside each byte; without sequence parallelism
// there is no gather and nothing changes.
TEST(TensorGatherTest, RecipeScalesAndNoSequenceParallelism) {
  const ModelSpec m = FindModelPreset("llama3-8b")->spec;
  const auto [wide, narrow] = WideAndNarrow(m, Fp8Plan("mxfp8"), LayerKind::kDense);
  const std::pair<std::string, Phase> gather{std::string(ops::kTensorEnterAttention), Phase::kForward};
  EXPECT_DOUBLE_EQ(narrow.at(gather), wide.at(gather) * (1 + 1.0 / 32) / 2);
  PlanSpec no_sp = Fp8Plan("tensorwise");
  no_sp.sequence_parallel = false;
  const auto [all_reduce, unchanged] = WideAndNarrow(m, no_sp, LayerKind::kDense);
  EXPECT_EQ(unchanged, all_reduce);
}

// A hybrid model's Mamba mixers gather FP8 too (in_proj's input, out_proj's output gradient); its
// MoE layers keep 16 bits.
TEST(TensorGatherTest, MambaMixersGatherFp8) {
  const ModelSpec m = FindModelPreset("nemotron-3-nano-30b-a3b")->spec;
  const auto [wide, narrow] = WideAndNarrow(m, Fp8Plan("tensorwise"), LayerKind::kMamba);
  int halved = 0;
  for (const auto& [key, bytes] : wide) {
    EXPECT_TRUE(narrow.at(key) == bytes || narrow.at(key) == bytes / 2) << key.first;
    halved += narrow.at(key) == bytes / 2 ? 1 : 0;
  }
  EXPECT_EQ(halved, 3);  // the forward gather, the regather, the output gradient's gather
}

// Kept whole (sequence_parallel_inputs keep-gathered, torchtitan's DTensor styles), the products'
// input is the gathered FP8 tensor: less activation memory; regathered, the same.
TEST(TensorGatherTest, AKeptGatheredInputIsHeldAtTheGathersWidth) {
  const ModelSpec m = FindModelPreset("llama3-8b")->spec;
  for (const char* inputs : {"keep-gathered", "regather"}) {
    PlanSpec p = Fp8Plan("tensorwise");
    p.recompute = Recompute::kNone;
    p.sequence_parallel_inputs = inputs;
    const double wide = LayerKindActivationBytes(m, p, 2048, LayerKind::kDense);
    p.tensor_gather_dtype = "fp8";
    const double narrow = LayerKindActivationBytes(m, p, 2048, LayerKind::kDense);
    if (std::string(inputs) == "keep-gathered") {
      // The attention's and the MLP's normed inputs, 2048 x 4096 each, at 1 byte instead of 2.
      EXPECT_DOUBLE_EQ(wide - narrow, 2.0 * 2048 * 4096) << inputs;
    } else {
      EXPECT_DOUBLE_EQ(narrow, wide) << inputs;
    }
  }
}

// FP8 gathers need sequence-parallel gathers to narrow.
TEST(TensorGatherTest, NeedsTensorAndSequenceParallelism) {
  const ModelSpec m = FindModelPreset("llama3-8b")->spec;
  PlanSpec p = Fp8Plan("tensorwise");
  p.tensor_gather_dtype = "fp8";
  EXPECT_FALSE(CheckPlan(p, m, 4, "test").has_value());
  p.sequence_parallel = false;
  const auto miss = CheckPlan(p, m, 4, "test");
  ASSERT_TRUE(miss.has_value());
  EXPECT_EQ(miss->field, "tensor_gather_dtype");
}

}  // namespace
}  // namespace shardsim::strategies
