// Context parallelism by ring attention (Liu et al. 2023; Megatron context parallelism): the
// sequence is split over `context` (each rank holds chunks i and 2c-1-i, so causal work is
// balanced); queries stay, K and V blocks travel the ring.
// Sharding: Q[B, S_context, H, K], K/V[B, S_context, W] rotating, W = AttentionKvWidth (the
// shared heads' K and V, each query head's under repeat_kv, MLA's per-head ones).
// Collectives (ring): forward c-1 point-to-point sends of each rank's K and V block
// (B (S/c) W elements), overlapped with blockwise attention; backward the same for K and V,
// plus c-1 for the dK and dV accumulators.
// Collectives (all-gather variant, context_kv = "all-gather", as Llama 3's context parallelism and
// PyTorch's default): forward an all-gather of K and V over context, which hides under the
// attention's local block only (Op::partner_from / partner_to, OverlapPartner); backward a reduce-scatter of
// dK and dV, after the backward's own gather of K and V (AppendContextBackwardGather).
#pragma once

#include "core/model_spec.h"
#include "core/plan_spec.h"
#include "strategies/layer_builder.h"

namespace shardsim::strategies {

// Whether the attention reads K/V repeated to every query head (the plan's repeat_kv, on a
// grouped-query model without MLA).
bool RepeatsKv(const ModelSpec& m, const PlanSpec& plan);

// K+V columns per token that one device's attention reads, and context parallelism exchanges:
// the tensor-split shared heads (at least one per device), each query head's where `repeated`
// (RepeatsKv), MLA's decompressed per-head K and V.
int64_t AttentionKvWidth(const ModelSpec& m, const PlanSpec& plan, bool repeated);
inline int64_t AttentionKvWidth(const ModelSpec& m, const PlanSpec& plan) { return AttentionKvWidth(m, plan, RepeatsKv(m, plan)); }

// What one device holds of K and V gathered or in flight over the context ranks beyond its own,
// for one layer's attention at a time: the all-gather's c - 1 other blocks (through the
// attention; not saved for the backward), or the ring's one block being received beside the one
// in use (0 when context = 1).
double ContextKvBytes(const ModelSpec& m, const PlanSpec& plan, int64_t tokens);

// Appends the ring transfers for `kv_width` K+V columns per token on this device (nothing when
// context = 1), before the attention.
void AppendRingAttentionTransfers(LayerBuilder& layer, const PlanSpec& plan, int64_t kv_width);
// Appends, after the attention, what its backward gathers of K and V first: the all-gather
// variant's K/V again (PyTorch's _templated_ring_attention_backward gathers them anew rather than
// keep them), hidden under the backward's local block as the forward's under its own; nothing for
// the ring or context = 1.
void AppendContextBackwardGather(LayerBuilder& layer, const PlanSpec& plan, int64_t kv_width);

}  // namespace shardsim::strategies
