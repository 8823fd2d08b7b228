// How a layer's norms, gated activations and rotary embeddings move memory, as the plan's
// elementwise_kernels runs them (PlanSpec::elementwise_kernels): the bytes each moves per byte of
// the tensor it reads at the activations' width (passes), forward, and its backward's passes.
// Fused kernels read their inputs and write their output once; eager PyTorch runs each primitive
// as its own kernel, upcasting to fp32 where the model's code does (torchtitan's llama at 9dec370:
// norms.py RMSNorm, model.py apply_rotary_emb and FeedForward; each primitive's backward as
// PyTorch's autograd formulas make it).
#pragma once

#include "core/model_spec.h"
#include "core/plan_spec.h"

namespace shardsim::strategies {

struct ElementwisePasses {
  double forward = 0;
  double backward = 0;
  // The backward's bytes as a multiple of the forward's (LayerBuilder::Elementwise).
  double BackwardFactor() const { return forward > 0 ? backward / forward : 0; }
};

// The layer's pre-norms and the final norm. Fused: read and write (2 passes; the backward reads
// the input and the output gradient and writes the input gradient, 4). Eager RMSNorm
// (x.float(), pow(2), mean, rsqrt, mul, type_as, mul by the weight): 18 passes at bf16, its
// backward 38; eager-fused-norm's Triton kernel as fused. LayerNorm is one native kernel either way.
ElementwisePasses NormPasses(const ModelSpec& model, const PlanSpec& plan, double element_bytes);

// A gated (SwiGLU) activation per byte of its output: fused reads gate and up and writes their
// product (3, backward 6); eager silu then mul (5, backward 9). Squared ReLU eagerly relu then
// its square (4, backward 6; fused 2 and 4); GELU one native kernel either way (2, backward 4).
ElementwisePasses ActivationPasses(const ModelSpec& model, const PlanSpec& plan, double element_bytes);

// Rotary embedding per byte of Q and K: fused reads and writes each (2, backward 2); eager
// through complex views (x.float(), the complex product, type_as): 10 at bf16, backward 10.
ElementwisePasses RopePasses(const PlanSpec& plan, double element_bytes);

// The fused kernels' passes whatever the plan says: what the eager ones are set against.
ElementwisePasses FusedNormPasses(const ModelSpec& model);
ElementwisePasses FusedActivationPasses(const ModelSpec& model);

}  // namespace shardsim::strategies
