// Tensor parallelism (Megatron-LM, Shoeybi et al. 2019) with optional sequence parallelism
// (Korthikanti et al. 2022), for the attention and MLP blocks of a dense layer and for the
// vocabulary-parallel embedding and output head. Sharding, t = tensor, S_t = S sharded over
// tensor when sequence parallel:
//   X[B, S_t, D]; Wqkv[D, (H + 2 Hkv) K_tensor] and W_up[D, F_tensor] column-parallel;
//   Wo[H K_tensor, D] and W_down[F_tensor, D] row-parallel; heads and K/V heads split over t.
// Collectives per block: forward f = identity (SP: all-gather X over tensor), g = all-reduce of
// [B, S, D] (SP: reduce-scatter); backward f' = all-reduce (SP: reduce-scatter), g' = identity
// (SP: all-gather). So two all-reduces of B S D forward and two backward per layer, or the same
// volume as reduce-scatter + all-gather with SP.
#pragma once

#include "core/model_spec.h"
#include "core/plan_spec.h"
#include "strategies/layer_builder.h"

namespace shardsim::strategies {

// The columns one of `tensor` ranks holds of a `width`-wide product split over tensor (the last
// rank's share rounded up).
constexpr int64_t TensorShard(int64_t width, int64_t tensor) { return (width + tensor - 1) / tensor; }

// Norm, QKV (or MLA) projections, attention core (with ring-attention transfers when context
// > 1), output projection and residual, with the tensor collectives around them.
void AppendAttentionBlock(LayerBuilder& layer, const ModelSpec& model, const PlanSpec& plan);

// Norm, up (and gate) projection, activation, down projection and residual, `width` wide
// (without the norm and residual when `standalone` is false: a shared expert beside routed ones).
void AppendMlpBlock(LayerBuilder& layer, const ModelSpec& model, const PlanSpec& plan, int64_t width, std::string_view name,
                    bool standalone = true);

// A multi-token-prediction module's entry (DeepSeek-V3 section 2.2): the two input norms and the
// 2D -> D projection, row-parallel (each tensor rank its share of the 2D inputs, the partial sums
// reduced as after an output projection).
void AppendMtpEntry(LayerBuilder& layer, const ModelSpec& model, const PlanSpec& plan);

// Token (+ learned position) embedding, vocabulary-parallel: forward all-reduce over tensor
// (SP: reduce-scatter).
void AppendEmbedding(LayerBuilder& layer, const ModelSpec& model, const PlanSpec& plan);

// Final norm, vocabulary-parallel output projection and cross-entropy loss (with its two
// reductions over tensor).
void AppendHead(LayerBuilder& layer, const ModelSpec& model, const PlanSpec& plan);

// The f / g pair around a tensor-parallel region of `width`-wide activations (forward and
// backward collectives as above); nothing when tensor = 1. `several_products`: more than one
// product reads the region's input (HidesRegionReduceScatter). `fp8_products`: the region's
// products are FP8 ones (the attention's, a dense MLP's, the Mamba mixer's), whose input
// all-gathers (the forward's, and the backward's of the output gradient) move TensorGatherBytes.
void AppendTensorEnter(LayerBuilder& layer, const PlanSpec& plan, std::string_view name, int64_t width, bool several_products = false,
                       bool fp8_products = false);
void AppendTensorExit(LayerBuilder& layer, const PlanSpec& plan, std::string_view name, int64_t width, bool fp8_products = false);
// With sequence parallelism, the backward all-gather of the input of the region entered by
// `enter` (ops::Regather), placed right after the enter op: in the program's backward order it
// comes after the region's input gradients and before their reduce-scatter, ahead of the weight
// gradients that read it (the runtime gathers it before the input gradients; a phase's cost is
// the sum of its ops either way); nothing without.
void AppendTensorRegather(LayerBuilder& layer, const PlanSpec& plan, std::string_view enter, int64_t width, bool fp8_products = false);

}  // namespace shardsim::strategies
