#include "strategies/saved_tensors.h"

#include <gtest/gtest.h>

#include "strategies/build_step.h"
#include "strategies/memory_model.h"
#include "strategies/op_names.h"
#include "tests/strategies/test_models.h"

namespace shardsim::strategies {
namespace {

const ModelSpec& Llama8b() {
  static const ModelSpec m = FindModelPreset("llama3-8b")->spec;  // D 4096, 32 heads, 8 K/V heads, F 14336
  return m;
}

PlanSpec PlanWith(Recompute r) {
  PlanSpec p = Plan(1, 1, 1, 1, 4096);
  p.recompute = r;
  return p;
}

const Op& ForwardOp(const LayerProgram& layer, std::string_view name) {
  for (const Op& op : layer.ops) {
    if (op.phase == Phase::kForward && op.name == name) return op;
  }
  ADD_FAILURE() << "no forward op " << name;
  return layer.ops.front();
}

double RecomputedFlops(const LayerProgram& layer, std::string_view name) {
  for (const Op& op : layer.ops) {
    if (op.phase == Phase::kRecompute && op.name == ops::Recomputed(name)) return op.flops;
  }
  return 0;
}

// torchtitan's SelectiveAC on a SwiGLU GQA layer: the odd matmuls in forward order are q, v, gate
// and down; with the attention's output and the layer input that is D + D + kv + D + F + D values
// per token, against 4D + (D + 2 kv + D) + 3F that no recomputation keeps.
TEST(SavedTensorsTest, SelectiveOpKeepsTheOddMatmulsOfTheForward) {
  const ModelSpec& m = Llama8b();
  const double d = 4096, kv = 8 * 128, f = 14336, tokens = 4096;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, PlanWith(Recompute::kSelectiveOp), 4096, false), 2 * tokens * (4 * d + kv + f));
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, PlanWith(Recompute::kNone), 4096, false), 2 * tokens * (6 * d + 2 * kv + 3 * f));
  for (LayerTensor kept : {LayerTensor::kInput, LayerTensor::kQ, LayerTensor::kV, LayerTensor::kAttentionCore, LayerTensor::kMlpGate, LayerTensor::kMlpDown}) {
    EXPECT_EQ(KeptShare(Recompute::kSelectiveOp, kept, m, PlanWith(Recompute::kSelectiveOp)), 1) << static_cast<int>(kept);
  }
  for (LayerTensor rebuilt : {LayerTensor::kK, LayerTensor::kAttentionNormOut, LayerTensor::kAttentionProj, LayerTensor::kMlpUp, LayerTensor::kMlpActivation}) {
    EXPECT_EQ(KeptShare(Recompute::kSelectiveOp, rebuilt, m, PlanWith(Recompute::kSelectiveOp)), 0) << static_cast<int>(rebuilt);
  }
}

// The same policy reruns what it did not keep: k's share of the fused qkv, the output projection
// whole, the up half of gate/up, never the attention core or the down projection.
TEST(SavedTensorsTest, SelectiveOpRerunsTheEvenMatmulsAndTheRest) {
  const ModelSpec& m = Llama8b();
  const StepProgram program = BuildStep(m, PlanWith(Recompute::kSelectiveOp));
  const LayerProgram& layer = program.Layer(LayerKind::kDense);
  const double q = 32 * 128, kv = 8 * 128;
  EXPECT_DOUBLE_EQ(RecomputedFlops(layer, ops::kQkv), ForwardOp(layer, ops::kQkv).flops * kv / (q + 2 * kv));
  EXPECT_DOUBLE_EQ(RecomputedFlops(layer, ops::kAttentionOut), ForwardOp(layer, ops::kAttentionOut).flops);
  EXPECT_DOUBLE_EQ(RecomputedFlops(layer, ops::BlockUp(ops::kMlp)), ForwardOp(layer, ops::BlockUp(ops::kMlp)).flops / 2);
  EXPECT_DOUBLE_EQ(RecomputedFlops(layer, ops::kAttentionNorm), ForwardOp(layer, ops::kAttentionNorm).flops);
  EXPECT_EQ(RecomputedFlops(layer, ops::kAttention), 0);
  EXPECT_EQ(RecomputedFlops(layer, ops::BlockDown(ops::kMlp)), 0);
}

