// A hybrid model's layers (ModelSpec::hybrid_pattern): one block each, Mamba-2 mixers among them
// (strategies/mamba_layer.h), in the step program, the memory model and the plan rules.
#include <gtest/gtest.h>

#include <map>

#include "core/error.h"
#include "core/model_presets.h"
#include "strategies/build_step.h"
#include "strategies/mamba_layer.h"
#include "strategies/memory_model.h"
#include "strategies/op_names.h"
#include "strategies/plan_rules.h"
#include "tests/strategies/test_models.h"

namespace shardsim::strategies {
namespace {

const ModelSpec& Nano() {
  static const ModelSpec m = FindModelPreset("nemotron-3-nano-30b-a3b")->spec;  // D 2688; mixers of 64 heads x 64, N 128, G 8
  return m;
}

const Op* Find(const LayerProgram& layer, std::string_view name, Phase phase = Phase::kForward) {
  for (const Op& op : layer.ops) {
    if (op.name == name && op.phase == phase) return &op;
  }
  return nullptr;
}

// The stage runs the pattern's kinds, one block each, and holds the model's parameters.
TEST(HybridLayersTest, StageRunsThePatternsKindsAndHoldsTheModel) {
  const StepProgram program = BuildStep(Nano(), Plan(1, 1, 1, 8, 4096));
  std::map<LayerKind, int64_t> kinds;
  for (const auto& [kind, count] : program.stages[0].chunks[0].layers) kinds[kind] += count;
  EXPECT_EQ(kinds[LayerKind::kMamba], 23);
  EXPECT_EQ(kinds[LayerKind::kMoeOnly], 23);
  EXPECT_EQ(kinds[LayerKind::kAttentionOnly], 6);
  EXPECT_EQ(kinds.count(LayerKind::kDense), 0u);
  EXPECT_NEAR(program.stages[0].params() / static_cast<double>(CountParams(Nano()).total), 1.0, 1e-9);
  // The attention layer has no MLP; the MoE layer no attention.
  EXPECT_EQ(Find(program.Layer(LayerKind::kAttentionOnly), ops::BlockUp(ops::kMlp)), nullptr);
  EXPECT_EQ(Find(program.Layer(LayerKind::kMoeOnly), ops::kQkv), nullptr);
  EXPECT_NE(Find(program.Layer(LayerKind::kMoeOnly), ops::kRouter), nullptr);
}

// A mixer split over tensor: the input projection's columns (z, x, B, C, dt) and the scan's FLOPs
// by heads and groups, the output projection's rows; the f / g collectives of width D around it,
// and under sequence parallelism the regather.
TEST(HybridLayersTest, MixerSplitsOverTensor) {
  PlanSpec p = Plan(1, 2, 1, 8, 4096);
  p.sequence_parallel = true;
  const StepProgram program = BuildStep(Nano(), p);
  const LayerProgram& mixer = program.Layer(LayerKind::kMamba);
  const Op* in = Find(mixer, ops::kMambaIn);
  ASSERT_NE(in, nullptr);
  EXPECT_EQ(in->k, 2688);
  EXPECT_EQ(in->n, (2 * 4096 + 2 * 8 * 128 + 64) / 2);
  const Op* out = Find(mixer, ops::kMambaOut);
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->k, 4096 / 2);
  const Op* scan = Find(mixer, ops::kSsd);
  ASSERT_NE(scan, nullptr);
  EXPECT_EQ(scan->kind, ComputeKind::kScan);
  EXPECT_DOUBLE_EQ(scan->flops, 4096.0 * MambaScanFlopsPerToken(Nano(), 4096) / 2);
  // Sequences shorter than a chunk make chunks of their own length: 2QNG + H(2QP + 4NP) at Q = 64.
  EXPECT_DOUBLE_EQ(MambaScanFlopsPerToken(Nano(), 64), 2.0 * 64 * 128 * 8 + 64 * (2.0 * 64 * 64 + 4.0 * 128 * 64));
  EXPECT_LT(MambaScanFlopsPerToken(Nano(), 64), MambaScanFlopsPerToken(Nano(), 4096));
  EXPECT_DOUBLE_EQ(Find(mixer, ops::Grad(ops::kSsd), Phase::kBackwardInput)->flops, 2 * scan->flops);
  EXPECT_NE(Find(mixer, ops::TensorEnter(ops::kMamba)), nullptr);
  EXPECT_NE(Find(mixer, ops::TensorExit(ops::kMamba)), nullptr);
  EXPECT_NE(Find(mixer, ops::Grad(ops::Regather(ops::TensorEnter(ops::kMamba))), Phase::kBackwardInput), nullptr);
}

// What a mixer keeps: its input and norm output (D each), the projection's output, the
// convolution's, the scan's and the gated norm's; full recomputation its input only; Megatron's
// selective recomputation leaves it whole.
TEST(HybridLayersTest, MixerActivations) {
  PlanSpec p = Plan(1, 1, 1, 8, 4096);
  const double d = 2688, inner = 4096, bc = 2 * 8 * 128, heads = 64, tokens = 4096;
  const double kept = LayerKindActivationBytes(Nano(), p, 4096, LayerKind::kMamba);
  EXPECT_DOUBLE_EQ(kept, 2 * tokens * (d + d + (2 * inner + bc + heads) + 2 * inner));
  p.recompute = Recompute::kSelective;
  EXPECT_DOUBLE_EQ(LayerKindActivationBytes(Nano(), p, 4096, LayerKind::kMamba), kept);
  p.recompute = Recompute::kFull;
  EXPECT_DOUBLE_EQ(LayerKindActivationBytes(Nano(), p, 4096, LayerKind::kMamba), 2 * tokens * d);
  // An attention layer keeps no MLP tensors, an MoE layer no attention ones: together they keep
  // no more than the transformer layer that holds both (its residual between them aside).
  p.recompute = Recompute::kNone;
  const double attention = LayerKindActivationBytes(Nano(), p, 4096, LayerKind::kAttentionOnly);
  const double experts = LayerKindActivationBytes(Nano(), p, 4096, LayerKind::kMoeOnly);
  EXPECT_GT(attention, 2 * tokens * d);
  EXPECT_GT(experts, attention);
  EXPECT_NEAR(attention + experts - 2 * tokens * d, LayerActivationBytes(Nano(), p, 4096, true) - 2 * tokens * d, 1);
}

// LatentMoE (Nemotron 3 Super, Ultra): the routed experts read and write the latent width, their
// rows travel at it, and two projections (replicated over tensor) move between it and D; the
// shared experts keep D.
TEST(HybridLayersTest, LatentMoeRoutesNarrowerRows) {
  ModelSpec m = FindModelPreset("tiny-moe")->spec;  // D 256, 8 experts top-2, expert width 256, one shared expert
  PlanSpec p = Plan(1, 1, 1, 8, 256);
  p.mesh.expert = 2, p.mesh.data = 1;
  auto layer_op = [&](const ModelSpec& model, std::string_view name) {
    const StepProgram program = BuildStep(model, p);
    const Op* op = Find(program.Layer(LayerKind::kMoe), name);
    return op ? *op : Op{};
  };
  const double wide_dispatch = layer_op(m, ops::kExpertDispatch).comm_bytes;
  const ParamCounts wide = CountParams(m);
  m.moe->latent_size = 64;
  EXPECT_DOUBLE_EQ(layer_op(m, ops::kExpertDispatch).comm_bytes, wide_dispatch / 4);
  EXPECT_EQ(layer_op(m, ops::kExpertsUp).k, 64);
  EXPECT_EQ(layer_op(m, ops::kExpertsDown).n, 64);
  EXPECT_EQ(layer_op(m, ops::kLatentDown).n, 64);
  EXPECT_EQ(layer_op(m, ops::kLatentUp).k, 64);
  const ParamCounts latent = CountParams(m);
  EXPECT_EQ(latent.routed_experts * 4, wide.routed_experts);  // SwiGLU experts over 64-wide rows, not 256
  EXPECT_EQ(latent.shared_experts, wide.shared_experts);
  EXPECT_EQ(latent.router - wide.router, 4 * 2 * 256 * 64);  // four MoE layers' two projections
}

std::string Rejected(const PlanSpec& p) {
  const auto bad = CheckPlan(p, Nano(), p.mesh.Product(), "cluster");
  return bad ? bad->field : "";
}

// Mixers split by heads and groups (tensor must divide both), scan whole sequences (no context
// parallelism) and recompute as Megatron-core does (none, selective, full).
TEST(HybridLayersTest, PlanRules) {
  EXPECT_EQ(Rejected(Plan(8, 1, 1, 8, 4096)), "");
  // Attention allows tensor 4 (32 heads, 8 K/V heads); two groups of B and C do not.
  ModelSpec two_groups = Nano();
  two_groups.num_kv_heads = 8;
  two_groups.mamba->groups = 2;
  const auto bad = CheckPlan(Plan(1, 4, 1, 8, 4096), two_groups, 4, "cluster");
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->field, "mesh/tensor");
  EXPECT_NE(bad->what.find("Mamba-2"), std::string::npos) << bad->what;
  EXPECT_FALSE(CheckPlan(Plan(1, 2, 1, 8, 4096), two_groups, 2, "cluster").has_value());
  PlanSpec context = Plan(1, 1, 1, 8, 4096);
  context.mesh.context = 2;
  EXPECT_EQ(Rejected(context), "mesh/context");
  PlanSpec op = Plan(1, 1, 1, 8, 4096);
  op.recompute = Recompute::kSelectiveOp;
  EXPECT_EQ(Rejected(op), "recompute");
}

}  // namespace
}  // namespace shardsim::strategies
