// FP8 weight casts (PlanSpec::fp8_weight_casts, param_gather_dtype fp8): the share of a weight's
// cast each forward and input-gradient product pays per micro-batch, and the ops that carry it.
#include <gtest/gtest.h>

#include "strategies/build_step.h"
#include "strategies/data_parallel.h"
#include "strategies/memory_model.h"
#include "strategies/op_names.h"
#include "tests/strategies/test_models.h"

namespace shardsim::strategies {
namespace {

// 8 data ranks, 32 sequences: 4 micro-batches of 1 each.
PlanSpec Fp8Plan() {
  PlanSpec p = Plan(8, 1, 1, 32, 1024);
  p.dtype = "fp8";
  return p;
}

TEST(Fp8WeightCastsTest, SharesByWhereTheWeightsComeFrom) {
  PlanSpec p = Fp8Plan();
  ASSERT_EQ(DerivePlanShape(p).num_microbatches, 4);
  WeightCastShares s = Fp8WeightCastShares(p, 4);
  EXPECT_EQ(s.forward, 1);  // unset: per micro-batch, forward and backward
  EXPECT_EQ(s.backward_input, 1);
  p.fp8_weight_casts = "per-step";  // Transformer Engine's cache: the first micro-batch casts
  s = Fp8WeightCastShares(p, 4);
  EXPECT_DOUBLE_EQ(s.forward, 0.25);
  EXPECT_EQ(s.backward_input, 0);
  // ZeRO-1 gathering FP8 updated shards once a step: 1/8 of the weight, once in 4 micro-batches.
  p.zero_stage = 1, p.param_gather_dtype = "fp8";
  s = Fp8WeightCastShares(p, 4);
  EXPECT_DOUBLE_EQ(s.forward, 1.0 / 32);
  EXPECT_EQ(s.backward_input, 0);
  // FSDP gathering FP8 shards before each forward and backward: 1/8 each, every micro-batch.
  PlanSpec f = Plan(1, 1, 1, 32, 1024);
  f.mesh.fsdp = 8, f.dtype = "fp8", f.param_gather_dtype = "fp8";
  s = Fp8WeightCastShares(f, 4);
  EXPECT_DOUBLE_EQ(s.forward, 1.0 / 8);
  EXPECT_DOUBLE_EQ(s.backward_input, 1.0 / 8);
  f.fsdp_reshard_after_forward = false;  // kept gathered for the step: gathered once
  s = Fp8WeightCastShares(f, 4);
  EXPECT_DOUBLE_EQ(s.forward, 1.0 / 32);
  EXPECT_EQ(s.backward_input, 0);
  PlanSpec bf16 = Plan(8, 1, 1, 32, 1024);
  bf16.fp8_weight_casts = "per-step";  // no FP8 products: nothing to share
  EXPECT_EQ(Fp8WeightCastShares(bf16, 4).forward, 1);
}

TEST(Fp8WeightCastsTest, ForwardAndInputGradientProductsCarryTheShare) {
  PlanSpec p = Fp8Plan();
  p.fp8_weight_casts = "per-step";
  const StepProgram program = BuildStep(GptModel(4, 1024, 16), p);
  int64_t products = 0;
  for (const Op& op : program.Layer(LayerKind::kDense).ops) {
    if (op.kind != ComputeKind::kMatmul || op.is_comm()) continue;
    ++products;
    const double expected = op.phase == Phase::kForward ? 0.25 : op.phase == Phase::kBackwardInput ? 0.0 : 1.0;
    EXPECT_EQ(op.weight_cast_share, expected) << op.name << " " << ToString(op.phase);
  }
  EXPECT_GE(products, 12);  // qkv, out, the MLP's two or three, each in three passes
}

TEST(Fp8WeightCastsTest, PerStepCastsKeepAnFp8CopyAndItsTranspose) {
  PlanSpec p = Fp8Plan();
  EXPECT_EQ(Fp8WeightCacheBytes(p), 0);  // per micro-batch: nothing kept between passes
  p.fp8_weight_casts = "per-step";
  EXPECT_EQ(Fp8WeightCacheBytes(p), 2);  // tensorwise: one byte each, a scale per tensor
  p.fp8_recipe = "mxfp8";
  EXPECT_DOUBLE_EQ(Fp8WeightCacheBytes(p), 2 * (1 + 1.0 / 32));  // an 8-bit scale per 32 in each
  p.fp8_recipe = "nvfp4";  // half a byte each, an E4M3 scale per 16
  EXPECT_DOUBLE_EQ(Fp8WeightCacheBytes(p), 2 * (0.5 + 1.0 / 16));
  // Where FP8 products take any layout (Blackwell), a per-tensor weight keeps no transpose; block
  // scaled ones keep both copies (their GEMMs run TN only).
  EXPECT_DOUBLE_EQ(Fp8WeightCacheBytes(p, true), 2 * (0.5 + 1.0 / 16));
  p.fp8_recipe = "mxfp8";
  EXPECT_DOUBLE_EQ(Fp8WeightCacheBytes(p, true), 2 * (1 + 1.0 / 32));
  p.fp8_recipe = "tensorwise";
  EXPECT_EQ(Fp8WeightCacheBytes(p, true), 1);
  PlanSpec native = p;
  native.zero_stage = 1, native.param_gather_dtype = "fp8";  // the weights are the FP8 copies
  EXPECT_EQ(Fp8WeightCacheBytes(native), 0);
  // In memory: every stage's buffers grow by 2 B per weight, the vocabulary matrices apart.
  PlanSpec each = Fp8Plan();
  const StepProgram with = BuildStep(GptModel(4, 1024, 16), p), without = BuildStep(GptModel(4, 1024, 16), each);
  const MemoryBreakdown a = EstimateMemory(with).peak, b = EstimateMemory(without).peak;
  const Stage& stage = with.stages[0];
  ASSERT_GT(stage.params() - stage.sixteen_bit_params, 0);
  EXPECT_DOUBLE_EQ(a.fp8_weight_cache, 2 * (stage.params() - stage.sixteen_bit_params));
  EXPECT_EQ(b.fp8_weight_cache, 0);
  EXPECT_NEAR(a.buffers - b.buffers, a.fp8_weight_cache, 1e-6 * a.buffers);
  // On a chip whose FP8 products take any layout, one byte per weight.
  EXPECT_DOUBLE_EQ(EstimateMemory(with, nullptr, true).peak.fp8_weight_cache, a.fp8_weight_cache / 2);
}

// Under pipeline and expert parallelism every stage holds the copies of its own products' weights,
// the routed experts' among them.
TEST(Fp8WeightCastsTest, EveryStageCachesItsWeightsExpertsIncluded) {
  const ModelSpec m = FindModelPreset("tiny-moe")->spec;
  PlanSpec p = Plan(2, 1, 2, 16, 256);
  p.mesh.expert = 2, p.dtype = "fp8", p.fp8_weight_casts = "per-step";
  const StepProgram program = BuildStep(m, p);
  const MemoryReport report = EstimateMemory(program);
  ASSERT_EQ(report.stages.size(), 2u);
  for (size_t s = 0; s < report.stages.size(); ++s) {
    const Stage& stage = program.stages[s];
    ASSERT_GT(stage.expert_params, 0) << s;
    EXPECT_DOUBLE_EQ(report.stages[s].fp8_weight_cache, 2 * (stage.dense_params - stage.sixteen_bit_params + stage.expert_params)) << s;
    EXPECT_GT(report.stages[s].fp8_weight_cache, 2 * (stage.dense_params - stage.sixteen_bit_params)) << s;
  }
  p.fp8_recipe = "blockwise";  // an fp32 scale per 128 x 128 tile in each copy
  EXPECT_DOUBLE_EQ(Fp8WeightCacheBytes(p), 2 * (1 + 4.0 / 16384));
}

// Routed experts gathered in FP8 are cast on their own shard: over data 8 x expert 8 the dense
// weights have 64 replicas for ZeRO-1 to shard over, each expert's weights 8, so a rank casts an
// eighth of its experts once a step and a 64th of its dense weights.
TEST(Fp8WeightCastsTest, ExpertWeightsTakeTheirOwnShard) {
  const ModelSpec m = FindModelPreset("tiny-moe")->spec;
  PlanSpec p = Plan(8, 1, 1, 256, 256);  // 64 replicas of the batch: 4 micro-batches of 1 each
  p.mesh.expert = 8, p.dtype = "fp8", p.zero_stage = 1, p.param_gather_dtype = "fp8";
  ASSERT_EQ(DerivePlanShape(p).num_microbatches, 4);
  EXPECT_DOUBLE_EQ(Fp8WeightCastShares(p, 4).forward, 1.0 / (64 * 4));
  EXPECT_DOUBLE_EQ(Fp8WeightCastShares(p, 4, ParamKind::kExpert).forward, 1.0 / (8 * 4));
  const StepProgram program = BuildStep(m, p);
  int64_t experts = 0;
  for (const Op& op : program.Layer(LayerKind::kMoe).ops) {
    if (op.kind != ComputeKind::kMatmul || op.is_comm() || op.phase != Phase::kForward) continue;
    const bool expert = op.name == ops::kExpertsUp || op.name == ops::kExpertsDown;
    experts += expert ? 1 : 0;
    EXPECT_DOUBLE_EQ(op.weight_cast_share, expert ? 1.0 / (8 * 4) : 1.0 / (64 * 4)) << op.name;
  }
  EXPECT_EQ(experts, 2);
  // ZeRO-3 gathers each layer's shard before its forward and again before its backward.
  p.zero_stage = 3;
  const WeightCastShares dense = Fp8WeightCastShares(p, 4), expert = Fp8WeightCastShares(p, 4, ParamKind::kExpert);
  EXPECT_DOUBLE_EQ(dense.forward, 1.0 / 64);
  EXPECT_DOUBLE_EQ(dense.backward_input, 1.0 / 64);
  EXPECT_DOUBLE_EQ(expert.forward, 1.0 / 8);
  EXPECT_DOUBLE_EQ(expert.backward_input, 1.0 / 8);
  // Experts without replicas are not gathered: cast as the plan casts (per micro-batch, unset).
  PlanSpec whole = p;
  whole.mesh.data = 1, whole.global_batch_size = 32;
  EXPECT_EQ(Fp8WeightCastShares(whole, 4, ParamKind::kExpert).forward, 1);
  EXPECT_EQ(Fp8WeightCastShares(whole, 4, ParamKind::kExpert).backward_input, 1);
}

}  // namespace
}  // namespace shardsim::strategies