// Under tensor and sequence parallelism the output projection's reduce-scatter is cached (the
// residual's input), its all-reduce without sequence parallelism is not.
TEST(SavedTensorsTest, SelectiveOpCachesReduceScattersNotAllReduces) {
  const ModelSpec& m = Llama8b();
  PlanSpec p = PlanWith(Recompute::kSelectiveOp);
  p.mesh.tensor = 8;
  EXPECT_EQ(KeptShare(Recompute::kSelectiveOp, LayerTensor::kAttentionProj, m, p), 0);
  LayerProgram layer = BuildStep(m, p).Layer(LayerKind::kDense);
  EXPECT_GT(RecomputedFlops(layer, ops::kAttentionOut), 0);
  bool all_reduce_rerun = false;
  for (const Op& op : layer.ops) all_reduce_rerun = all_reduce_rerun || (op.phase == Phase::kRecompute && op.name == ops::Recomputed(ops::kTensorExitAttention));
  EXPECT_TRUE(all_reduce_rerun);
  p.sequence_parallel = true;
  EXPECT_EQ(KeptShare(Recompute::kSelectiveOp, LayerTensor::kAttentionProj, m, p), 1);
  layer = BuildStep(m, p).Layer(LayerKind::kDense);
  for (const Op& op : layer.ops) EXPECT_NE(op.name, ops::Recomputed(ops::kTensorExitAttention)) << "a reduce-scatter rerun";
}

// MaxText's minimal keeps every projection's output and rebuilds the attention core, norms and
// activation: no matmul reruns, the attention does.
TEST(SavedTensorsTest, MinimalKeepsTheProjectionsAndRerunsTheAttention) {
  const ModelSpec& m = Llama8b();
  const StepProgram program = BuildStep(m, PlanWith(Recompute::kMinimal));
  const LayerProgram& layer = program.Layer(LayerKind::kDense);
  for (const Op& op : layer.ops) {
    if (op.phase == Phase::kRecompute) {
      EXPECT_NE(op.kind, ComputeKind::kMatmul) << op.name;
    }
  }
  EXPECT_GT(RecomputedFlops(layer, ops::kAttention), 0);
  const double d = 4096, kv = 8 * 128, f = 14336, tokens = 4096;
  // Input, Q, K, V, the output projection (it rebuilds the residual), gate, up; not the down
  // projection's output, which the backward does not read.
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, PlanWith(Recompute::kMinimal), 4096, false), 2 * tokens * (3 * d + 2 * kv + 2 * f));
}

// Under minimal the routed experts' dots carry an expert batch dimension: MaxText rebuilds them
// and their all-to-alls, and keeps none of their activations; the router's dot is kept.
TEST(SavedTensorsTest, MinimalRebuildsTheRoutedExperts) {
  const ModelSpec m = FindModelPreset("mixtral-8x7b")->spec;
  PlanSpec p = PlanWith(Recompute::kMinimal);
  p.mesh.expert = 2, p.global_batch_size = 2;
  EXPECT_EQ(KeptShare(Recompute::kMinimal, LayerTensor::kExperts, m, p), 0);
  const StepProgram program = BuildStep(m, p);
  const LayerProgram& layer = program.Layer(LayerKind::kMoe);
  EXPECT_DOUBLE_EQ(RecomputedFlops(layer, ops::kExpertsUp), ForwardOp(layer, ops::kExpertsUp).flops);
  EXPECT_EQ(RecomputedFlops(layer, ops::kRouter), 0);
  bool dispatch_rerun = false;
  for (const Op& op : layer.ops) dispatch_rerun = dispatch_rerun || (op.phase == Phase::kRecompute && op.name == ops::Recomputed(ops::kExpertDispatch));
  EXPECT_TRUE(dispatch_rerun);
}

