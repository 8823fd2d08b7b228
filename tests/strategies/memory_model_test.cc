#include "strategies/memory_model.h"
#include "strategies/saved_tensors.h"

#include <gtest/gtest.h>

#include "strategies/build_step.h"
#include "strategies/context_parallel.h"
#include "strategies/op_names.h"
#include "strategies/state_bytes.h"
#include "tests/strategies/test_models.h"

namespace shardsim::strategies {
namespace {

// Korthikanti et al. 2022, section 4: activations per layer, 16-bit, GPT layer.
TEST(ActivationMemoryTest, KorthikantiFormulas) {
  const int64_t s = 2048, b = 4, h = 6144, a = 64;
  const ModelSpec m = GptModel(48, h, a);
  const double sbh = static_cast<double>(s * b * h), as_h = static_cast<double>(a * s) / static_cast<double>(h);
  PlanSpec p = Plan(1, 1, 1, b, s);
  p.flash_attention = false;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, p, s * b, false), sbh * (34 + 5 * as_h));
  p.mesh.tensor = 8;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, p, s * b, false), sbh * (10 + 24.0 / 8 + 5 * as_h / 8));
  p.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, p, s * b, false), sbh / 8 * (34 + 5 * as_h));
  p.recompute = Recompute::kSelective;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, p, s * b, false), sbh / 8 * 34);
  p.recompute = Recompute::kFull;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, p, s * b, false), 2 * sbh / 8);
}

TEST(ActivationMemoryTest, SwigluAndGqaAreCounted) {
  const ModelSpec m = FindModelPreset("llama3-8b")->spec;  // D 4096, 32 heads, 8 K/V heads, F 14336
  PlanSpec p = Plan(1, 1, 1, 1, 4096);
  const double d = 4096, kv = 8 * 128, f = 14336;
  // Norm and block inputs 8D; Q, K, V, attention output 2(D + kv + kv + D); SwiGLU 6F.
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, p, 4096, false), 4096 * (8 * d + 2 * (2 * d + 2 * kv) + 6 * f));
}

// ZeRO (Rajbhandari et al. 2019): 2 + 2 + 12 bytes per parameter; stage 1 shards the 12, stage
// 2 also the gradients, stage 3 the parameters too.
TEST(ParameterMemoryTest, ZeroStagesSplitSixteenBytes) {
  const ModelSpec m = FindModelPreset("llama3-8b")->spec;
  PlanSpec p = Plan(8, 1, 1, 8, 4096);
  const double n = static_cast<double>(CountParams(m).total);
  const double dp = 8;
  for (int64_t stage = 0; stage <= 3; ++stage) {
    p.zero_stage = stage;
    const MemoryBreakdown b = EstimateMemory(BuildStep(m, p)).peak;
    EXPECT_NEAR(b.optimizer / n, stage >= 1 ? 12 / dp : 12, 1e-3) << stage;
    EXPECT_NEAR(b.grads / n, stage >= 2 ? 2 / dp : 2, 1e-3) << stage;
    EXPECT_NEAR(b.params / n, stage >= 3 ? 2 / dp : 2, 1e-3) << stage;
  }
}

TEST(ParameterMemoryTest, OneFOneBHoldsPipelineDepthMicrobatches) {
  const ModelSpec m = FindModelPreset("llama3-8b")->spec;
  PlanSpec p = Plan(1, 1, 4, 16, 2048);
  const StepProgram onef = BuildStep(m, p);
  p.pipeline_schedule = "gpipe";
  const StepProgram gpipe = BuildStep(m, p);
  const double layer = LayerActivationBytes(m, p, 2048, false) * 8;  // 8 layers per stage
  EXPECT_NEAR(EstimateMemory(onef).stages[0].activations / layer, 4, 1e-9);   // first stage: p in flight
  EXPECT_NEAR(EstimateMemory(onef).stages[3].activations / layer, 1, 1e-9);   // last stage: one
  EXPECT_NEAR(EstimateMemory(gpipe).stages[0].activations / layer, 16, 1e-9); // GPipe: all m
  // Past the steady-state play (8 p v + 2 p = 40 micro-batches) GPipe still holds them all, and a
  // step in rounds holds a round's.
  p.global_batch_size = 64;
  EXPECT_NEAR(EstimateMemory(BuildStep(m, p)).stages[0].activations / layer, 64, 1e-9);
  p.pipeline_rounds = 4;
  EXPECT_NEAR(EstimateMemory(BuildStep(m, p)).stages[0].activations / layer, 16, 1e-9);
  p.pipeline_schedule = "1f1b";
  EXPECT_NEAR(EstimateMemory(BuildStep(m, p)).stages[0].activations / layer, 4, 1e-9);
  p.pipeline_rounds = 32;  // 2 a round: fewer than the stages
  EXPECT_NEAR(EstimateMemory(BuildStep(m, p)).stages[0].activations / layer, 2, 1e-9);
}

