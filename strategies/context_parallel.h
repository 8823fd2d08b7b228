// Context parallelism by ring attention (Liu et al. 2023; Megatron context parallelism): the
// sequence is split over `context` (each rank holds chunks i and 2c-1-i, so causal work is
// balanced); queries stay, K and V blocks travel the ring.
// Sharding: Q[B, S_context, H, K], K/V[B, S_context, Hkv, K] rotating.
// Collectives (ring): forward c-1 point-to-point sends of each rank's K and V block
// (2 B (S/c) Hkv K elements), overlapped with blockwise attention; backward the same for K and V,
// plus c-1 for the dK and dV accumulators.
// Collectives (all-gather variant, context_kv = "all-gather", as Llama 3's context parallelism):
// forward an all-gather of K and V over context; backward a reduce-scatter of dK and dV.
#pragma once

#include "core/plan_spec.h"
#include "strategies/layer_builder.h"

namespace shardsim::strategies {

// Appends the ring transfers for `kv_width` K+V columns per token on this device (nothing when
// context = 1).
void AppendRingAttentionTransfers(LayerBuilder& layer, const PlanSpec& plan, int64_t kv_width);

}  // namespace shardsim::strategies
