#include "strategies/data_parallel.h"

#include <algorithm>
#include <tuple>

#include "strategies/op_names.h"
#include "strategies/state_bytes.h"

namespace shardsim::strategies {
namespace {

double Product(const PlanSpec& p, const std::vector<std::string>& axes) {
  double n = 1;
  for (const std::string& a : axes) n *= static_cast<double>(p.mesh.Size(a));
  return n;
}

// The axes (of size > 1) every parameter is sharded over and gathered per layer: fsdp.
std::vector<std::string> GatheredShardAxes(const PlanSpec& p) {
  std::vector<std::string> axes;
  for (const MeshAxisFacts& axis : kMeshAxes) {
    if (p.mesh.Size(axis.axis) > 1 && axis.params == ParamRole::kSharded) axes.emplace_back(axis.name);
  }
  return axes;
}

}  // namespace

std::vector<std::string> ReplicaAxes(const PlanSpec& p, ParamKind kind) {
  std::vector<std::string> axes;
  // Routed experts are split, not replicated, over the axes they are folded over (ExpertAxes).
  const std::vector<std::string> split = kind == ParamKind::kExpert ? ExpertAxes(p) : std::vector<std::string>{};
  for (const MeshAxisFacts& axis : kMeshAxes) {
    if (p.mesh.Size(axis.axis) <= 1 || !ReplicatesParams(axis, kind == ParamKind::kExpert)) continue;
    if (std::find(split.begin(), split.end(), axis.name) == split.end()) axes.emplace_back(axis.name);
  }
  return axes;
}

std::vector<std::string> ParamShardAxes(const PlanSpec& p, ParamKind kind) {
  std::vector<std::string> axes = GatheredShardAxes(p);
  if (p.zero_stage == 3) {
    for (const std::string& a : ReplicaAxes(p, kind)) axes.push_back(a);
  }
  return axes;
}

std::vector<std::string> GradShardAxes(const PlanSpec& p, ParamKind kind) {
  std::vector<std::string> axes = GatheredShardAxes(p);
  if (p.zero_stage >= 2) {
    for (const std::string& a : ReplicaAxes(p, kind)) axes.push_back(a);
  }
  return axes;
}

bool KeepsGatheredParams(const PlanSpec& p) { return !ReshardAfterForward(p) && !ParamShardAxes(p, ParamKind::kDense).empty(); }

bool GathersParams(const PlanSpec& p) {
  for (ParamKind kind : {ParamKind::kDense, ParamKind::kExpert}) {
    if (!ParamShardAxes(p, kind).empty()) return true;
    if ((p.zero_stage == 1 || p.zero_stage == 2) && !ReplicaAxes(p, kind).empty()) return true;
  }
  return false;
}

ShardDegrees Sharding(const PlanSpec& p, ParamKind kind) {
  const double fsdp = Product(p, GatheredShardAxes(p)), replicas = Product(p, ReplicaAxes(p, kind));
  return {fsdp * (p.zero_stage >= 3 ? replicas : 1), fsdp * (p.zero_stage >= 2 ? replicas : 1), fsdp * (p.zero_stage >= 1 ? replicas : 1)};
}

WeightCastShares Fp8WeightCastShares(const PlanSpec& p, int64_t microbatches, ParamKind kind) {
  if (p.dtype != "fp8") return {};
  const double steps = static_cast<double>(std::max<int64_t>(1, microbatches));
  const ShardDegrees d = Sharding(p, kind);
  // Weights of a kind no gather moves (experts without replicas) are cast as the plan casts.
  if (p.param_gather_dtype == "fp8" && GathersParams(p) && std::max(d.params, d.optimizer) > 1) {
    const bool per_layer = !ParamShardAxes(p, kind).empty() && !KeepsGatheredParams(p);
    if (per_layer) return {1 / d.params, ReshardAfterForward(p) ? 1 / d.params : 0.0};
    // The shard each gather moves: fsdp's (kept gathered), or the optimizer's (ZeRO-1/2).
    return {1 / (std::max(d.params, d.optimizer) * steps), 0.0};
  }
  if (p.fp8_weight_casts == "per-step") return {1 / steps, 0.0};
  return {};
}

double Fp8WeightCacheBytes(const PlanSpec& p, bool fp8_any_layout) {
  if (p.dtype != "fp8" || p.fp8_weight_casts != "per-step" || p.param_gather_dtype == "fp8") return 0;
  const std::string recipe = Fp8RecipeOf(p);
  return (fp8_any_layout && recipe == "tensorwise" ? 1 : 2) * Fp8WeightBytes(recipe);
}

double GatheredParamBytes(const PlanSpec& p, double params, double sixteen_bit) {
  return (params - sixteen_bit) * ParamGatherBytes(p) + sixteen_bit * ComputeElementBytes(p);
}

std::vector<Op> DataParallelStepOps(const PlanSpec& p, double dense_params, double expert_params, double sixteen_bit_dense, double sixteen_bit_expert) {
  std::vector<Op> ops;
  const std::vector<std::tuple<std::string, double, ParamKind, double>> kinds = {
      {std::string(ops::kDense), dense_params, ParamKind::kDense, sixteen_bit_dense},
      {std::string(ops::kExpert), expert_params, ParamKind::kExpert, sixteen_bit_expert}};
  double optimizer_params = 0;
  for (const auto& [name, params, kind, vocab] : kinds) {
    optimizer_params += params / Sharding(p, kind).optimizer;
    // Parameters kept gathered from the first forward to the last backward (FSDP2's
    // reshard_after_forward=False): one gather before the step's first forward and one
    // reduce-scatter after its last backward, gradients accumulating unsharded in between.
    if (params > 0 && KeepsGatheredParams(p)) {
      const std::vector<std::string> gather_axes = ParamShardAxes(p, kind), grad_axes = GradShardAxes(p, kind);
      if (!gather_axes.empty()) {
        ops.push_back(CommOp(ops::StepParamAllGather(name), Phase::kForward, Stream::kData, CollectiveOp::kAllGather, gather_axes,
                             GatheredParamBytes(p, params, vocab), false));
      }
      if (!grad_axes.empty()) {
        ops.push_back(CommOp(ops::StepGradReduceScatter(name), Phase::kBackwardWeight, Stream::kData, CollectiveOp::kReduceScatter, grad_axes,
                             params * GradReduceBytes(p), p.zero_stage == 2 ? p.overlap.data : p.overlap.fsdp));
      }
    }
    const std::vector<std::string> axes = ReplicaAxes(p, kind);
    // ZeRO-2 and ZeRO-3 reduce-scatter the gradients over the replicas per layer already.
    if (params <= 0 || axes.empty() || p.zero_stage == 3) continue;
    const double fsdp = Product(p, GatheredShardAxes(p)), shard = params / fsdp;  // what each fsdp rank holds
    if (p.zero_stage == 0) {
      ops.push_back(CommOp(ops::DataAllReduce(name), Phase::kBackwardWeight, Stream::kData, CollectiveOp::kAllReduce, axes, shard * GradReduceBytes(p),
                           p.overlap.data));
    } else {
      if (p.zero_stage == 1) {
        ops.push_back(CommOp(ops::DataReduceScatter(name), Phase::kBackwardWeight, Stream::kData, CollectiveOp::kReduceScatter, axes,
                             shard * GradReduceBytes(p), p.overlap.data));
      }
      ops.push_back(CommOp(ops::ZeroParamAllGather(name), Phase::kBackwardWeight, Stream::kData, CollectiveOp::kAllGather, axes,
                           GatheredParamBytes(p, shard, vocab / fsdp), false));
    }
  }
  ops.push_back(ComputeOp(std::string(ops::kOptimizer), Phase::kBackwardWeight, ComputeKind::kOptimizer, 0, optimizer_params * StateBytesOf(p).optimizer_traffic));
  return ops;
}

void AppendShardedParamOps(LayerProgram& layer, const PlanSpec& p, double dense_params, double expert_params, double vocab_params) {
  if (KeepsGatheredParams(p)) return;  // gathered and reduced once per step (DataParallelStepOps)
  const std::vector<std::tuple<std::string, double, ParamKind, double>> kinds = {
      {std::string(ops::kDense), dense_params, ParamKind::kDense, vocab_params}, {std::string(ops::kExpert), expert_params, ParamKind::kExpert, 0.0}};
  for (const auto& [name, params, kind, vocab] : kinds) {
    if (params <= 0) continue;
    const std::vector<std::string> axes = ParamShardAxes(p, kind);
    if (!axes.empty()) {
      Op gather = CommOp(ops::ParamAllGather(name), Phase::kForward, Stream::kData, CollectiveOp::kAllGather, axes,
                         GatheredParamBytes(p, params, vocab), p.overlap.fsdp);
      layer.ops.insert(layer.ops.begin(), gather);
      gather.name = ops::ParamAllGatherBackward(name);
      gather.phase = Phase::kBackwardInput;
      layer.ops.push_back(gather);
    }
    const std::vector<std::string> grad_axes = GradShardAxes(p, kind);
    if (!grad_axes.empty()) {
      // Sharded gradients cannot accumulate over micro-batches: each backward reduce-scatters.
      layer.ops.push_back(CommOp(ops::GradReduceScatter(name), Phase::kBackwardWeight, Stream::kData, CollectiveOp::kReduceScatter, grad_axes,
                                 params * GradReduceBytes(p), p.zero_stage == 2 ? p.overlap.data : p.overlap.fsdp));
    }
  }
}

}  // namespace shardsim::strategies