// pipeline_buffers, from torch.distributed.pipelining's stage.py: per micro-batch, a receive
// buffer for each stage input and each output gradient, kept across steps (the input buffer is
// the first layer's input, which the activations count while its micro-batch is in flight), and
// each output to its backward; keep-outputs keeps every output, the last stage's 16-bit logits,
// to the end of the step, and each input buffer's gradient to the next step.
TEST(BufferMemoryTest, PipelineBuffersPerMicrobatchAndKeptOutputs) {
  const ModelSpec m = FindModelPreset("llama3-8b")->spec;
  PlanSpec p = Plan(1, 1, 4, 16, 2048);  // 16 micro-batches of one sequence, 1F1B over 4 stages
  const double n = 16, boundary = 2048.0 * 4096 * 2, logits = 2048.0 * static_cast<double>(m.vocab_size) * 2;
  auto buffers = [&](const std::string& mode) {
    p.pipeline_buffers = mode;
    std::vector<double> b;
    for (const MemoryBreakdown& stage : EstimateMemory(BuildStep(m, p)).stages) b.push_back(stage.buffers);
    return b;
  };
  const std::vector<double> none = buffers(""), per = buffers("per-microbatch"), kept = buffers("keep-outputs");
  EXPECT_EQ(none, buffers("per-transfer"));
  p.pipeline_buffers = "keep-outputs";
  const MemoryReport report = EstimateMemory(BuildStep(m, p));
  // Micro-batches in flight under 1F1B: 4, 3, 2, 1 from the first stage.
  const double in_flight[] = {4, 3, 2, 1};
  for (size_t s = 0; s < 4; ++s) {
    const double inputs = s == 0 ? 0 : n * boundary - in_flight[s] * boundary;
    const double grads = s == 3 ? 0 : n * boundary;
    const double outputs = s == 3 ? 0 : in_flight[s] * boundary;
    EXPECT_NEAR(per[s] - none[s], inputs + grads + outputs, 1) << s;
    const double kept_outputs = s == 3 ? (n - 1) * logits : n * boundary;
    const double input_grads = s == 0 ? 0 : n * boundary;  // left in the input buffers' .grad
    EXPECT_NEAR(kept[s] - none[s], inputs + grads + kept_outputs + input_grads, 1) << s;
    EXPECT_NEAR(report.stages[s].pipeline, kept[s] - none[s], 1) << s;
  }
  // DualPipe: each chunk counts the half of the micro-batches that takes its direction. Stage 0
  // holds the first chunk of one direction (8 output-gradient buffers, at most 8 outputs in
  // flight) and the head's chunk of the other (8 input buffers).
  PlanSpec dual = p;
  dual.pipeline_schedule = "dualpipe";
  dual.pipeline_buffers = "per-microbatch";
  const MemoryReport dual_report = EstimateMemory(BuildStep(m, dual));
  EXPECT_GT(dual_report.stages[0].pipeline, 8 * boundary);
  EXPECT_LE(dual_report.stages[0].pipeline, 24 * boundary);
  // ZB-V: the last stage holds the turn, whose two chunks keep their input and output-gradient
  // buffers (the neighbour's tensors put in their place) though nothing crosses stages there.
  PlanSpec v = p;
  v.pipeline_schedule = "zbv";
  v.pipeline_buffers = "per-microbatch";
  EXPECT_GT(EstimateMemory(BuildStep(m, v)).stages[3].pipeline, 3 * n * boundary);
  // One stage: nothing to send or receive.
  PlanSpec one = Plan(1, 1, 1, 16, 2048);
  one.pipeline_buffers = "keep-outputs";
  EXPECT_EQ(EstimateMemory(BuildStep(m, one)).peak.pipeline, 0);
}

