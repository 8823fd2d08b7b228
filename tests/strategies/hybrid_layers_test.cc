// A hybrid model's layers (ModelSpec::hybrid_pattern): one block each, Mamba-2 mixers among them
// (strategies/mamba_layer.h), in the step program, the memory model and the plan rules.
#include <gtest/gtest.h>

#include <map>
#include <tuple>

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
  for (const auto& [kind, count, sixteen_bit] : program.stages[0].chunks[0].layers) kinds[kind] += count;
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

// What a mixer keeps: its input and norm output (D each), the projection's output, the scan
// kernel's output before its gate, the gated output and the RMSNorm's (Megatron-core's
// memory-efficient path); full recomputation its input only; Megatron's selective recomputation
// leaves it whole.
TEST(HybridLayersTest, MixerActivations) {
  PlanSpec p = Plan(1, 1, 1, 8, 4096);
  const double d = 2688, inner = 4096, bc = 2 * 8 * 128, heads = 64, tokens = 4096;
  const double kept = LayerKindActivationBytes(Nano(), p, 4096, LayerKind::kMamba);
  EXPECT_DOUBLE_EQ(kept, 2 * tokens * (d + d + (2 * inner + bc + heads) + 3 * inner));
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

// Over context ranks (Megatron-core's mamba_context_parallel.py) a mixer sends z, x, B, C and dt
// (five all-to-alls) from its tokens to whole sequences of its share of the heads and the scan's
// output back (and their gradients the other way), scans as many (token, channel) pairs as
// without, plus each copy of a group where the groups are fewer than the context ranks, and keeps
// what it keeps without, B and C's copies aside.
TEST(HybridLayersTest, MixerOverContext) {
  const double inner = 4096, heads = 64, d = 2688, n = 128, tokens = 2048;  // 4096-token sequences over 2 ranks
  PlanSpec p = Plan(1, 1, 1, 8, 4096);
  p.mesh.context = 2;
  const LayerProgram mixer = BuildStep(Nano(), p).Layer(LayerKind::kMamba);
  // (name, bytes per all-to-all, how many): z and x, B and C, dt, y.
  const std::vector<std::tuple<std::string_view, double, int>> exchanges = {
      {ops::kMambaZxToHeads, 2 * tokens * inner, 2}, {ops::kMambaBcToHeads, 2 * tokens * 8 * n, 2}, {ops::kMambaDtToHeads, 2 * tokens * heads, 1},
      {ops::kMambaToSequence, 2 * tokens * inner, 1}};
  for (const auto& [name, bytes, count] : exchanges) {
    int forward = 0, backward = 0;
    for (const Op& op : mixer.ops) {
      if (op.name == name && op.phase == Phase::kForward) {
        ++forward;
        EXPECT_EQ(op.collective, CollectiveOp::kAllToAll);
        EXPECT_EQ(op.stream, Stream::kContext);
        EXPECT_EQ(op.axes, std::vector<std::string>{"context"});
        EXPECT_DOUBLE_EQ(op.comm_bytes, bytes) << name;
      }
      if (op.name == ops::Grad(name) && op.phase == Phase::kBackwardInput) ++backward;
    }
    EXPECT_EQ(forward, count) << name;
    EXPECT_EQ(backward, count) << name;
  }
  EXPECT_DOUBLE_EQ(Find(mixer, ops::kSsd)->flops, tokens * MambaScanFlopsPerToken(Nano(), 4096));
  EXPECT_DOUBLE_EQ(LayerKindActivationBytes(Nano(), p, 2048, LayerKind::kMamba), 2 * tokens * (d + d + (2 * inner + 2 * 8 * n + heads) + 3 * inner));
  // 16 ranks over 8 groups: each group's B and C on two ranks, its C B^T computed twice.
  p.mesh.context = 16;
  const LayerProgram copies = BuildStep(Nano(), p).Layer(LayerKind::kMamba);
  const double few = 4096.0 / 16;
  EXPECT_DOUBLE_EQ(Find(copies, ops::kMambaBcToHeads)->comm_bytes, 2 * few * 16 * n);
  EXPECT_DOUBLE_EQ(Find(copies, ops::kSsd)->flops, few * (MambaScanFlopsPerToken(Nano(), 4096) + 8 * MambaGroupScanFlopsPerToken(Nano(), 4096)));
  EXPECT_DOUBLE_EQ(MambaGroupScanFlopsPerToken(Nano(), 4096), 2.0 * 128 * 128);
  // Over tensor 2 as well: 32 heads and 4 groups per tensor rank; 8 context ranks copy each group
  // twice.
  p.mesh.tensor = 2, p.mesh.context = 8, p.sequence_parallel = true;
  const LayerProgram both = BuildStep(Nano(), p).Layer(LayerKind::kMamba);
  const double share = 4096.0 / 8;
  EXPECT_EQ(MambaScannedGroups(Nano(), 2, 8), 8);
  EXPECT_DOUBLE_EQ(Find(both, ops::kMambaZxToHeads)->comm_bytes, 2 * share * inner / 2);
  EXPECT_DOUBLE_EQ(Find(both, ops::kMambaBcToHeads)->comm_bytes, 2 * share * 8 * n);
  EXPECT_DOUBLE_EQ(Find(both, ops::kMambaDtToHeads)->comm_bytes, 2 * share * heads / 2);
  EXPECT_DOUBLE_EQ(Find(both, ops::kSsd)->flops, share * (MambaScanFlopsPerToken(Nano(), 4096) / 2 + 4 * MambaGroupScanFlopsPerToken(Nano(), 4096)));
  // Recomputation: full replays the all-to-alls with the mixer; selective (the attention core
  // alone) replays none of them, while the attention's own context exchange is replayed.
  auto replayed = [&](Recompute mode, LayerKind kind, bool mamba) {
    p.recompute = mode;
    const LayerProgram layer = BuildStep(Nano(), p).Layer(kind);
    int replays = 0;
    for (const Op& op : layer.ops) {
      if (op.phase == Phase::kRecompute && op.stream == Stream::kContext) replays += mamba == (op.name.rfind("mamba", 0) == 0);
    }
    return replays;
  };
  EXPECT_EQ(replayed(Recompute::kFull, LayerKind::kMamba, true), 6);
  EXPECT_EQ(replayed(Recompute::kSelective, LayerKind::kMamba, true), 0);
  EXPECT_GT(replayed(Recompute::kSelective, LayerKind::kAttentionOnly, false), 0);
  // Without context parallelism none of it.
  p.mesh.context = 1, p.recompute = Recompute::kNone;
  EXPECT_EQ(Find(BuildStep(Nano(), p).Layer(LayerKind::kMamba), ops::kMambaZxToHeads), nullptr);
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

// Mixers split by heads and groups (tensor must divide both), over context by heads (and groups
// or their copies), and recompute as Megatron-core does (none, selective, full).
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
  // Context parallelism gives each context rank whole sequences of its share of the heads, and
  // of the groups or a copy of one: the heads must divide, the groups divide or be divided.
  PlanSpec context = Plan(1, 1, 1, 8, 4096);
  context.mesh.context = 2;
  EXPECT_EQ(Rejected(context), "");
  context.mesh.context = 16;  // 64 heads; 8 groups, each copied twice
  EXPECT_EQ(Rejected(context), "");
  ModelSpec six_groups = Nano();
  six_groups.mamba->num_heads = 48, six_groups.mamba->groups = 6;
  context.mesh.context = 4;  // divides the 48 heads, neither divides nor is divided by the 6 groups
  const auto groups = CheckPlan(context, six_groups, 4, "cluster");
  ASSERT_TRUE(groups.has_value());
  EXPECT_EQ(groups->field, "mesh/context");
  EXPECT_EQ(groups->valid, "1, 2, 3, 6, 12, 24, 48") << groups->what;
  context.mesh.context = 6;
  context.seq_len = 6144;  // whole tokens per context rank
  const auto six = CheckPlan(context, six_groups, 6, "cluster");
  EXPECT_FALSE(six.has_value()) << six->field << ": " << six->what;
  PlanSpec op = Plan(1, 1, 1, 8, 4096);
  op.recompute = Recompute::kSelectiveOp;
  EXPECT_EQ(Rejected(op), "recompute");
}

}  // namespace
}  // namespace shardsim::strategies
