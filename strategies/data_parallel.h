// Data parallelism and ZeRO (Rajbhandari et al. 2019) over the data-parallel group, and
// FSDP / ZeRO-3 over the `fsdp` axis.
// Sharding: dense weights W[D, F] replicated over data x expert (ZeRO-3 / FSDP: W[D_fsdp, F]);
// expert weights replicated over data (x fsdp). Optimizer state (fp32 master, Adam m and v)
// sharded over the group from ZeRO-1, gradients from ZeRO-2, parameters at ZeRO-3.
// Collectives, once per step unless noted: ZeRO-0 all-reduce of the gradients (bucketed under
// the last backward); ZeRO-1/2 reduce-scatter of the gradients and all-gather of the updated
// parameters; FSDP per layer and micro-batch: all-gather of the layer's parameters before
// forward and again before backward (prefetched), reduce-scatter of its gradients after.
#pragma once

#include <string>
#include <vector>

#include "core/model_spec.h"
#include "core/plan_spec.h"
#include "strategies/step_program.h"

namespace shardsim::strategies {

// Mesh axes (of size > 1) over which dense and expert parameters are replicated, without fsdp.
std::vector<std::string> DenseReplicaAxes(const PlanSpec& plan);
std::vector<std::string> ExpertReplicaAxes(const PlanSpec& plan);

// Devices optimizer state, gradients and (ZeRO-3) parameters are sharded over, per kind.
int64_t DenseShardDegree(const PlanSpec& plan);
int64_t ExpertShardDegree(const PlanSpec& plan);

// Step-level ops of a stage holding `dense_params` and `expert_params` (after tensor, pipeline
// and expert sharding): gradient reduction, parameter all-gather (ZeRO-1/2) and the optimizer.
std::vector<Op> DataParallelStepOps(const PlanSpec& plan, double dense_params, double expert_params);

// FSDP ops of one layer holding `dense_params` + `expert_params` parameters (after tensor and
// expert sharding): gathers before forward and backward, reduce-scatter after (when fsdp > 1).
void AppendFsdpOps(LayerProgram& layer, const PlanSpec& plan, double dense_params, double expert_params);

}  // namespace shardsim::strategies