// FSDP2 kept gathered (reshard_after_forward=False, torchtitan's default under pipeline
// parallelism): the stage's whole weights at the compute width, and its unsharded gradients
// accumulated over the micro-batches at the reduction width (FSDP2 upcasts them to its
// reduce_dtype while gradient sync is off), beside the sharded states.
TEST(BufferMemoryTest, KeptGatheredStageHoldsWeightsAndGradientsAtTheReductionWidth) {
  const ModelSpec m = FindModelPreset("llama3-8b")->spec;
  PlanSpec p = Plan(1, 1, 4, 16, 2048);
  p.mesh.fsdp = 8;
  p.zero_stage = 3;
  p.global_batch_size = 128;
  p.fsdp_reshard_after_forward = false;
  auto gathered = [&](const std::string& reduce) {
    p.grad_reduce_dtype = reduce;
    const StepProgram program = BuildStep(m, p);
    PlanSpec resharded = p;
    resharded.fsdp_reshard_after_forward = true;
    const StepProgram other = BuildStep(m, resharded);
    const int64_t stage = 1;  // no head, no loss buffers
    return (EstimateMemory(program).stages[stage].buffers - EstimateMemory(other).stages[stage].buffers) / program.stages[stage].params();
  };
  // Less the two layers resharding keeps gathered (2 of the stage's 8, at 2 bytes).
  EXPECT_NEAR(gathered("fp32"), 2 + 4 - 2.0 * 2 / 8, 1e-9);
  EXPECT_NEAR(gathered("bf16"), 2 + 2 - 2.0 * 2 / 8, 1e-9);
  // One micro-batch per step: nothing accumulates, the gradients stay at the compute width.
  p.global_batch_size = 8;
  p.micro_batch_size = 1;
  EXPECT_NEAR(gathered("fp32"), 2 + 2 - 2.0 * 2 / 8, 1e-9);
}

// Gathered in FP8 (param_gather_dtype fp8), a kept-gathered stage holds one byte per weight, the
// embedding's and head's 16-bit; the step's gather moves as much, and the per-layer gathers of a
// resharding plan shrink alike. The gradients' width does not change.
TEST(BufferMemoryTest, Fp8GatheredWeightsHoldAndMoveOneByte) {
  const ModelSpec m = FindModelPreset("llama3-8b")->spec;
  PlanSpec p = Plan(1, 1, 4, 128, 2048);
  p.mesh.fsdp = 8, p.zero_stage = 3, p.fsdp_reshard_after_forward = false, p.dtype = "fp8";
  auto at = [&](const std::string& width, int64_t stage) {
    p.param_gather_dtype = width;
    const StepProgram program = BuildStep(m, p);
    double gathered = 0;  // the step's gathers and one decoder layer's
    for (const Op& op : program.stages[static_cast<size_t>(stage)].step_ops) {
      if (op.is_comm() && op.collective == CollectiveOp::kAllGather) gathered += op.comm_bytes;
    }
    for (const Op& op : program.Layer(LayerKind::kDense).ops) {
      if (op.is_comm() && op.stream == Stream::kData && op.collective == CollectiveOp::kAllGather) gathered += op.comm_bytes;
    }
    return std::make_pair(EstimateMemory(program).stages[static_cast<size_t>(stage)].buffers, gathered);
  };
  const StepProgram program = BuildStep(m, p);
  const Stage& first = program.stages[0];
  EXPECT_GT(first.sixteen_bit_params, 0);
  EXPECT_EQ(program.stages[1].sixteen_bit_params, 0);
  const auto [held16, moved16] = at("bf16", 0);
  const auto [held8, moved8] = at("fp8", 0);
  EXPECT_NEAR(held16 - held8, first.params() - first.sixteen_bit_params, 1);
  EXPECT_NEAR(moved16 - moved8, first.params() - first.sixteen_bit_params, 1);
  EXPECT_NEAR(moved8, (first.params() - first.sixteen_bit_params) * 1 + first.sixteen_bit_params * 2, 1);
  p.fsdp_reshard_after_forward = true;
  const auto [layers16, layer_moved16] = at("bf16", 1);
  const auto [layers8, layer_moved8] = at("fp8", 1);
  EXPECT_NEAR(layers8 / layers16, 0.5, 1e-9);  // no vocabulary on stage 1: two layers at half the bytes
  EXPECT_GT(layer_moved16, 0);
  EXPECT_NEAR(layer_moved8 / layer_moved16, 0.5, 1e-9);  // a layer's forward and backward gathers
}

// tiny-dense's parameters counted by hand from its shapes (LLaMA layer: two RMSNorm weights,
// Wq, Wk, Wv, Wo, SwiGLU's three matrices; untied embedding and head; final norm), not by
// CountParams: the memory model's fp32 state is 4 + 4 + 8 bytes of each.
double TinyDenseParamsByHand(const ModelSpec& m) {
  const double d = static_cast<double>(m.hidden_size), q = static_cast<double>(m.num_heads * m.head_dim);
  const double kv = static_cast<double>(m.num_kv_heads * m.head_dim), f = static_cast<double>(m.ffn_hidden_size);
  const double layer = 2 * d + d * q + 2 * d * kv + q * d + 3 * d * f;
  return static_cast<double>(m.num_layers) * layer + 2 * static_cast<double>(m.vocab_size) * d + d;
}