// MaxText's named-save policies keep the layer input and the outputs they name; of the matmuls
// only the unnamed ones the backward needs rerun (gate and up always, never the down projection;
// QKV and the output projection unless named), and the attention core unless "context" is.
TEST(SavedTensorsTest, NamedSavePoliciesKeepWhatTheyNameAndRebuildTheRest) {
  const ModelSpec& m = Llama8b();
  const double d = 4096, kv = 8 * 128, tokens = 4096;
  struct Case {
    Recompute policy;
    bool qkv, context, out_proj;
  };
  for (const Case& c : {Case{Recompute::kSaveQkvProj, true, false, false}, Case{Recompute::kSaveDotExceptMlp, true, false, true},
                        Case{Recompute::kSaveDotWithContextExceptMlp, true, true, true}, Case{Recompute::kSaveOutProj, false, false, true}}) {
    const PlanSpec p = PlanWith(c.policy);
    const double kept = d + (c.qkv ? d + 2 * kv : 0) + (c.context ? d : 0) + (c.out_proj ? d : 0);
    EXPECT_DOUBLE_EQ(LayerActivationBytes(m, p, 4096, false), 2 * tokens * kept) << ToString(c.policy);
    const StepProgram program = BuildStep(m, p);
    const LayerProgram& layer = program.Layer(LayerKind::kDense);
    auto rerun = [&](std::string_view op) { return RecomputedFlops(layer, op) > 0; };
    EXPECT_EQ(rerun(ops::kQkv), !c.qkv) << ToString(c.policy);
    EXPECT_EQ(rerun(ops::kAttention), !c.context) << ToString(c.policy);
    EXPECT_EQ(rerun(ops::kAttentionOut), !c.out_proj) << ToString(c.policy);
    EXPECT_TRUE(rerun(ops::BlockUp(ops::kMlp))) << ToString(c.policy);
    EXPECT_FALSE(rerun(ops::BlockDown(ops::kMlp))) << ToString(c.policy);
  }
}

// Under tensor and sequence parallelism the rebuilt products need their gathered inputs: the
// attention's gather reruns with QKV, the MLP's always; the attention's reduction with the output
// projection, the MLP's never.
TEST(SavedTensorsTest, NamedSavePoliciesRerunTheCollectivesTheirRebuildsNeed) {
  const ModelSpec& m = Llama8b();
  auto reruns = [&](Recompute r, std::string_view name) {
    PlanSpec p = PlanWith(r);
    p.mesh.tensor = 4, p.sequence_parallel = true;
    const StepProgram program = BuildStep(m, p);
    for (const Op& op : program.Layer(LayerKind::kDense).ops) {
      if (op.phase == Phase::kRecompute && op.name == ops::Recomputed(name)) return true;
    }
    return false;
  };
  EXPECT_FALSE(reruns(Recompute::kSaveQkvProj, ops::kTensorEnterAttention));
  EXPECT_TRUE(reruns(Recompute::kSaveOutProj, ops::kTensorEnterAttention));
  EXPECT_TRUE(reruns(Recompute::kSaveQkvProj, ops::kTensorExitAttention));
  EXPECT_FALSE(reruns(Recompute::kSaveDotExceptMlp, ops::kTensorExitAttention));
  EXPECT_TRUE(reruns(Recompute::kSaveDotExceptMlp, ops::TensorEnter(ops::kMlp)));
  EXPECT_FALSE(reruns(Recompute::kSaveDotExceptMlp, ops::TensorExit(ops::kMlp)));
  // The output projection is saved reduced, its partial sums never: under tensor and sequence
  // parallelism it is a D / t shard, and save-out-proj keeps the input's and its shards (2 D / t
  // per token) where save-qkv-proj keeps the input's and Q, K, V's ((D + D + 2 kv) / t).
  PlanSpec out = PlanWith(Recompute::kSaveOutProj);
  out.mesh.tensor = 4, out.sequence_parallel = true;
  PlanSpec qkv = out;
  qkv.recompute = Recompute::kSaveQkvProj;
  const double d = 4096, kv = 8 * 128;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, out, 4096, false), 2 * 4096 * 2 * d / 4);
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, qkv, 4096, false), 2 * 4096 * (2 * d + 2 * kv) / 4);
}

