// A hybrid model's Mamba-2 layer (ModelSpec::mamba): pre-norm, the mixer and the residual, as
// Megatron-core's MambaLayer and MambaMixer (core/ssm/mamba_layer.py, mamba_mixer.py) run it.
// Tensor parallelism splits the mixer by heads and groups: the input projection (z, x, B, C, dt)
// column-parallel, the convolution, the scan and the gated norm on each rank's heads, the output
// projection row-parallel, with the same f / g collectives as an attention block (and sequence
// parallelism's gathers); heads and groups must divide over tensor (plan_rules.cc). Context
// parallelism is Megatron-core's all-to-all kind: the scan over whole sequences of a share of
// the heads (AppendMambaBlock).
#pragma once

#include "core/model_spec.h"
#include "core/plan_spec.h"
#include "strategies/layer_builder.h"

namespace shardsim::strategies {

// The widths one tensor rank holds of a Mamba-2 mixer, per token.
struct MambaWidths {
  int64_t inner = 0;    // d_inner / t: x, z, y
  int64_t bc = 0;       // 2 G N / t: B and C
  int64_t heads = 0;    // H / t: dt
  int64_t in_proj() const { return 2 * inner + bc + heads; }  // z, x, B, C, dt
  int64_t conv() const { return inner + bc; }                 // x, B, C
};
MambaWidths MambaWidthsOf(const ModelSpec& model, int64_t tensor);
// Over `context` ranks (Megatron-core's core/ssm/mamba_context_parallel.py): the groups of B and C
// a tensor rank's context ranks scan together, max(G / t, context): G / t where each context rank
// takes a share of them, else each takes one, the group repeated on context / (G / t) ranks
// (group_repeat_count); and the widths per local token it sends to them, B and C with those copies.
int64_t MambaScannedGroups(const ModelSpec& model, int64_t tensor, int64_t context);
MambaWidths MambaScannedWidthsOf(const ModelSpec& model, int64_t tensor, int64_t context);

// Norm, input projection, convolution, scan, gated norm, output projection and residual.
void AppendMambaBlock(LayerBuilder& layer, const ModelSpec& model, const PlanSpec& plan);

// Bytes per token one device keeps of a Mamba-2 mixer for its backward, beside the layer input:
// the norm's output (the input projection's input: the sequence shard under sequence parallelism,
// whole where the plan keeps gathered inputs), the projection's output (z, x, B, C, dt; over the
// heads, with B and C's copies, under context parallelism), the scan kernel's output before its
// z gate, the gated output (the RMSNorm's input) and the norm's output (the output projection's
// input): Megatron-core's memory-efficient path calls the kernel without the norm and normalises
// after (mamba_mixer.py _ssm_training), under context parallelism after the all-to-all back. The convolution's
// output is rebuilt from the projection's in the backward (Megatron-core's memory-efficient path,
// mamba_ssm's mamba_split_conv1d_scan_combined, which saves zxbcdt and the scan's output).
double MambaActivationBytesPerToken(const ModelSpec& model, const PlanSpec& plan);

}  // namespace shardsim::strategies