TEST(ParameterMemoryTest, Fp32HoldsFourFourAndEightBytesPerParameter) {
  const ModelSpec m = FindModelPreset("tiny-dense")->spec;
  ASSERT_FALSE(m.tied_embeddings);
  const double n = TinyDenseParamsByHand(m);
  EXPECT_EQ(n, 3279104.0);  // 4 x 786944 + 2 x 256 x 256 + 256
  PlanSpec p = Plan(2, 1, 1, 8, 256);
  p.dtype = "fp32";
  const double dp = 2;
  for (int64_t stage = 0; stage <= 3; ++stage) {
    p.zero_stage = stage;
    const MemoryBreakdown b = EstimateMemory(BuildStep(m, p)).peak;
    EXPECT_DOUBLE_EQ(b.params, 4 * n / (stage >= 3 ? dp : 1)) << stage;
    EXPECT_DOUBLE_EQ(b.grads, 4 * n / (stage >= 2 ? dp : 1)) << stage;
    EXPECT_DOUBLE_EQ(b.optimizer, 8 * n / (stage >= 1 ? dp : 1)) << stage;  // AdamW m and v, no master copy
  }
  // The same plan in bf16 keeps ZeRO's 2 + 2 + 12.
  p.dtype = "bf16";
  p.zero_stage = 0;
  const MemoryBreakdown mixed = EstimateMemory(BuildStep(m, p)).peak;
  EXPECT_DOUBLE_EQ(mixed.params, 2 * n);
  EXPECT_DOUBLE_EQ(mixed.grads, 2 * n);
  EXPECT_DOUBLE_EQ(mixed.optimizer, 12 * n);
  // An fp32 reduction widens the gradients beside a separate master (Megatron's main_grad).
  p.grad_reduce_dtype = "fp32";
  EXPECT_DOUBLE_EQ(EstimateMemory(BuildStep(m, p)).peak.grads, 4 * n);
  // FSDP2's fp32 weights are the master: 4 + 4 + 8, whatever the reduction's width.
  p.master_weights = "fp32";
  const MemoryBreakdown fsdp2 = EstimateMemory(BuildStep(m, p)).peak;
  EXPECT_DOUBLE_EQ(fsdp2.params, 4 * n);
  EXPECT_DOUBLE_EQ(fsdp2.grads, 4 * n);
  EXPECT_DOUBLE_EQ(fsdp2.optimizer, 8 * n);
  // A model made in bf16 holds bf16 weights, gradients and Adam state: 2 + 2 + 4.
  p.master_weights = "bf16";
  const MemoryBreakdown pure = EstimateMemory(BuildStep(m, p)).peak;
  EXPECT_DOUBLE_EQ(pure.params, 2 * n);
  EXPECT_DOUBLE_EQ(pure.grads, 2 * n);
  EXPECT_DOUBLE_EQ(pure.optimizer, 4 * n);
  EXPECT_LT(pure.total(), mixed.total());
}

// One Adam update reads the gradient, the master and m and v, and writes them back with the
// 16-bit weights a separate master is cast to: 14 + 14 bytes per parameter beside a bf16
// gradient, 16 + 12 for fp32 weights, 8 + 6 for bf16 ones; the optimizer op carries it.
TEST(ParameterMemoryTest, OptimizerTrafficFollowsTheStateHeld) {
  PlanSpec p = Plan(1, 1, 1, 1, 256);
  EXPECT_DOUBLE_EQ(StateBytesOf(p).optimizer_traffic, 28);
  p.master_weights = "fp32";
  EXPECT_DOUBLE_EQ(StateBytesOf(p).optimizer_traffic, 28);
  p.master_weights = "bf16";
  EXPECT_DOUBLE_EQ(StateBytesOf(p).optimizer_traffic, 14);
  const ModelSpec m = FindModelPreset("tiny-dense")->spec;
  auto optimizer_bytes = [&](const PlanSpec& plan) {
    const StepProgram program = BuildStep(m, plan);
    for (const Op& op : program.stages[0].step_ops) {
      if (op.name == ops::kOptimizer) return op.bytes;
    }
    return -1.0;
  };
  PlanSpec copy = p;
  copy.master_weights = "fp32-copy";
  EXPECT_DOUBLE_EQ(optimizer_bytes(p) * 2, optimizer_bytes(copy));
}

