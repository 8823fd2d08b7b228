#include "strategies/expert_parallel.h"

#include "strategies/tensor_parallel.h"

namespace shardsim::strategies {

void AppendMoeBlock(LayerBuilder& layer, const ModelSpec& m, const PlanSpec& plan) {
  const MoeSpec& moe = *m.moe;
  const LayerShape& s = layer.shape();
  const int64_t t = plan.mesh.tensor, d = m.hidden_size;
  const double e = s.element_bytes;
  layer.Elementwise("moe_norm", 2 * static_cast<double>(s.tokens) * static_cast<double>(d) * e);
  if (moe.num_shared_experts > 0) {
    AppendMlpBlock(layer, m, plan, moe.num_shared_experts * moe.expert_ffn_hidden_size, "shared_expert", /*standalone=*/false);
  }
  layer.Matmul("router", s.tokens, d, moe.num_experts);
  // Token copies routed to experts (balanced load times capacity). Megatron-Core splits the
  // tokens over tensor (sequence parallel) before dispatching, so each tensor rank sends 1/t of
  // them, and gathers them back over tensor for the tensor-split experts.
  const auto routed = static_cast<int64_t>(static_cast<double>(s.tokens * moe.top_k) * plan.ep_capacity_factor + 0.5);
  const double routed_bytes = static_cast<double>(routed) * static_cast<double>(d) * e;
  if (plan.mesh.expert > 1) {
    layer.Collective("ep_dispatch", Stream::kExpert, {"expert"}, routed_bytes / static_cast<double>(t), true, CollectiveOp::kAllToAll, true,
                     CollectiveOp::kAllToAll, plan.overlap.expert);
  }
  if (t > 1) {
    layer.Collective("tp_enter_experts", Stream::kTensor, {"tensor"}, routed_bytes, true, CollectiveOp::kAllGather, true,
                     CollectiveOp::kReduceScatter, plan.overlap.tensor);
  }
  const int64_t local = (moe.expert_ffn_hidden_size + t - 1) / t;
  const bool gated = m.mlp == MlpKind::kSwiGlu;
  layer.Matmul("experts_up", routed, d, (gated ? 2 : 1) * local);
  layer.Elementwise("experts_activation", static_cast<double>(routed) * static_cast<double>(local) * e * (gated ? 3 : 2));
  layer.Matmul("experts_down", routed, local, d);
  if (t > 1) {
    layer.Collective("tp_exit_experts", Stream::kTensor, {"tensor"}, routed_bytes, true, CollectiveOp::kReduceScatter, true,
                     CollectiveOp::kAllGather, plan.overlap.tensor);
  }
  if (plan.mesh.expert > 1) {
    layer.Collective("ep_combine", Stream::kExpert, {"expert"}, routed_bytes / static_cast<double>(t), true, CollectiveOp::kAllToAll, true,
                     CollectiveOp::kAllToAll, plan.overlap.expert);
  }
  layer.Elementwise("moe_combine", 3 * static_cast<double>(s.tokens) * static_cast<double>(d) * e);
}

}  // namespace shardsim::strategies
