// Data parallelism and ZeRO (Rajbhandari et al. 2019) over the replica axes, and FSDP / ZeRO-3
// over the `fsdp` axis (hybrid sharding when both are used).
// Replica axes: data and context for every parameter (context ranks see other tokens of the
// same sequences), and expert for dense ones (expert ranks are data parallel for them); the
// table's ParamReplication (core/mesh_axes.h) says which, tests/core/mesh_axes_test.cc holds it
// to this line.
// Sharding: W[D_fsdp, F] (ZeRO-3: W[D_(fsdp,replicas), F]); gradients sharded over the replicas
// from ZeRO-2, fp32 master weights and Adam state from ZeRO-1, always over fsdp.
// Collectives: per layer and micro-batch when parameters are sharded, an all-gather before
// forward and again before backward (prefetched), and a reduce-scatter of the gradients after
// (at ZeRO-2 too, over the replicas: sharded gradients cannot accumulate over micro-batches, as
// DeepSpeed reduces each micro-batch's buckets); once per step over the replica axes, an
// all-reduce of the gradients (ZeRO-0), or a reduce-scatter of them (ZeRO-1) and an all-gather
// of the updated parameters (ZeRO-1/2), bucketed under the last backward; nothing more at ZeRO-3.
#pragma once

#include <string>
#include <vector>

#include "core/plan_spec.h"
#include "strategies/step_program.h"

namespace shardsim::strategies {

enum class ParamKind { kDense, kExpert };

// Mesh axes (of size > 1) over which parameters of `kind` are replicated, before sharding, in the
// table's order.
std::vector<std::string> ReplicaAxes(const PlanSpec& plan, ParamKind kind);
// Mesh axes (of size > 1) parameters of `kind` are sharded over and gathered per layer: fsdp,
// and at ZeRO-3 the replica axes too.
std::vector<std::string> ParamShardAxes(const PlanSpec& plan, ParamKind kind);
// Mesh axes gradients of `kind` are reduce-scattered over per layer and micro-batch: fsdp, and
// from ZeRO-2 the replica axes too.
std::vector<std::string> GradShardAxes(const PlanSpec& plan, ParamKind kind);

// Whether sharded parameters stay gathered from the step's first forward to its last backward
// (fsdp_reshard_after_forward false with parameters sharded): gathered and reduce-scattered once
// per step instead of per layer and micro-batch.
bool KeepsGatheredParams(const PlanSpec& plan);

// Whether the plan all-gathers parameters at all: sharded ones before use (fsdp, ZeRO-3), or the
// updated shards of ZeRO-1/2 over the replicas (dense or expert parameters).
bool GathersParams(const PlanSpec& plan);

// The share of an FP8 product's weight cast (PlanSpec::fp8_weight_casts) that each forward and
// each input-gradient product pays per micro-batch, of `microbatches` a step: weights gathered in
// FP8 are cast on this device's shard before each gather, 1/P of the weight (P its shard degree:
// the dense parameters', or the routed experts' for `kind` kExpert; a kind no gather moves, experts
// without replicas, casts by the rules below), per micro-batch where fsdp / ZeRO-3 gathers per micro-batch (the
// backward's too where it regathers, else nothing), once a step where ZeRO-1/2 gathers the
// updated shards or the weights stay gathered (1/(P x micro-batches), the backward nothing);
// else per-step casts 1/micro-batches in the forward and nothing in the backward (the cached
// copy's transpose); else 1 each. 1 each for plans without FP8 products.
struct WeightCastShares {
  double forward = 1, backward_input = 1;
};
WeightCastShares Fp8WeightCastShares(const PlanSpec& plan, int64_t microbatches, ParamKind kind = ParamKind::kDense);

// Bytes per weight of an FP8 product that per-step casts (fp8_weight_casts per-step) keep from
// the step's first micro-batch on: the cached FP8 copy and its transpose, each with the recipe's
// weight scales (Transformer Engine's weight workspace, kept in the module's _fp8_workspaces across
// steps: at v1.8 module/linear.py casts with_transpose whenever grad is enabled, for Hopper's
// TN-only FP8 products' input gradient, and module/base.py get_fp8_workspace caches it under
// "weight" once Megatron-core passes is_first_microbatch). 0 for other plans and where the weights are kept in FP8
// themselves (param_gather_dtype fp8: Megatron-core's --fp8-param-gather, whose FP8 weights and
// transpose replace the 16-bit ones). `fp8_any_layout`: the chip runs FP8 products in any
// layout (ChipSpec::fp8_any_layout, Blackwell), where TE makes no transpose of a per-tensor scaled
// weight (quantizer.cpp: with_transpose = columnwise_usage && !nvte_is_non_tn_fp8_gemm_supported()),
// so a tensorwise recipe keeps one copy; block-scaled recipes keep two there too (their GEMMs run
// TN only, so their quantizers make the column-wise copy whatever the chip).
double Fp8WeightCacheBytes(const PlanSpec& plan, bool fp8_any_layout = false);

// How many ways each kind of training state is split, on top of tensor / pipeline / expert.
struct ShardDegrees {
  double params = 1, grads = 1, optimizer = 1;
};
ShardDegrees Sharding(const PlanSpec& plan, ParamKind kind);

// Bytes an all-gather of `params` parameters moves, `sixteen_bit` of them weights no FP8 recipe
// casts (vocabulary matrices, decoder layers kept at 16 bits): those at the compute width, the rest at ParamGatherBytes (FP8 under
// param_gather_dtype fp8; the norms' and routers' few weights counted with them).
double GatheredParamBytes(const PlanSpec& plan, double params, double sixteen_bit);

// Step-level ops of a stage holding `dense_params` and `expert_params` (after tensor, pipeline and
// expert sharding; `sixteen_bit_dense` and `sixteen_bit_expert` of them weights no FP8 recipe
// casts: Stage::sixteen_bit_params): gradient reduction over the replica axes, the parameter
// all-gather of ZeRO-1/2, and the optimizer.
std::vector<Op> DataParallelStepOps(const PlanSpec& plan, double dense_params, double expert_params, double sixteen_bit_dense, double sixteen_bit_expert = 0);

// Per-layer gathers and reduce-scatter of a layer holding `dense_params` + `expert_params`
// (`vocab_params` of the dense ones vocabulary matrices) when parameters are sharded (fsdp > 1 or
// ZeRO-3).
void AppendShardedParamOps(LayerProgram& layer, const PlanSpec& plan, double dense_params, double expert_params, double vocab_params = 0);

}  // namespace shardsim::strategies