TEST(ParameterMemoryTest, BytesPerElementTable) {
  EXPECT_EQ(MemoryBytesPerElement("fp32").activations, 4.0);
  EXPECT_EQ(MemoryBytesPerElement("fp32").logits, 4.0);
  for (const char* dtype : {"bf16", "fp16", "fp8"}) {
    EXPECT_EQ(MemoryBytesPerElement(dtype).activations, 2.0) << dtype;
    EXPECT_EQ(MemoryBytesPerElement(dtype).logits, 6.0) << dtype;
  }
  // fp32 plans hold fp32 weights that are their own master, whatever master_weights is unset to.
  PlanSpec p;
  p.dtype = "fp32";
  EXPECT_EQ(MasterWeightsOf(p), "fp32");
  p.dtype = "bf16";
  EXPECT_EQ(MasterWeightsOf(p), "fp32-copy");
}

// Without dropout masks or attention scores every stored activation is one element, so fp32
// doubles the 16-bit bytes; tiny-dense at S 256: 4D + (2 H K + 2 G K) + 3F elements per token.
TEST(ActivationMemoryTest, Fp32ActivationsAreFourBytesPerElement) {
  const ModelSpec m = FindModelPreset("tiny-dense")->spec;
  PlanSpec p = Plan(1, 1, 1, 1, 256);
  const double bf16 = LayerActivationBytes(m, p, 256, false);
  p.dtype = "fp32";
  const double fp32 = LayerActivationBytes(m, p, 256, false);
  EXPECT_DOUBLE_EQ(fp32, 2 * bf16);
  EXPECT_DOUBLE_EQ(fp32, 256.0 * 4 * (4 * 256 + (2 * 256 + 2 * 128) + 3 * 768));
  p.recompute = Recompute::kFull;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, p, 256, false), 256.0 * 4 * 256);  // the layer input only
}

// An MoE layer keeps the k routed copies of each token twice: the experts' inputs and their
// outputs the combine weights by the gates (the gates' gradient reads them).
TEST(ActivationMemoryTest, MoeKeepsDispatchedRowsAndExpertOutputs) {
  const ModelSpec m = FindModelPreset("tiny-moe")->spec;  // D 256, 8 experts, top-2, one shared, Fe 256
  PlanSpec p = Plan(1, 1, 1, 1, 256);
  p.dtype = "fp32";
  const double d = 256, fe = 256, k = 2, e = 8;
  const double attention = 2 * 256 + 2 * 128;
  const double per_token = 4 * (4 * d + attention + k * 3 * fe + 3 * fe + 2 * k * d) + 4 * e;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, p, 256, true), 256 * per_token);
}

// The loss's logits are kept from a micro-batch's forward to its backward: one micro-batch on
// 1F1B's last stage, all of them under GPipe.
TEST(BufferMemoryTest, LogitsOfEveryMicrobatchInFlight) {
  const ModelSpec m = FindModelPreset("tiny-dense")->spec;
  PlanSpec p = Plan(1, 1, 2, 8, 256);
  p.dtype = "fp32";
  const double logits = 256.0 * 256 * 4;  // tokens x vocabulary x fp32
  EXPECT_DOUBLE_EQ(EstimateMemory(BuildStep(m, p)).stages[1].buffers, logits);
  EXPECT_DOUBLE_EQ(EstimateMemory(BuildStep(m, p)).stages[0].buffers, 0);
  p.pipeline_schedule = "gpipe";
  EXPECT_DOUBLE_EQ(EstimateMemory(BuildStep(m, p)).stages[1].buffers, 8 * logits);
  p.dtype = "bf16";
  EXPECT_DOUBLE_EQ(EstimateMemory(BuildStep(m, p)).stages[1].buffers, 8 * 256.0 * 256 * (4 + 2));
}

// PyTorch's F.cross_entropy over an fp32 copy of the logits (torchtitan without a compiled loss)
// keeps the fp32 log-probabilities of each micro-batch in flight, and its backward adds their
// gradient and the logits' fp32 gradient once: 4 per logit held, 8 more in the backward. A
// pipeline stage keeps its 16-bit logits too until their backward (2 per logit held); without
// pipelining they are freed, and the allocator keeps their 2 bytes reserved beside the backward's
// temporaries. fp32 logits are their own fp32 copy.
TEST(BufferMemoryTest, EagerCrossEntropyHoldsLogProbabilitiesAndTwoGradients) {
  const ModelSpec m = FindModelPreset("tiny-dense")->spec;
  PlanSpec p = Plan(1, 1, 2, 8, 256);
  p.pipeline_schedule = "gpipe";
  const double logits = 256.0 * 256;  // tokens x vocabulary per micro-batch
  p.cross_entropy = "eager";
  EXPECT_DOUBLE_EQ(EstimateMemory(BuildStep(m, p)).stages[1].buffers, 8 * logits * (4 + 2) + logits * 8);
  PlanSpec unpipelined = Plan(1, 1, 1, 8, 256);
  unpipelined.cross_entropy = "eager";
  EXPECT_DOUBLE_EQ(LossBytesPerLogit(unpipelined).held, 4);
  EXPECT_DOUBLE_EQ(LossBytesPerLogit(unpipelined).backward, 8 + 2);
  unpipelined.dtype = "fp32";
  EXPECT_DOUBLE_EQ(LossBytesPerLogit(unpipelined).backward, 8);
  p.dtype = "fp32";
  EXPECT_DOUBLE_EQ(EstimateMemory(BuildStep(m, p)).stages[1].buffers, 8 * logits * 4 + logits * 8);
  p.dtype = "bf16";
  p.cross_entropy = "fused";
  EXPECT_DOUBLE_EQ(EstimateMemory(BuildStep(m, p)).stages[1].buffers, 8 * logits * (4 + 2));
}