// MLA's low-rank latents carry none of the saved names, and its up projections' weight gradients
// read them: the down projections rerun under every named-save policy; with an unfused attention
// kernel "context" names nothing, so the attention core reruns even where the policy names it.
TEST(SavedTensorsTest, NamedSavePoliciesRebuildMlaLatentsAndUnnamedContext) {
  const ModelSpec m = FindModelPreset("deepseek-v3")->spec;
  PlanSpec moe = PlanWith(Recompute::kSaveDotWithContextExceptMlp);
  moe.mesh.expert = 2, moe.global_batch_size = 2;
  const StepProgram program = BuildStep(m, moe);
  const LayerProgram& layer = program.Layer(LayerKind::kDense);
  EXPECT_GT(RecomputedFlops(layer, ops::kKvDown), 0);
  EXPECT_EQ(RecomputedFlops(layer, ops::kKvUp), 0);
  EXPECT_EQ(RecomputedFlops(layer, ops::kAttention), 0);  // flash: "context" saved
  const ModelSpec& llama = Llama8b();
  PlanSpec unfused = PlanWith(Recompute::kSaveDotWithContextExceptMlp);
  unfused.flash_attention = false;
  const StepProgram plain = BuildStep(llama, unfused);
  EXPECT_GT(RecomputedFlops(plain.Layer(LayerKind::kDense), ops::kAttention), 0);
  EXPECT_EQ(KeptShare(Recompute::kSaveDotWithContextExceptMlp, LayerTensor::kAttentionCore, llama, unfused), 0);
}

// MLA without a query down projection: q, kv_down, kv_up (K and V, decompressed), the output
// projection: SelectiveAC keeps q and kv_up's K and V, reruns kv_down and the output projection.
TEST(SavedTensorsTest, SelectiveOpOnMlaKeepsKeysAndValuesTogether) {
  ModelSpec m = FindModelPreset("deepseek-v3")->spec;
  m.mla->q_lora_rank = 0;
  const PlanSpec p = PlanWith(Recompute::kSelectiveOp);
  EXPECT_EQ(KeptShare(Recompute::kSelectiveOp, LayerTensor::kQ, m, p), 1);
  EXPECT_EQ(KeptShare(Recompute::kSelectiveOp, LayerTensor::kK, m, p), 1);
  EXPECT_EQ(KeptShare(Recompute::kSelectiveOp, LayerTensor::kV, m, p), 1);
  EXPECT_EQ(KeptShare(Recompute::kSelectiveOp, LayerTensor::kAttentionProj, m, p), 0);
  m.mla->q_lora_rank = 1536;  // q_down, q_up, kv_down, kv_up: now q_up and kv_up are even
  EXPECT_EQ(KeptShare(Recompute::kSelectiveOp, LayerTensor::kQ, m, p), 0);
  EXPECT_EQ(KeptShare(Recompute::kSelectiveOp, LayerTensor::kV, m, p), 0);
  EXPECT_EQ(KeptShare(Recompute::kSelectiveOp, LayerTensor::kAttentionProj, m, p), 1);
}

// Under tensor and sequence parallelism SelectiveAC keeps the down projection's own output (the
// seventh matmul, odd: every token's partial sum, D wide) and its reduce-scatter's output (D / t),
// the output projection's reduce-scatter output only (the fourth matmul is even).
TEST(SavedTensorsTest, SelectiveOpUnderSequenceParallelKeepsPartialAndReducedDown) {
  const ModelSpec& m = Llama8b();
  PlanSpec p = PlanWith(Recompute::kSelectiveOp);
  p.mesh.tensor = 8, p.sequence_parallel = true;
  const double d = 4096, q = 4096, kv = 8 * 128, f = 14336, tokens = 4096, t = 8;
  // Input, attention and down reduced outputs (D / t each); q, v, attention output, gate (/ t);
  // the down projection's partial sums (D).
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, p, 4096, false), 2 * tokens * (3 * d / t + (q + kv + q + f) / t + d));
}

// Where the products keep their all-gathered input (DTensor's styles in torchtitan), the two
// norms' outputs are kept whole, not as the sequence shard, and the backward gathers nothing
// again; Megatron's regather keeps the shard and gathers it in the backward.
TEST(SavedTensorsTest, KeptGatheredSequenceInputsAreWholeAndNotGatheredAgain) {
  const ModelSpec& m = Llama8b();
  PlanSpec p = PlanWith(Recompute::kNone);
  p.mesh.tensor = 8, p.sequence_parallel = true;
  const double d = 4096, tokens = 4096, t = 8;
  const double regathered = LayerActivationBytes(m, p, 4096, false);
  auto regathers = [&m](const PlanSpec& plan) {
    const StepProgram program = BuildStep(m, plan);
    int n = 0;
    for (const Op& op : program.Layer(LayerKind::kDense).ops) n += op.name.find(ops::Regather(ops::kTensorEnterAttention)) != std::string::npos ? 1 : 0;
    return n;
  };
  EXPECT_GT(regathers(p), 0);
  p.sequence_parallel_inputs = "keep-gathered";
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, p, 4096, false) - regathered, 2 * tokens * 2 * (d - d / t));
  EXPECT_EQ(regathers(p), 0);
  // Without sequence parallelism there is no shard to keep or gather.
  p.sequence_parallel = false;
  PlanSpec regather = p;
  regather.sequence_parallel_inputs = "regather";
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, p, 4096, false), LayerActivationBytes(m, regather, 4096, false));
}

