#include "strategies/saved_tensors.h"

#include <algorithm>
#include <string>
#include <vector>

#include "strategies/context_parallel.h"
#include "strategies/memory_model.h"
#include "strategies/op_names.h"
#include "strategies/tensor_parallel.h"

namespace shardsim::strategies {
namespace {

using T = LayerTensor;

bool Gated(const ModelSpec& m) { return m.mlp == MlpKind::kSwiGlu; }

// One matmul product of a layer, in forward order: the program's op that computes it (fused
// projections hold several), the tensor it yields (none for MLA's low-rank downs and the shared
// experts, whose activations kExperts holds) and its width per token.
struct Product {
  std::string op;
  std::vector<LayerTensor> tensors;
  double width = 0;
};

// The products torchtitan's SelectiveAC counts (aten.mm / aten.linear, in forward order; the
// router's is forced to recompute and the routed experts' grouped matmuls are cached whole, so
// neither counts).
std::vector<Product> CountedProducts(const ModelSpec& m, bool moe_layer) {
  const double d = static_cast<double>(m.hidden_size), h = static_cast<double>(m.num_heads), kv = static_cast<double>(m.num_kv_heads),
               hd = static_cast<double>(m.head_dim);
  std::vector<Product> products;
  if (m.mla) {
    const MlaSpec& a = *m.mla;
    const double qk = static_cast<double>(a.qk_nope_head_dim + a.qk_rope_head_dim);
    if (a.q_lora_rank > 0) {
      products.push_back({std::string(ops::kQDown), {}, static_cast<double>(a.q_lora_rank)});
      products.push_back({std::string(ops::kQUp), {T::kQ}, h * qk});
    } else {
      products.push_back({std::string(ops::kQ), {T::kQ}, h * qk});
    }
    products.push_back({std::string(ops::kKvDown), {}, static_cast<double>(a.kv_lora_rank + a.qk_rope_head_dim)});
    products.push_back({std::string(ops::kKvUp), {T::kK, T::kV}, h * (qk + static_cast<double>(a.v_head_dim))});
  } else {
    products.push_back({std::string(ops::kQkv), {T::kQ}, h * hd});
    products.push_back({std::string(ops::kQkv), {T::kK}, kv * hd});
    products.push_back({std::string(ops::kQkv), {T::kV}, kv * hd});
  }
  products.push_back({std::string(ops::kAttentionOut), {T::kAttentionProj}, d});
  const bool shared = moe_layer && m.moe && m.moe->num_shared_experts > 0;
  if (moe_layer && !shared) return products;
  const std::string block(moe_layer ? ops::kSharedExpert : ops::kMlp);
  const double f = moe_layer ? static_cast<double>(m.moe->expert_ffn_hidden_size * m.moe->num_shared_experts) : static_cast<double>(m.ffn_hidden_size);
  auto tensor = [&](LayerTensor t) { return moe_layer ? std::vector<LayerTensor>{} : std::vector<LayerTensor>{t}; };
  if (Gated(m)) products.push_back({ops::BlockUp(block), tensor(T::kMlpGate), f});
  products.push_back({ops::BlockUp(block), tensor(T::kMlpUp), f});
  products.push_back({ops::BlockDown(block), tensor(T::kMlpDown), d});
  return products;
}

// Whether the counted product yielding `tensor` sits at an odd position (1-based): SelectiveAC
// caches it.
bool AtOddPosition(LayerTensor tensor, const ModelSpec& m, bool moe_layer) {
  const std::vector<Product> products = CountedProducts(m, moe_layer);
  for (size_t i = 0; i < products.size(); ++i) {
    for (LayerTensor t : products[i].tensors) {
      if (t == tensor) return i % 2 == 0;
    }
  }
  return false;
}

// Whether SelectiveAC caches `tensor`: the attention's output, grouped matmuls (the routed
// experts), all-to-alls and reduce-scatters (under sequence parallelism the row-parallel
// projections' reduced outputs), and the odd counted products, the row-parallel ones as their
// unreduced matmul outputs under tensor parallelism.
bool SelectiveOpKeeps(LayerTensor tensor, const ModelSpec& m, const PlanSpec& p, bool moe_layer) {
  const bool tensor_parallel = p.mesh.tensor > 1;
  switch (tensor) {
    case T::kInput: case T::kAttentionCore: case T::kAttentionScores: case T::kExperts: return true;
    case T::kAttentionProj: case T::kMlpDown:
      return tensor_parallel ? p.sequence_parallel : AtOddPosition(tensor, m, moe_layer);
    case T::kAttentionProjPartial:
      return tensor_parallel && AtOddPosition(T::kAttentionProj, m, moe_layer);
    case T::kMlpDownPartial:
      return tensor_parallel && AtOddPosition(T::kMlpDown, m, moe_layer);
    case T::kQ: case T::kK: case T::kV: case T::kMlpGate: case T::kMlpUp:
      return AtOddPosition(tensor, m, moe_layer);
    default: return false;  // norms, residuals, activations, masks
  }
}

bool MinimalKeeps(LayerTensor tensor) {
  switch (tensor) {
    case T::kInput: case T::kQ: case T::kK: case T::kV: case T::kAttentionProj: case T::kMlpGate: case T::kMlpUp:
      return true;
    default: return false;
  }
}

// What a MaxText named-save policy (layers/decoders.py get_remat_policy:
// jax.checkpoint_policies.save_only_these_names) saves: the query/key/value projections
// ("query_proj", "key_proj", "value_proj", "qkv_proj"), the attention's output ("context"), the
// output projection ("out_proj"); the MLP's dots ("mlpwi*", "mlpwo") none of them. The layer
// input (the scan carry) is always kept; everything else is rebuilt from what is.
struct NamedSaves {
  bool qkv = false, context = false, out_proj = false;
};
// MaxText tags "context" only in its flash kernels' paths (attention_op.py: apply_attention_dot
// names nothing so): with an unfused kernel nothing of the attention core is saved.
NamedSaves NamedSavesOf(Recompute mode, const PlanSpec& p) {
  NamedSaves s;
  switch (mode) {
    case Recompute::kSaveQkvProj: s = {true, false, false}; break;
    case Recompute::kSaveDotExceptMlp: s = {true, false, true}; break;
    case Recompute::kSaveDotWithContextExceptMlp: s = {true, true, true}; break;
    case Recompute::kSaveOutProj: s = {false, false, true}; break;
    default: break;
  }
  s.context = s.context && p.flash_attention;
  return s;
}

bool NamedKeeps(NamedSaves s, LayerTensor tensor) {
  switch (tensor) {
    case T::kInput: return true;
    case T::kQ: case T::kK: case T::kV: return s.qkv;
    case T::kAttentionCore: return s.context;
    case T::kAttentionProj: return s.out_proj;  // rebuilds the residual the MLP norm reads (saved reduced: the partial sums never)
    default: return false;
  }
}

// The projections' outputs feed only the residual adds, whose backward does not read them: a
// policy keeps them only by caching every output of some op kind (selective-op, minimal).
bool BackwardReads(LayerTensor t) {
  return t != T::kAttentionProj && t != T::kMlpDown && t != T::kAttentionProjPartial && t != T::kMlpDownPartial;
}

bool IsDenseMlpTensor(LayerTensor t) {
  return t == T::kMlpGate || t == T::kMlpUp || t == T::kMlpActivation || t == T::kMlpDown || t == T::kMlpDownPartial;
}

}  // namespace

double SavedMlpTensors(const ModelSpec& m) { return Gated(m) ? 3 : 2; }

bool BlockHolds(LayerBlocks blocks, LayerTensor tensor) {
  switch (tensor) {
    case T::kInput: return true;
    case T::kAttentionNormOut: case T::kQ: case T::kK: case T::kV: case T::kAttentionCore: case T::kAttentionScores: case T::kAttentionProj:
    case T::kAttentionProjPartial:
      return blocks.attention;
    case T::kMlpNormOut: return blocks.mlp || blocks.moe;
    case T::kExperts: return blocks.moe;
    case T::kAttentionResidual: case T::kDropoutMasks: return false;  // hybrid models have no dropout (model_spec.cc)
    default: return blocks.mlp && IsDenseMlpTensor(tensor);
  }
}

double MambaKeptShare(Recompute mode) {
  if (mode == Recompute::kFull) return 0;
  return mode == Recompute::kSelectiveLayer ? 0.5 : 1;
}

double ExpertMlpRowBytes(const ModelSpec& m, const PlanSpec& p) {
  if (!m.moe) return 0;
  const double a = MemoryBytesPerElement(p.dtype).activations;
  // Each expert's width on a rank: split over tensor unless the experts are folded over it.
  const int64_t local = TensorShard(m.moe->expert_ffn_hidden_size, ExpertTensorDegree(p));
  // Gate and up (or up) at the activations' width; the activation, the down projection's input,
  // at the saved-input width.
  return ((SavedMlpTensors(m) - 1) * a + SavedInputBytes(p, local)) * static_cast<double>(m.moe->expert_ffn_hidden_size) /
         static_cast<double>(p.mesh.tensor);
}

double KeptShare(Recompute mode, LayerTensor tensor, const ModelSpec& m, const PlanSpec& p) {
  const bool moe_layer = false;  // the MoE layer's attention block counts like the dense layer's
  switch (mode) {
    case Recompute::kNone: return BackwardReads(tensor) ? 1 : 0;
    case Recompute::kSelective: return BackwardReads(tensor) && tensor != T::kAttentionScores ? 1 : 0;
    case Recompute::kFull: return tensor == T::kInput ? 1 : 0;
    case Recompute::kSelectiveLayer: return tensor == T::kInput ? 1 : BackwardReads(tensor) ? 0.5 : 0;
    case Recompute::kSelectiveOp: return SelectiveOpKeeps(tensor, m, p, moe_layer) ? 1 : 0;
    case Recompute::kMinimal: return MinimalKeeps(tensor) ? 1 : 0;
    case Recompute::kSaveQkvProj: case Recompute::kSaveDotExceptMlp: case Recompute::kSaveDotWithContextExceptMlp: case Recompute::kSaveOutProj:
      return NamedKeeps(NamedSavesOf(mode, p), tensor) ? 1 : 0;
  }
  return 1;
}

double TensorBytesPerToken(LayerTensor tensor, const ModelSpec& m, const PlanSpec& p, bool moe_layer) {
  const double t = static_cast<double>(p.mesh.tensor);
  const double sp = p.sequence_parallel ? t : 1.0;  // replicated activations are split over t with SP
  const double d = static_cast<double>(m.hidden_size);
  const double a = MemoryBytesPerElement(p.dtype).activations;
  const double h = static_cast<double>(m.num_heads);
  double qk = static_cast<double>(m.head_dim), v = static_cast<double>(m.head_dim);
  if (m.mla) {
    qk = static_cast<double>(m.mla->qk_nope_head_dim + m.mla->qk_rope_head_dim);
    v = static_cast<double>(m.mla->v_head_dim);
  }
  // K and V as one device's attention reads them (AttentionKvWidth: repeated to every query head
  // where the model repeats them, MLA's per head); selective-op keeps the projection's own output
  // instead of the repeated copy (the repeat is replayed in the backward).
  const double kv = static_cast<double>(AttentionKvWidth(m, p, RepeatsKv(m, p) && p.recompute != Recompute::kSelectiveOp)) / (qk + v);
  if (moe_layer && IsDenseMlpTensor(tensor)) return 0;
  const double f = static_cast<double>(m.ffn_hidden_size);
  // Inputs of FP8 products kept for their backward, at SavedInputBytes (saved_input_dtype fp8:
  // Transformer Engine's modules keep the quantised copy, module/linear.py). Megatron-core keeps
  // the 16-bit original where another op saves the same tensor (set_save_original_input): the
  // attention output projection's input, which the attention keeps (under TE >= 2.6 with a
  // current-scaling recipe), and an MoE layer's normed input, which the router keeps.
  // (Asked only by the tensors below that are such inputs: this runs per tensor of every plan.)
  auto hidden_input = [&] { return SavedInputBytes(p, m.hidden_size); };
  // The norms' outputs are the sequence-parallel regions' inputs: kept whole where the products
  // keep their all-gathered input (KeepsGatheredSequence), else the sequence shard. Kept whole,
  // an FP8 product's input is the gathered tensor itself, FP8 where the gather moves FP8
  // (TensorGatherBytes; torchao's Float8ColwiseParallel), a dense MLP's and the attention's.
  const double region_sp = KeepsGatheredSequence(p) ? 1.0 : sp;
  auto region_input = [&] { return KeepsGatheredSequence(p) ? std::min(hidden_input(), TensorGatherBytes(p, m.hidden_size)) : hidden_input(); };
  switch (tensor) {
    case T::kAttentionNormOut: {
      // Quantised, each product reading the norm's output keeps its own copy: MLA's two
      // (Megatron-core's MLASelfAttention: linear_q_down_proj or linear_q_proj, and
      // linear_kv_down_proj), the fused QKV's one; 16-bit, they share the one tensor.
      const double bytes = region_input();
      return (bytes < a && m.mla ? 2 : 1) * bytes * d / region_sp;
    }
    case T::kMlpNormOut: return (moe_layer ? a : region_input()) * d / region_sp;
    case T::kInput: case T::kAttentionProj: case T::kAttentionResidual: case T::kMlpDown:
      return a * d / sp;
    case T::kAttentionProjPartial: case T::kMlpDownPartial:
      return t > 1 ? a * d : 0;  // every token's partial sum, before the all-reduce or reduce-scatter
    case T::kQ: return a * h * qk / t;
    case T::kK: return a * kv * qk;
    case T::kV: return a * kv * v;
    case T::kAttentionCore: return a * h * v / t;
    case T::kAttentionScores: {
      // The softmax output (a bytes), and with dropout its mask (1) and output (a); never
      // stored by a blockwise kernel.
      if (p.flash_attention) return 0;
      return h * static_cast<double>(p.seq_len) * (a + (m.dropout ? 1 + a : 0)) / t;
    }
    case T::kMlpGate: return Gated(m) ? a * f / t : 0;
    case T::kMlpUp: return a * f / t;
    case T::kMlpActivation: return SavedInputBytes(p, TensorShard(m.ffn_hidden_size, p.mesh.tensor)) * f / t;  // the down projection's input
    case T::kDropoutMasks: return m.dropout ? 2 * d / sp : 0;
    case T::kExperts: {
      if (!moe_layer) return 0;
      const MoeSpec& e = *m.moe;
      const double copies = static_cast<double>(e.top_k) * p.ep_capacity_factor;
      // The routed copies' and the shared experts' MLP rows (ExpertMlpRowBytes); the dispatched
      // copies the experts read (the up projections' inputs, at the saved-input width) and the
      // experts' outputs back on this rank, which the combine weights by the gates and the gates'
      // gradient reads (Megatron-core's unpermute saves them so), at the routed width (LatentMoE's
      // latent); fp32 router logits; with LatentMoE the combined latent rows the up projection back
      // to D reads.
      const double rw = static_cast<double>(RoutedWidth(m));
      // The experts' inputs: each tensor rank dispatches its 1/t of the tokens' copies, gathered
      // over the expert tensor ranks before the experts (all t shares where each expert is split
      // over tensor, the rank's own where the experts are folded over it).
      const double inputs = copies * SavedInputBytes(p, RoutedWidth(m)) * rw * static_cast<double>(ExpertTensorDegree(p)) / static_cast<double>(p.mesh.tensor);
      return (copies + static_cast<double>(e.num_shared_experts)) * ExpertMlpRowBytes(m, p) + inputs +
             (copies * a * rw + 4 * static_cast<double>(e.num_experts) + a * static_cast<double>(e.latent_size)) / sp;
    }
  }
  return 0;
}

Rerun RerunOf(Recompute mode, const Op& op, const ModelSpec& m, const PlanSpec& p) {
  if (op.phase != Phase::kForward) return {};
  // Data-parallel parameter gathers are not redone: the gathered weights serve the backward.
  if (op.stream == Stream::kData) return {};
  const bool attention_core = (op.stream == Stream::kCompute && (op.kind == ComputeKind::kAttention || op.name == ops::kAttentionScores)) ||
                              (op.stream == Stream::kContext && !ops::IsMambaContextExchange(op.name));
  const bool routed_experts = op.name == ops::kExpertsUp || op.name == ops::kExpertsDown;
  auto whole = [](bool rerun) { return Rerun{.share = rerun ? 1.0 : 0.0}; };
  switch (mode) {
    case Recompute::kNone: return {};
    case Recompute::kFull: return whole(true);
    case Recompute::kSelectiveLayer: return {.share = 0.5};
    // The attention core, with ring attention's K/V passes when the sequence is split over context.
    case Recompute::kSelective: return whole(attention_core);
    case Recompute::kMinimal:
      // The projections are kept; everything between them is rebuilt, the tensor all-gathers
      // that feed the rebuilt values included, and the routed experts with their all-to-alls.
      if (op.stream == Stream::kCompute) return whole(op.kind != ComputeKind::kMatmul || routed_experts);
      if (op.stream == Stream::kTensor) return whole(op.collective == CollectiveOp::kAllGather);
      return whole(op.stream == Stream::kExpert || attention_core);
    case Recompute::kSaveQkvProj: case Recompute::kSaveDotExceptMlp: case Recompute::kSaveDotWithContextExceptMlp: case Recompute::kSaveOutProj: {
      // Rebuilt: what the backward reads and the policy did not save, and what that needs. The
      // norms, activations and residual adds always; Q, K and V (and the gather of their input
      // over tensor) unless saved; the attention core unless its output is; the output
      // projection (and its reduction) unless saved, for the residual the MLP norm reads; the
      // MLP's gate and up (and their input's gather) always, not its down projection, which the
      // backward does not read; the routed experts with their all-to-alls. MLA's low-rank
      // latents are named by neither list (attention_mla.py: mla_q, mla_kv), and its up
      // projections' weight gradients read them: its down projections always rerun.
      const NamedSaves s = NamedSavesOf(mode, p);
      if (attention_core) return whole(!s.context);
      if (op.stream == Stream::kExpert || routed_experts) return whole(true);
      if (op.name == ops::kTensorEnterAttention) return whole(!s.qkv || m.mla.has_value());
      if (op.name == ops::kTensorExitAttention) return whole(!s.out_proj);
      // The MLP's and the experts' input gathers; of the reductions, the experts' (their outputs
      // are rebuilt for the combine), not the MLP's down projection's.
      if (op.stream == Stream::kTensor) return whole(op.collective == CollectiveOp::kAllGather || op.name == ops::kTensorExitExperts);
      if (op.stream != Stream::kCompute) return {};
      if (op.kind != ComputeKind::kMatmul) return whole(true);
      if (op.name == ops::kQDown || op.name == ops::kKvDown) return whole(true);
      if (op.name == ops::kQkv || op.name == ops::kQ || op.name == ops::kQUp || op.name == ops::kKvUp) return whole(!s.qkv);
      if (op.name == ops::kAttentionOut) return whole(!s.out_proj);
      return whole(op.name == ops::BlockUp(ops::kMlp) || op.name == ops::BlockUp(ops::kSharedExpert) || op.name == ops::kRouter);
    }
    case Recompute::kSelectiveOp: {
      // Cached: the attention (its context exchange inside), grouped matmuls (the routed
      // experts), reduce-scatters and all-to-alls; the odd counted products.
      if (attention_core || op.stream == Stream::kExpert) return {};
      if (op.stream != Stream::kCompute) return whole(op.collective != CollectiveOp::kReduceScatter);
      if (op.kind != ComputeKind::kMatmul) return whole(true);
      if (routed_experts) return {};
      if (op.name == ops::kRouter) return whole(true);
      const bool moe_layer = m.moe.has_value() && (op.name == ops::BlockUp(ops::kSharedExpert) || op.name == ops::BlockDown(ops::kSharedExpert));
      double total = 0, rerun = 0;
      const std::vector<Product> products = CountedProducts(m, moe_layer);
      for (size_t i = 0; i < products.size(); ++i) {
        if (products[i].op != op.name) continue;
        total += products[i].width;
        if (i % 2 == 1) rerun += products[i].width;
      }
      return {.share = total > 0 ? rerun / total : 0, .narrower = true};
    }
  }
  return {};
}

}  // namespace shardsim::strategies