// Under a static buffer assignment (memory_allocator static: XLA's), the micro-batch whose loss
// backward runs frees its logits and the loss's temporaries before its layers' backward rebuilds
// a recomputed layer: the two share memory, the peak the larger, where the stage holds the head.
// PyTorch's caching allocator (the default) counts them side by side.
TEST(BufferMemoryTest, StaticAllocatorCountsTheLossAndARecomputedLayerOnce) {
  ModelSpec m = FindModelPreset("tiny-dense")->spec;
  for (const int64_t vocab : {int64_t{256}, int64_t{16384}}) {  // the layer's phase larger, then the loss's
    m.vocab_size = vocab;
    PlanSpec p = Plan(1, 1, 1, 8, 256);
    p.recompute = Recompute::kFull;
    PlanSpec none = p;
    none.recompute = Recompute::kNone;
    const double layer = LayerActivationBytes(m, none, 256, false) - LayerActivationBytes(m, p, 256, false);
    const double loss = 256.0 * static_cast<double>(vocab) * (4 + 2);  // one micro-batch's logits, fp32 beside bf16 (fused)
    const MemoryBreakdown caching = EstimateMemory(BuildStep(m, p)).stages[0];
    EXPECT_DOUBLE_EQ(caching.loss_shared, 0);
    p.memory_allocator = "static";
    const MemoryBreakdown shared = EstimateMemory(BuildStep(m, p)).stages[0];
    EXPECT_DOUBLE_EQ(shared.loss_shared, std::min(layer, loss)) << vocab;
    EXPECT_DOUBLE_EQ(caching.total() - shared.total(), std::min(layer, loss)) << vocab;
    EXPECT_DOUBLE_EQ(shared.activations, caching.activations);  // the stored activations stay
    // Pipelined: the stage without the head shares nothing; the head's stage shares one
    // micro-batch's loss, the others' logits in flight staying (GPipe: all eight).
    PlanSpec piped = p;
    piped.mesh.pipeline = 2;
    piped.pipeline_schedule = "gpipe";
    const MemoryReport report = EstimateMemory(BuildStep(m, piped));
    EXPECT_DOUBLE_EQ(report.stages[0].loss_shared, 0);
    EXPECT_DOUBLE_EQ(report.stages[1].loss_shared, std::min(layer, loss)) << vocab;
    piped.memory_allocator = "caching";
    EXPECT_DOUBLE_EQ(EstimateMemory(BuildStep(m, piped)).stages[1].buffers - report.stages[1].buffers, std::min(layer, loss));
  }
  m.vocab_size = 256;
  PlanSpec unrecomputed = Plan(1, 1, 1, 8, 256);  // no layer rebuilt, nothing shared
  unrecomputed.memory_allocator = "static";
  EXPECT_DOUBLE_EQ(EstimateMemory(BuildStep(m, unrecomputed)).stages[0].loss_shared, 0);
  // The context ranks' K/V a layer's backward gathers is its working set too.
  unrecomputed.mesh.context = 2;
  const StepProgram context = BuildStep(m, unrecomputed);
  const double kv = ContextKvBytes(m, unrecomputed, context.tokens_per_microbatch);
  ASSERT_GT(kv, 0);
  EXPECT_DOUBLE_EQ(EstimateMemory(context).stages[0].loss_shared, std::min(kv, static_cast<double>(context.tokens_per_microbatch) * 256 * (4 + 2)));
  // With multi-token prediction one loss's buffers at most (the two losses' together are smaller
  // than the layer here): the main head's are alive while the module's layer runs its backward.
  m.mtp_layers = 1;
  PlanSpec mtp = Plan(1, 1, 1, 8, 256);
  mtp.recompute = Recompute::kFull;
  mtp.memory_allocator = "static";
  PlanSpec kept_none = mtp;
  kept_none.recompute = Recompute::kNone;
  ASSERT_GT(LayerActivationBytes(m, kept_none, 256, false) - LayerActivationBytes(m, mtp, 256, false), 2 * 256.0 * 256 * (4 + 2));
  EXPECT_DOUBLE_EQ(EstimateMemory(BuildStep(m, mtp)).stages[0].loss_shared, 256.0 * 256 * (4 + 2));
}

