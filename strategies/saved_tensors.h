// What each recomputation policy (core/plan_spec.h Recompute) keeps of a transformer layer for
// its backward, and which of the layer's forward ops it runs again: one table that the memory
// model (memory_model.cc) and the recomputation ops (recompute.cc) both read.
//
// Policies, as each framework implements them:
// - none keeps every tensor below.
// - selective (Megatron-core --recompute-granularity selective, Korthikanti et al. 2022) drops
//   the attention core's S x S scores and reruns the attention core.
// - full keeps the layer input and reruns the whole forward.
// - selective-op is torchtitan's SelectiveAC (distributed/activation_checkpoint.py): the block's
//   forward is replayed; the outputs of compute-intensive ops (attention, grouped matmuls),
//   reduce-scatters and all-to-alls are cached, and of the matmuls every odd one in forward order
//   (q, v, the MLP's gate, its down projection) while the even ones (k, the attention output
//   projection, the MLP's up) and every other op (norms, rope, activations, all-reduces and
//   all-gathers) run again. The router's matmul is always recomputed.
// - selective-layer is torchtitan's older per-layer option (selective_ac_option "2", Dec 2024):
//   every second layer fully recomputed, costed as half of each layer (its collectives as half
//   their bytes, their latency paid once in full: an approximation).
// - minimal is MaxText's remat_policy minimal as it was until 6426085 (Aug 2025; layers/decoders.py:
//   jax.checkpoint_policies checkpoint_dots_with_no_batch_dims; since, a named-save list that also
//   keeps the routed experts' mlpwi_0 / mlpwo outputs, which this set does not): of what the backward reads, the outputs of dots without a
//   batch dimension are kept (q, k, v, the output projection's, which rebuilds the residual, gate
//   and up; not the down projection's, which nothing reads); the attention core, norms,
//   activations and residual adds are rebuilt, with the tensor all-gathers that feed them; the
//   routed experts' dots carry an expert batch dimension, so an MoE block's experts and their
//   all-to-alls are rebuilt too.
// - save-qkv-proj, save-dot-except-mlp, save-dot-with-context-except-mlp and save-out-proj are
//   MaxText's named-save policies (layers/decoders.py: save_only_these_names of the query, key
//   and value projections; those and the output projection; those and the attention's output
//   "context"; the output projection alone): the layer input and the named outputs are kept,
//   everything else the backward reads is rebuilt from them (norms, activations, residual adds,
//   the MLP's gate and up, the routed experts; Q, K, V, the attention core and the output
//   projection where not named), with the tensor collectives the rebuilt values need.
#pragma once

#include "core/model_spec.h"
#include "core/plan_spec.h"
#include "strategies/step_program.h"

namespace shardsim::strategies {

// The activations a layer's backward reads, per token.
enum class LayerTensor {
  kInput,              // the layer's input (the residual stream)
  kAttentionNormOut,   // the attention norm's output (Q/K/V's input)
  kQ, kK, kV,          // the projections (MLA: decompressed per head)
  kAttentionCore,      // the attention's output (the output projection's input)
  kAttentionScores,    // S x S softmax (and dropout) of an unfused kernel
  kAttentionProj,      // the output projection's output
  kAttentionResidual,  // input plus attention: the MLP norm's input
  kMlpNormOut,         // the MLP (MoE) norm's output
  kMlpGate, kMlpUp,    // the MLP's gate and up projections (no gate: kMlpUp only)
  kMlpActivation,      // the down projection's input
  kMlpDown,            // the down projection's output
  // Under tensor parallelism the two row-parallel projections' own outputs, partial sums over
  // all the tokens before their reduction (kAttentionProj and kMlpDown are the reduced ones);
  // only a policy that caches matmul outputs keeps them.
  kAttentionProjPartial, kMlpDownPartial,
  kDropoutMasks,       // 1-byte masks of the two residual dropouts
  kExperts,            // an MoE layer's experts: dispatched copies, their MLPs, shared experts
};
inline constexpr int kLayerTensors = static_cast<int>(LayerTensor::kExperts) + 1;

// The [tokens, width] tensors an MLP keeps per token of its width: gate, up and their product
// (SwiGLU), or up and the GELU's output.
double SavedMlpTensors(const ModelSpec& m);

// Bytes of an expert's MLP rows one routed token copy (or shared expert) keeps per token: gate
// and up (or up) at the activations' width, the down projection's input at the saved-input width
// (SavedInputBytes), split over tensor. 0 for a dense model.
double ExpertMlpRowBytes(const ModelSpec& m, const PlanSpec& p);

// Whether a hybrid layer running `blocks` (one of them) has `tensor`: its input always; the
// attention's tensors with attention; the MLP norm's output and the MLP's with an MLP, that
// output and the experts' with experts; never the residual between two blocks. (A Mamba-2
// mixer's own tensors are mamba_layer.h's.)
bool BlockHolds(LayerBlocks blocks, LayerTensor tensor);
// The share of a Mamba-2 mixer's tensors `mode` keeps: all but under full recomputation (half of
// them under selective-layer); Megatron-core's selective recomputation leaves mixers whole.
double MambaKeptShare(Recompute mode);

// The share of `tensor` that `mode` keeps from forward to backward: 0 or 1, or 1/2 for a
// policy that recomputes every second layer. An MoE layer has kExperts in place of the MLP's.
double KeptShare(Recompute mode, LayerTensor tensor, const ModelSpec& m, const PlanSpec& p);

// Bytes per token that one device stores of `tensor` when kept, under the plan's tensor and
// sequence parallelism and attention kernel (Korthikanti et al. 2022's accounting, re-derived
// for GQA, MLA, SwiGLU and MoE); 0 for a tensor the layer kind lacks.
double TensorBytesPerToken(LayerTensor tensor, const ModelSpec& m, const PlanSpec& p, bool moe_layer);

// What `mode` runs again of forward `op` (of a dense or MoE layer program) before the layer's
// backward: `share` 0 when its output is kept or unneeded, 1 when rerun whole, a fraction
// otherwise: of the op's output columns (`narrower`: selective-op's k of the fused qkv, a matmul
// of that many fewer columns) or of the layers (selective-layer's half: the same op, half as often).
struct Rerun {
  double share = 0;
  bool narrower = false;
};
Rerun RerunOf(Recompute mode, const Op& op, const ModelSpec& m, const PlanSpec& p);

}  // namespace shardsim::strategies