// A recomputed layer holds, once, what its policy does not keep: full's layer less its input;
// selective-layer's a whole layer, as the layers it recomputes are full ones.
TEST(SavedTensorsTest, TheLayerBeingRecomputedIsCountedOnce) {
  const ModelSpec& m = Llama8b();
  PlanSpec p = PlanWith(Recompute::kNone);
  p.global_batch_size = 1, p.micro_batch_size = 1;
  const double none = LayerActivationBytes(m, p, 4096, false);
  auto stored = [&](Recompute r) {
    PlanSpec q = p;
    q.recompute = r;
    return EstimateMemory(BuildStep(m, q)).peak.activations - static_cast<double>(m.num_layers) * LayerActivationBytes(m, q, 4096, false);
  };
  const double input = 2 * 4096.0 * 4096;
  EXPECT_DOUBLE_EQ(stored(Recompute::kFull), none - input);
  EXPECT_DOUBLE_EQ(stored(Recompute::kSelectiveLayer), none - input);
  EXPECT_DOUBLE_EQ(stored(Recompute::kSelectiveOp), none - LayerActivationBytes(m, PlanWith(Recompute::kSelectiveOp), 4096, false));
  EXPECT_DOUBLE_EQ(stored(Recompute::kNone), 0);
}

// A rerun slice of a fused matmul is a narrower matmul (costed by its own shape): k's columns of
// qkv; selective-layer's half keeps the shape (the same matmul, in half the layers).
TEST(SavedTensorsTest, RerunSlicesAreNarrowerMatmuls) {
  const ModelSpec& m = Llama8b();
  const StepProgram op_level = BuildStep(m, PlanWith(Recompute::kSelectiveOp));
  const StepProgram layer_level = BuildStep(m, PlanWith(Recompute::kSelectiveLayer));
  auto recomputed = [](const LayerProgram& layer, std::string_view name) {
    for (const Op& op : layer.ops) {
      if (op.phase == Phase::kRecompute && op.name == ops::Recomputed(name)) return op;
    }
    return Op{};
  };
  EXPECT_EQ(recomputed(op_level.Layer(LayerKind::kDense), ops::kQkv).n, 8 * 128);
  EXPECT_EQ(recomputed(layer_level.Layer(LayerKind::kDense), ops::kQkv).n, ForwardOp(layer_level.Layer(LayerKind::kDense), ops::kQkv).n);
}

// Each policy keeps between full's and none's, and reruns between none's and full's.
TEST(SavedTensorsTest, PoliciesLieBetweenNoneAndFull) {
  const ModelSpec& m = Llama8b();
  auto bytes = [&](Recompute r) { return LayerActivationBytes(m, PlanWith(r), 4096, false); };
  auto rerun = [&](Recompute r) { return PhaseFlops(BuildStep(m, PlanWith(r)).Layer(LayerKind::kDense), Phase::kRecompute); };
  for (Recompute r : {Recompute::kSelective, Recompute::kSelectiveOp, Recompute::kSelectiveLayer, Recompute::kMinimal, Recompute::kSaveQkvProj,
                      Recompute::kSaveDotExceptMlp, Recompute::kSaveDotWithContextExceptMlp, Recompute::kSaveOutProj}) {
    EXPECT_LE(bytes(r), bytes(Recompute::kNone)) << ToString(r);
    EXPECT_GT(bytes(r), bytes(Recompute::kFull)) << ToString(r);
    EXPECT_LT(rerun(r), rerun(Recompute::kFull)) << ToString(r);
  }
  EXPECT_DOUBLE_EQ(bytes(Recompute::kSelectiveLayer), (bytes(Recompute::kNone) + bytes(Recompute::kFull)) / 2);
  EXPECT_DOUBLE_EQ(rerun(Recompute::kSelectiveLayer), rerun(Recompute::kFull) / 2);
  EXPECT_EQ(rerun(Recompute::kNone), 0);
}

}  // namespace
}  // namespace shardsim::strategies