// Kept in FP8 (Transformer Engine), the inputs of a dense layer's FP8 products shrink from 2 bytes
// to 1 (tensorwise: one scale per tensor): the QKV and MLP inputs after their norms and the down
// projection's input; the attention's output (kept 16-bit by the attention itself), the layer's
// input and the MLP's gate and up do not. A 16-bit plan ignores the setting.
TEST(ActivationMemoryTest, Fp8SavedInputsHalveTheProductsInputs) {
  const ModelSpec m = FindModelPreset("tiny-dense")->spec;
  PlanSpec p = Plan(1, 1, 1, 8, 256);
  p.dtype = "fp8";
  const int64_t tokens = 256;
  const double kept16 = LayerActivationBytes(m, p, tokens, false);
  p.saved_input_dtype = "fp8";
  const double kept8 = LayerActivationBytes(m, p, tokens, false);
  const double d = static_cast<double>(m.hidden_size), f = static_cast<double>(m.ffn_hidden_size);
  EXPECT_DOUBLE_EQ(kept16 - kept8, static_cast<double>(tokens) * (d + d + f) * (2 - 1));
  p.fp8_recipe = "blockwise";  // one fp32 scale per 128 elements
  EXPECT_DOUBLE_EQ(kept16 - LayerActivationBytes(m, p, tokens, false), static_cast<double>(tokens) * (d + d + f) * (2 - 1 - 4.0 / 128));
  // Full recomputation keeps the layer input only: nothing to quantise.
  p.recompute = Recompute::kFull;
  const double full8 = LayerActivationBytes(m, p, tokens, false);
  p.saved_input_dtype = "bf16";
  EXPECT_DOUBLE_EQ(full8, LayerActivationBytes(m, p, tokens, false));
}

// In an MoE layer (Megatron-core with Transformer Engine) the quantised inputs are the attention
// norm's output, each routed copy's dispatched row and the experts' down-projection inputs; the
// MLP norm's output stays 16-bit (the router keeps it). ExpertRowActivationBytes, one copy's
// share, follows. MLA's two down projections each keep their own copy of the norm's output.
TEST(ActivationMemoryTest, Fp8SavedInputsInMoeAndMlaLayers) {
  const ModelSpec m = FindModelPreset("tiny-moe")->spec;
  PlanSpec p = Plan(1, 1, 1, 8, 256);
  p.dtype = "fp8";
  const int64_t tokens = 256;
  const double kept16 = LayerActivationBytes(m, p, tokens, true), row16 = ExpertRowActivationBytes(m, p);
  p.saved_input_dtype = "fp8";
  const double d = static_cast<double>(m.hidden_size), fe = static_cast<double>(m.moe->expert_ffn_hidden_size);
  const double copies = static_cast<double>(m.moe->top_k), shared = static_cast<double>(m.moe->num_shared_experts);
  EXPECT_DOUBLE_EQ(kept16 - LayerActivationBytes(m, p, tokens, true), static_cast<double>(tokens) * (d + copies * d + (copies + shared) * fe) * (2 - 1));
  EXPECT_DOUBLE_EQ(row16 - ExpertRowActivationBytes(m, p), (d + fe) * (2 - 1));
  ModelSpec mla = FindModelPreset("deepseek-v3")->spec;
  PlanSpec q = Plan(1, 1, 1, 8, 256);
  q.dtype = "fp8";
  const double norm16 = TensorBytesPerToken(LayerTensor::kAttentionNormOut, mla, q, false);
  q.saved_input_dtype = "fp8";
  EXPECT_DOUBLE_EQ(TensorBytesPerToken(LayerTensor::kAttentionNormOut, mla, q, false), 2 * (norm16 / 2));  // two 1-byte copies
}

// Over logits split by vocabulary across tensor ranks the eager loss is PyTorch's loss_parallel,
// whose fused backward computes (grad_input + exp(x)) * grad_output: up to three fp32 temporaries
// of each rank's share live at once beside the saved log-probabilities, not two.
TEST(BufferMemoryTest, EagerLossParallelBackwardKeepsThreeTemporaries) {
  const ModelSpec m = FindModelPreset("tiny-dense")->spec;
  PlanSpec p = Plan(1, 2, 2, 8, 256);
  p.pipeline_schedule = "gpipe";
  const double logits = 256.0 * 256 / 2;  // tokens x this rank's vocabulary share per micro-batch
  p.cross_entropy = "eager";
  EXPECT_DOUBLE_EQ(EstimateMemory(BuildStep(m, p)).stages[1].buffers, 8 * logits * (4 + 2) + logits * 12);
  EXPECT_DOUBLE_EQ(LossBytesPerLogit(p).backward, 12);
  p.mesh.tensor = 1;
  EXPECT_DOUBLE_EQ(LossBytesPerLogit(p).backward, 8);
  p.mesh.tensor = 2;
  p.mesh.pipeline = 1;
  EXPECT_DOUBLE_EQ(LossBytesPerLogit(p).backward, 12 + 2);
}

