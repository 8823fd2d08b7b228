#include "strategies/tensor_parallel.h"

#include "strategies/context_parallel.h"
#include "strategies/elementwise_kernels.h"
#include "strategies/op_names.h"

namespace shardsim::strategies {
namespace {

// Bytes of a [tokens, width] activation one device holds outside tensor-parallel regions.
double ActivationBytes(const LayerShape& s, int64_t width) {
  const double tokens = static_cast<double>(s.tokens) / (s.sequence_parallel ? static_cast<double>(s.tensor) : 1.0);
  return tokens * static_cast<double>(width) * s.element_bytes;
}

// The full [tokens, width] tensor a tensor collective moves (nccl-tests size: the all-reduce
// buffer, the all-gather output, the reduce-scatter input).
double RegionBytes(const LayerShape& s, int64_t width) {
  return static_cast<double>(s.tokens) * static_cast<double>(width) * s.element_bytes;
}

// The all-gather of a region's [tokens, width] input or output gradient: at TensorGatherBytes
// where the region's products are FP8 ones, else as RegionBytes.
double GatherBytes(const LayerShape& s, const PlanSpec& plan, int64_t width, bool fp8_products) {
  if (!fp8_products) return RegionBytes(s, width);
  return static_cast<double>(s.tokens) * static_cast<double>(width) * TensorGatherBytes(plan, width);
}

int64_t Div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

void AppendTensorEnter(LayerBuilder& layer, const PlanSpec& plan, std::string_view name, int64_t width, bool several_products,
                       bool fp8_products) {
  if (plan.mesh.tensor == 1) return;
  const bool sp = layer.shape().sequence_parallel;
  // f: forward identity (SP: all-gather); backward all-reduce (SP: reduce-scatter), which may
  // not hide where it reduces a sum of products (HidesRegionReduceScatter).
  const double bytes = RegionBytes(layer.shape(), width), gather = GatherBytes(layer.shape(), plan, width, fp8_products);
  const CollectiveOp backward = sp ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce;
  // The forward gather may not hide before row-wise scaled products (HidesRegionAllGather).
  const bool hides = HidesRegionReduceScatter(plan, several_products), gather_hides = HidesRegionAllGather(plan, fp8_products);
  if (!sp) {
    layer.Collective(name, Stream::kTensor, {"tensor"}, bytes, false, CollectiveOp::kAllGather, true, backward, hides);
    return;
  }
  if (hides == gather_hides) {
    layer.Collective(name, Stream::kTensor, {"tensor"}, gather, CollectiveOp::kAllGather, bytes, backward, hides);
    return;
  }
  layer.Collective(name, Stream::kTensor, {"tensor"}, gather, true, CollectiveOp::kAllGather, false, backward, gather_hides);
  layer.Collective(name, Stream::kTensor, {"tensor"}, bytes, false, CollectiveOp::kAllGather, true, backward, hides);
}

void AppendTensorRegather(LayerBuilder& layer, const PlanSpec& plan, std::string_view enter, int64_t width, bool fp8_products) {
  // Kept gathered, the input needs no second gather (saved_tensors.cc counts the layers' whole,
  // memory_model.cc the head's).
  if (plan.mesh.tensor == 1 || !layer.shape().sequence_parallel || KeepsGatheredSequence(plan)) return;
  // Overlapped whatever overlap.tensor says: Megatron-core issues it asynchronously and computes
  // the input gradient while it runs (tensor_parallel/layers.py,
  // LinearWithGradAccumulationAndAsyncCommunication.backward, with CUDA_DEVICE_MAX_CONNECTIONS=1
  // ordering the gather first). Where collectives do not move under compute (CPU ranks:
  // CollectivesOverlapCompute) it runs blocking like every overlapped collective.
  layer.Collective(ops::Regather(enter), Stream::kTensor, {"tensor"}, GatherBytes(layer.shape(), plan, width, fp8_products), false,
                   CollectiveOp::kAllGather, true,
                   CollectiveOp::kAllGather, true);
}

void AppendTensorExit(LayerBuilder& layer, const PlanSpec& plan, std::string_view name, int64_t width, bool fp8_products) {
  if (plan.mesh.tensor == 1) return;
  const bool sp = layer.shape().sequence_parallel;
  // g: forward all-reduce (SP: reduce-scatter); backward identity (SP: all-gather).
  const double bytes = RegionBytes(layer.shape(), width);
  if (sp) {
    // The backward gathers the output gradient the products read (HidesRegionAllGather).
    const bool gather_hides = HidesRegionAllGather(plan, fp8_products);
    if (gather_hides == plan.overlap.tensor) {
      layer.Collective(name, Stream::kTensor, {"tensor"}, bytes, CollectiveOp::kReduceScatter, GatherBytes(layer.shape(), plan, width, fp8_products),
                       CollectiveOp::kAllGather, plan.overlap.tensor);
      return;
    }
    layer.Collective(name, Stream::kTensor, {"tensor"}, bytes, true, CollectiveOp::kReduceScatter, false, CollectiveOp::kAllGather, plan.overlap.tensor);
    layer.Collective(name, Stream::kTensor, {"tensor"}, GatherBytes(layer.shape(), plan, width, fp8_products), false, CollectiveOp::kReduceScatter, true,
                     CollectiveOp::kAllGather, gather_hides);
    return;
  }
  layer.Collective(name, Stream::kTensor, {"tensor"}, bytes, true, CollectiveOp::kAllReduce, false, CollectiveOp::kAllGather, plan.overlap.tensor);
}

void AppendAttentionBlock(LayerBuilder& layer, const ModelSpec& m, const PlanSpec& plan) {
  const LayerShape& s = layer.shape();
  const int64_t t = plan.mesh.tensor, d = m.hidden_size, tokens = s.tokens;
  const int64_t heads = Div(m.num_heads, t), kv_heads = Div(m.num_kv_heads, t);
  const ElementwisePasses norm = NormPasses(m, plan, s.element_bytes);
  layer.Elementwise(ops::kAttentionNorm, norm.forward * ActivationBytes(s, d), norm.BackwardFactor());
  // Attention reads its input with several products (Q, K and V, or MLA's down projections).
  AppendTensorEnter(layer, plan, ops::kTensorEnterAttention, d, /*several_products=*/true, /*fp8_products=*/true);
  AppendTensorRegather(layer, plan, ops::kTensorEnterAttention, d, /*fp8_products=*/true);
  int64_t qk_dim = m.head_dim, v_dim = m.head_dim;
  const int64_t kv_width = AttentionKvWidth(m, plan);  // K and V as the attention reads them
  if (m.mla) {
    // DeepSeek-V2/V3 multi-head latent attention: low-rank down projections (replicated over
    // tensor), per-head up projections split over tensor.
    const MlaSpec& a = *m.mla;
    qk_dim = a.qk_nope_head_dim + a.qk_rope_head_dim;
    v_dim = a.v_head_dim;
    if (a.q_lora_rank > 0) {
      layer.Matmul(ops::kQDown, tokens, d, a.q_lora_rank);
      layer.Matmul(ops::kQUp, tokens, a.q_lora_rank, heads * qk_dim);
    } else {
      layer.Matmul(ops::kQ, tokens, d, heads * qk_dim);
    }
    layer.Matmul(ops::kKvDown, tokens, d, a.kv_lora_rank + a.qk_rope_head_dim);
    layer.Matmul(ops::kKvUp, tokens, a.kv_lora_rank, heads * (a.qk_nope_head_dim + a.v_head_dim));
  } else {
    layer.Matmul(ops::kQkv, tokens, d, (heads + 2 * kv_heads) * m.head_dim);
  }
  // Eager rotary embedding: its own kernels over Q and K (MLA's rotary part of Q and the shared
  // key part); fused, it rides in the neighbouring kernels and is not costed apart.
  if (m.position == PositionKind::kRope && EagerElementwise(plan)) {
    const ElementwisePasses rope = RopePasses(plan, s.element_bytes);
    const double rotated = m.mla ? static_cast<double>((heads + 1) * m.mla->qk_rope_head_dim) : static_cast<double>((heads + kv_heads) * m.head_dim);
    layer.Elementwise(ops::kRope, rope.forward * static_cast<double>(tokens) * rotated * s.element_bytes, rope.BackwardFactor());
  }
  AppendRingAttentionTransfers(layer, plan, kv_width);
  // QK^T and AV cost 2 x tokens x S x heads x (Kqk + Kv). A blockwise (flash) kernel skips the
  // masked half of causal attention (a local layer's: all but its window, CausalKeysPerQuery) and never
  // writes the S x S scores; an unfused one computes every block and streams the scores through
  // HBM: QK^T writes them, the fused scale-mask-softmax reads and writes them, dropout reads them
  // and writes them and a 1-byte mask, AV reads them.
  const double keys = plan.flash_attention ? CausalKeysPerQuery(m, IsLocalAttentionKind(layer.kind()), s.seq_len) : static_cast<double>(s.seq_len);
  const double attention_flops = 2.0 * static_cast<double>(tokens) * keys * static_cast<double>(heads) * static_cast<double>(qk_dim + v_dim);
  const double attention_bytes = static_cast<double>(tokens) * static_cast<double>(heads * (qk_dim + v_dim) + kv_width) * s.element_bytes;
  layer.Attention(ops::kAttention, attention_flops, attention_bytes);
  AppendContextBackwardGather(layer, plan, kv_width);
  if (!plan.flash_attention) {
    const double scores = static_cast<double>(tokens) * static_cast<double>(s.seq_len) * static_cast<double>(heads);
    layer.Elementwise(ops::kAttentionScores, scores * (s.element_bytes * (1 + 2 + 1) + (m.dropout ? 2 * s.element_bytes + 1 : 0)));
  }
  layer.Matmul(ops::kAttentionOut, tokens, heads * v_dim, d);
  AppendTensorExit(layer, plan, ops::kTensorExitAttention, d, /*fp8_products=*/true);
  layer.Elementwise(ops::kAttentionResidual, 3 * ActivationBytes(s, d));
}

void AppendMlpBlock(LayerBuilder& layer, const ModelSpec& m, const PlanSpec& plan, int64_t width, std::string_view name, bool standalone) {
  const LayerShape& s = layer.shape();
  const int64_t t = plan.mesh.tensor, d = m.hidden_size, tokens = s.tokens;
  const int64_t local = Div(width, t);
  const bool gated = m.mlp == MlpKind::kSwiGlu;
  if (standalone) {
    const ElementwisePasses norm = NormPasses(m, plan, s.element_bytes);
    layer.Elementwise(ops::BlockNorm(name), norm.forward * ActivationBytes(s, d), norm.BackwardFactor());
  }
  // Gate and up read the input, and beside routed experts the router does too.
  // A dense MLP's products are FP8 ones; an MoE layer's input, which its router reads too, is
  // gathered at 16 bits.
  AppendTensorEnter(layer, plan, ops::TensorEnter(name), d, /*several_products=*/gated || !standalone, /*fp8_products=*/standalone);
  // The MoE layer's shared experts keep their gathered input (moe_layer.h).
  if (standalone) AppendTensorRegather(layer, plan, ops::TensorEnter(name), d, /*fp8_products=*/true);
  layer.Matmul(ops::BlockUp(name), tokens, d, (gated ? 2 : 1) * local);
  // SwiGLU reads gate and up and writes their product; GELU reads and writes one tensor.
  const ElementwisePasses activation = ActivationPasses(m, plan, s.element_bytes);
  layer.Elementwise(ops::BlockActivation(name), static_cast<double>(tokens) * static_cast<double>(local) * s.element_bytes * activation.forward,
                    activation.BackwardFactor());
  layer.Matmul(ops::BlockDown(name), tokens, local, d);
  AppendTensorExit(layer, plan, ops::TensorExit(name), d, /*fp8_products=*/standalone);
  if (standalone) layer.Elementwise(ops::BlockResidual(name), 3 * ActivationBytes(s, d));
}

void AppendEmbedding(LayerBuilder& layer, const ModelSpec& m, const PlanSpec& plan) {
  const LayerShape& s = layer.shape();
  layer.Elementwise(ops::kEmbedding, 2 * RegionBytes(s, m.hidden_size), 1.0);
  if (plan.mesh.tensor > 1) {
    // Vocabulary-parallel lookup: each rank fills the rows of its vocabulary shard.
    const bool sp = s.sequence_parallel;
    layer.Collective(ops::kTensorEmbedding, Stream::kTensor, {"tensor"}, RegionBytes(s, m.hidden_size), true,
                     sp ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce, sp, CollectiveOp::kAllGather, plan.overlap.tensor);
  }
}

void AppendMtpEntry(LayerBuilder& layer, const ModelSpec& m, const PlanSpec& plan) {
  const LayerShape& s = layer.shape();
  const int64_t d = m.hidden_size;
  // The next tokens' embedding rows looked up (written once), then both inputs normed.
  const ElementwisePasses norm = NormPasses(m, plan, s.element_bytes);
  layer.Elementwise(ops::kMtpNorms, (1 + 2 * norm.forward) * ActivationBytes(s, d), (2 + 2 * norm.backward) / (1 + 2 * norm.forward));
  AppendTensorEnter(layer, plan, ops::kTensorEnterMtp, 2 * d);
  layer.Matmul(ops::kMtpProjection, s.tokens, Div(2 * d, plan.mesh.tensor), d);
  AppendTensorExit(layer, plan, ops::kTensorExitMtp, d);
}

void AppendHead(LayerBuilder& layer, const ModelSpec& m, const PlanSpec& plan) {
  const LayerShape& s = layer.shape();
  const int64_t t = plan.mesh.tensor;
  const ElementwisePasses norm = NormPasses(m, plan, s.element_bytes);
  layer.Elementwise(ops::kFinalNorm, norm.forward * ActivationBytes(s, m.hidden_size), norm.BackwardFactor());
  AppendTensorEnter(layer, plan, ops::kTensorEnterHead, m.hidden_size);
  AppendTensorRegather(layer, plan, ops::kTensorEnterHead, m.hidden_size);
  // None of the profiled frameworks runs the head in FP8 (Op::sixteen_bit).
  layer.SixteenBitMatmul(ops::kLogits, s.tokens, m.hidden_size, Div(m.vocab_size, t));
  // Softmax cross-entropy in fp32 over the local vocabulary shard: read logits, write
  // probabilities; the backward writes the logit gradients.
  const double logits_fp32 = static_cast<double>(s.tokens) * static_cast<double>(Div(m.vocab_size, t)) * 4;
  layer.Elementwise(ops::kCrossEntropy, 2 * logits_fp32, 1.0);
  if (t > 1) {
    // Vocabulary-parallel cross-entropy (Megatron-LM's vocab_parallel_cross_entropy): the row
    // maximum, then the sum of exponentials and the target's logit, all-reduced over tensor in
    // fp32, forward only (the logits' gradient is local).
    const double rows = static_cast<double>(s.tokens) * 4;
    layer.Collective(ops::kTensorLossMax, Stream::kTensor, {"tensor"}, rows, true, CollectiveOp::kAllReduce, false, CollectiveOp::kAllReduce,
                     plan.overlap.tensor);
    layer.Collective(ops::kTensorLossSum, Stream::kTensor, {"tensor"}, 2 * rows, true, CollectiveOp::kAllReduce, false, CollectiveOp::kAllReduce,
                     plan.overlap.tensor);
  }
}

}  // namespace shardsim::strategies
