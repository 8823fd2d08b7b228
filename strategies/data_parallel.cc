#include "strategies/data_parallel.h"

#include <tuple>

namespace shardsim::strategies {
namespace {

// Mixed-precision Adam (ZeRO section 3): bf16 parameters and gradients; fp32 master weights,
// Adam m and v. The optimizer reads gradient, master, m, v and writes master, m, v and the
// bf16 parameter: 2 + 4 + 4 + 4 read, 4 + 4 + 4 + 2 written.
constexpr double kOptimizerBytesPerParam = 14 + 14;
constexpr double kGradBytes = 2;
constexpr double kParamBytes = 2;

Op Comm(const std::string& name, CollectiveOp op, std::vector<std::string> axes, double bytes, bool overlapped) {
  return CommOp(name, Phase::kBackwardWeight, Stream::kData, op, std::move(axes), bytes, overlapped);
}

}  // namespace

std::vector<std::string> DenseReplicaAxes(const PlanSpec& p) {
  std::vector<std::string> axes;
  if (p.mesh.data > 1) axes.push_back("data");
  if (p.mesh.expert > 1) axes.push_back("expert");
  return axes;
}

std::vector<std::string> ExpertReplicaAxes(const PlanSpec& p) {
  std::vector<std::string> axes;
  if (p.mesh.data > 1) axes.push_back("data");
  return axes;
}

int64_t DenseShardDegree(const PlanSpec& p) { return p.zero_stage == 0 && p.mesh.fsdp == 1 ? 1 : p.mesh.data * p.mesh.expert * p.mesh.fsdp; }
int64_t ExpertShardDegree(const PlanSpec& p) { return p.zero_stage == 0 && p.mesh.fsdp == 1 ? 1 : p.mesh.data * p.mesh.fsdp; }

std::vector<Op> DataParallelStepOps(const PlanSpec& p, double dense_params, double expert_params) {
  std::vector<Op> ops;
  const bool fsdp = p.mesh.fsdp > 1;
  // With FSDP the gradients were already reduce-scattered over fsdp per layer; what remains is
  // the reduction of each fsdp shard over the replica axes (hybrid sharding).
  const double dense = dense_params / static_cast<double>(p.mesh.fsdp), expert = expert_params / static_cast<double>(p.mesh.fsdp);
  const std::vector<std::tuple<std::string, double, std::vector<std::string>>> kinds = {{"dense", dense, DenseReplicaAxes(p)},
                                                                                        {"expert", expert, ExpertReplicaAxes(p)}};
  for (const auto& [name, params, axes] : kinds) {
    if (params <= 0 || axes.empty()) continue;
    if (p.zero_stage == 0 || fsdp) {
      ops.push_back(Comm("dp_allreduce_" + name, CollectiveOp::kAllReduce, axes, params * kGradBytes, p.overlap.data));
    } else {
      ops.push_back(Comm("dp_reduce_scatter_" + name, CollectiveOp::kReduceScatter, axes, params * kGradBytes, p.overlap.data));
      Op gather = Comm("dp_allgather_" + name, CollectiveOp::kAllGather, axes, params * kParamBytes, false);
      gather.name = "zero_param_allgather_" + name;
      ops.push_back(gather);
    }
  }
  const double local = dense_params / static_cast<double>(DenseShardDegree(p)) + expert_params / static_cast<double>(ExpertShardDegree(p));
  ops.push_back(ComputeOp("optimizer", Phase::kBackwardWeight, ComputeKind::kOptimizer, 0, local * kOptimizerBytesPerParam));
  return ops;
}

void AppendFsdpOps(LayerProgram& layer, const PlanSpec& p, double dense_params, double expert_params) {
  if (p.mesh.fsdp == 1) return;
  const double bytes = (dense_params + expert_params) * kParamBytes;
  Op gather = CommOp("fsdp_allgather", Phase::kForward, Stream::kData, CollectiveOp::kAllGather, {"fsdp"}, bytes, p.overlap.fsdp);
  layer.ops.insert(layer.ops.begin(), gather);
  Op regather = gather;
  regather.name = "fsdp_allgather_backward";
  regather.phase = Phase::kBackwardInput;
  layer.ops.push_back(regather);
  Op scatter = gather;
  scatter.name = "fsdp_reduce_scatter";
  scatter.phase = Phase::kBackwardWeight;
  scatter.collective = CollectiveOp::kReduceScatter;
  scatter.comm_bytes = (dense_params + expert_params) * kGradBytes;
  layer.ops.push_back(scatter);
}

}  // namespace shardsim::strategies
