#include "strategies/expert_parallel.h"

#include "strategies/tensor_parallel.h"

namespace shardsim::strategies {

void AppendMoeBlock(LayerBuilder& layer, const ModelSpec& m, const PlanSpec& plan) {
  const MoeSpec& moe = *m.moe;
  const LayerShape& s = layer.shape();
  const int64_t t = plan.mesh.tensor, d = m.hidden_size;
  if (moe.num_shared_experts > 0) AppendMlpBlock(layer, m, plan, moe.num_shared_experts * moe.expert_ffn_hidden_size, "shared_expert");
  layer.Elementwise("moe_norm", 2 * static_cast<double>(s.tokens) * static_cast<double>(d) * s.element_bytes);
  layer.Matmul("router", s.tokens, d, moe.num_experts);
  // Token copies this rank sends to experts (and gets back), balanced load times capacity.
  const auto routed = static_cast<int64_t>(static_cast<double>(s.tokens * moe.top_k) * plan.ep_capacity_factor + 0.5);
  const double a2a_bytes = static_cast<double>(routed) * static_cast<double>(d) * s.element_bytes;
  if (plan.mesh.expert > 1) {
    layer.Collective("ep_dispatch", Stream::kExpert, {"expert"}, a2a_bytes, true, CollectiveOp::kAllToAll, true, CollectiveOp::kAllToAll,
                     plan.overlap.expert);
  }
  const int64_t local = (moe.expert_ffn_hidden_size + t - 1) / t;
  const bool gated = m.mlp == MlpKind::kSwiGlu;
  layer.Matmul("experts_up", routed, d, (gated ? 2 : 1) * local);
  layer.Elementwise("experts_activation", static_cast<double>(routed) * static_cast<double>(local) * s.element_bytes * (gated ? 3 : 2));
  layer.Matmul("experts_down", routed, local, d);
  if (t > 1) {
    layer.Collective("tp_experts", Stream::kTensor, {"tensor"}, a2a_bytes, true, CollectiveOp::kAllReduce, true, CollectiveOp::kAllReduce,
                     plan.overlap.tensor);
  }
  if (plan.mesh.expert > 1) {
    layer.Collective("ep_combine", Stream::kExpert, {"expert"}, a2a_bytes, true, CollectiveOp::kAllToAll, true, CollectiveOp::kAllToAll,
                     plan.overlap.expert);
  }
  layer.Elementwise("moe_combine", 3 * static_cast<double>(s.tokens) * static_cast<double>(d) * s.element_bytes);
}

}  // namespace shardsim::strategies