// A multi-token-prediction module on the last stage keeps its layer's activations, its entry's
// inputs and normed concatenation, and its own loss's logits, per micro-batch in flight.
TEST(ActivationMemoryTest, MtpModulesKeepTheirLayerAndLogits) {
  ModelSpec m = FindModelPreset("tiny-moe")->spec;
  PlanSpec p = Plan(1, 1, 2, 8, 256);
  p.dtype = "fp32";
  const MemoryReport base = EstimateMemory(BuildStep(m, p));
  m.mtp_layers = 1;
  const MemoryReport mtp = EstimateMemory(BuildStep(m, p));
  const double logits = 256.0 * 256 * 4, tokens = 256;
  EXPECT_DOUBLE_EQ(mtp.stages[1].buffers - base.stages[1].buffers, logits);
  // One micro-batch in flight on the last stage under 1F1B.
  EXPECT_DOUBLE_EQ(mtp.stages[1].activations - base.stages[1].activations, MtpActivationBytes(m, p, 256));
  EXPECT_DOUBLE_EQ(MtpActivationBytes(m, p, 256), LayerActivationBytes(m, p, 256, true) + tokens * 4 * 256 * 4);
  EXPECT_DOUBLE_EQ(mtp.stages[0].activations, base.stages[0].activations);
  // Away from the embedding's stage, the modules' stage keeps a copy of the embedding for their
  // token inputs, its gradients kept equal with the first stage's (Megatron-core's mtp_process).
  const StepProgram with = BuildStep(m, p);
  m.mtp_layers = 0;
  const StepProgram without = BuildStep(m, p);
  const double vocab = 256.0 * 256, d = 256;
  // The copy, the projection and three norms, and the module's MoE layer outside its routed
  // experts: attention (8 heads and 4 K/V heads of 32), the shared expert, the router, two norms.
  const double attention = d * (2 * 256 + 2 * 128), shared_expert = 3 * d * 256, router = d * 8;
  EXPECT_DOUBLE_EQ(with.stages[1].dense_params - without.stages[1].dense_params,
                   vocab + 2 * d * d + 3 * d + attention + shared_expert + router + 2 * d);
  auto syncs = [](const Stage& stage) {
    int n = 0;
    for (const Op& op : stage.step_ops) n += op.name == ops::kTiedEmbeddingSync ? 1 : 0;
    return n;
  };
  EXPECT_EQ(syncs(with.stages[0]) + syncs(with.stages[1]), 2);
  EXPECT_EQ(syncs(without.stages[0]) + syncs(without.stages[1]), 0);
  // In a chunk of their own on a middle stage, the modules' stage copies the embedding and the
  // head, and the first and last stages each keep theirs equal with it.
  m.mtp_layers = 1;
  PlanSpec apart = Plan(1, 1, 3, 8, 256);
  apart.pipeline_layout = "Et*2|t*2m|L";
  const StepProgram middle = BuildStep(m, apart);
  m.mtp_layers = 0;
  apart.pipeline_layout = "Et*2|t*2|L";
  const StepProgram plain = BuildStep(m, apart);
  const double module = 2 * d * d + 3 * d + attention + shared_expert + router + 2 * d;
  EXPECT_DOUBLE_EQ(middle.stages[1].dense_params - plain.stages[1].dense_params, 2 * vocab + module);
  auto synced = [](const Stage& stage) {
    for (const Op& op : stage.step_ops) {
      if (op.name == ops::kTiedEmbeddingSync) return op.comm_bytes;
    }
    return 0.0;
  };
  EXPECT_DOUBLE_EQ(synced(middle.stages[1]), 2 * synced(middle.stages[0]));
  EXPECT_DOUBLE_EQ(synced(middle.stages[2]), synced(middle.stages[0]));
  EXPECT_GT(synced(middle.stages[0]), 0);
  // One stage: nothing to copy.
  m.mtp_layers = 1;
  const StepProgram one = BuildStep(m, Plan(1, 1, 1, 8, 256));
  EXPECT_DOUBLE_EQ(synced(one.stages[0]), 0);
}

}  // namespace
}  // namespace shardsim::strategies
