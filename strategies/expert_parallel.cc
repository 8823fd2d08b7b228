#include "strategies/expert_parallel.h"

#include "strategies/elementwise_kernels.h"
#include "strategies/op_names.h"
#include "strategies/tensor_parallel.h"

namespace shardsim::strategies {

void AppendMoeBlock(LayerBuilder& layer, const ModelSpec& m, const PlanSpec& plan) {
  const MoeSpec& moe = *m.moe;
  const LayerShape& s = layer.shape();
  const int64_t t = plan.mesh.tensor, d = m.hidden_size;
  const double e = s.element_bytes;
  // The tokens this rank routes: its sequence shard under sequence parallelism (the norm, the
  // router, the latent projections and the combine's weighted sum run on it), else all of them.
  const int64_t own_tokens = s.sequence_parallel ? TensorShard(s.tokens, t) : s.tokens;
  const ElementwisePasses norm = NormPasses(m, plan, e);
  layer.Elementwise(ops::kMoeNorm, norm.forward * static_cast<double>(own_tokens) * static_cast<double>(d) * e, norm.BackwardFactor());
  if (moe.num_shared_experts > 0) {
    AppendMlpBlock(layer, m, plan, moe.num_shared_experts * moe.expert_ffn_hidden_size, ops::kSharedExpert, /*standalone=*/false);
  }
  // The router's product stays 16-bit in fp8 plans (Op::sixteen_bit): Megatron-core's TopKRouter
  // multiplies its own weight outside Transformer Engine (router_gating_linear), torchtitan's FP8
  // configurations filter "router.gate" (models/deepseek_v3/config_registry.py at b5bcd76c).
  layer.SixteenBitMatmul(ops::kRouter, own_tokens, d, moe.num_experts);
  // LatentMoE: the routed rows projected to the latent width first (replicated over tensor) and
  // back after the combine.
  const int64_t rw = RoutedWidth(m);
  if (moe.latent_size > 0) layer.Matmul(ops::kLatentDown, own_tokens, d, moe.latent_size);
  if (plan.mesh.context > 1 || t > 1) {
    // The balancing loss counts each expert's tokens over the whole micro-batch, whose tokens the
    // context ranks and (sequence parallel) the tensor ranks share: the counts are summed over
    // them (Megatron-core reduces them over its tensor x context group).
    std::vector<std::string> axes;
    if (t > 1) axes.emplace_back("tensor");
    if (plan.mesh.context > 1) axes.emplace_back("context");
    layer.Collective(ops::kRouterCounts, Stream::kExpert, axes, static_cast<double>(moe.num_experts) * 8, true, CollectiveOp::kAllReduce, false,
                     CollectiveOp::kAllReduce, false);
  }
  // Token copies routed to experts (balanced load times capacity). Megatron-Core splits the
  // tokens over tensor (sequence parallel) before dispatching, so each tensor rank sends 1/t of
  // them, and gathers them back over tensor for the tensor-split experts; experts folded over
  // tensor (ExpertTensorDegree 1) are whole on each rank, which computes its own 1/t.
  const auto routed = static_cast<int64_t>(static_cast<double>(s.tokens * moe.top_k) * plan.ep_capacity_factor + 0.5);
  const double routed_bytes = static_cast<double>(routed) * static_cast<double>(rw) * e;
  // The all-to-alls toward the experts (the dispatch, the combine's backward) move the rows at
  // the dispatch width (FP8 under ep_dispatch_dtype fp8); those back from them at the
  // activations'.
  const double to_experts = static_cast<double>(routed) * static_cast<double>(rw) * EpDispatchBytes(plan, rw) / static_cast<double>(t);
  const double from_experts = routed_bytes / static_cast<double>(t);
  // The copies of this rank's own tokens (the dispatch's rows), gathered and grouped by expert
  // before it (read and written once; the gradient scatters them back).
  const double own_copies = static_cast<double>(own_tokens) * static_cast<double>(moe.top_k) * plan.ep_capacity_factor;
  layer.Elementwise(ops::kMoePermute, 2 * own_copies * static_cast<double>(rw) * e, 1.0);
  // Under a deduplicating dispatcher (deepep) the all-to-alls carry each token once per node and
  // GPU its experts sit on: the cost layer lays the rows out from the routing.
  const TokenRouting routing = DeduplicatesDispatch(plan) ? DispatchRouting(m, plan) : TokenRouting{};
  // DeepEP's kernels run on SMs of their own, which the compute they overlap goes without.
  const int64_t comm_units = DispatchKernelUnits(plan);
  const std::vector<std::string> expert_axes = ExpertAxes(plan);
  if (!expert_axes.empty()) {
    layer.Collective(ops::kExpertDispatch, Stream::kExpert, expert_axes, to_experts, CollectiveOp::kAllToAll, from_experts, CollectiveOp::kAllToAll,
                     plan.overlap.expert, routing, comm_units);
  }
  // Over tensor the rows toward the experts (the gather of their inputs, the backward gather of
  // their outputs' gradients) keep the dispatch width; the reductions move 16-bit partial sums.
  const int64_t te = ExpertTensorDegree(plan);
  const double to_experts_t = to_experts * static_cast<double>(te);
  // The rows each rank's experts compute, and their bytes.
  const int64_t rows = routed * te / t;
  const double rows_bytes = routed_bytes * static_cast<double>(te) / static_cast<double>(t);
  if (te > 1) {
    // Grouped products (one per local expert): several, as HidesRegionReduceScatter counts them.
    layer.Collective(ops::kTensorEnterExperts, Stream::kTensor, {"tensor"}, to_experts_t, CollectiveOp::kAllGather, rows_bytes,
                     CollectiveOp::kReduceScatter, HidesRegionReduceScatter(plan, /*several_products=*/true));
  }
  const int64_t local = TensorShard(moe.expert_ffn_hidden_size, te);
  const bool gated = m.mlp == MlpKind::kSwiGlu;
  // The received rows sorted by local expert, and back after the products (each read and written).
  layer.Elementwise(ops::kExpertsSort, 2 * rows_bytes, 1.0);
  layer.Matmul(ops::kExpertsUp, rows, rw, (gated ? 2 : 1) * local, /*expert_weight=*/true);
  const ElementwisePasses activation = ActivationPasses(m, plan, e);
  layer.Elementwise(ops::kExpertsActivation, static_cast<double>(rows) * static_cast<double>(local) * e * activation.forward, activation.BackwardFactor());
  layer.Matmul(ops::kExpertsDown, rows, local, rw, /*expert_weight=*/true);
  layer.Elementwise(ops::kExpertsUnsort, 2 * rows_bytes, 1.0);
  if (te > 1) {
    layer.Collective(ops::kTensorExitExperts, Stream::kTensor, {"tensor"}, rows_bytes, CollectiveOp::kReduceScatter, to_experts_t,
                     CollectiveOp::kAllGather, HidesRegionReduceScatter(plan, /*several_products=*/true));
  }
  if (!expert_axes.empty()) {
    layer.Collective(ops::kExpertCombine, Stream::kExpert, expert_axes, from_experts, CollectiveOp::kAllToAll, to_experts, CollectiveOp::kAllToAll,
                     plan.overlap.expert, routing, comm_units);
  }
  if (moe.latent_size > 0) layer.Matmul(ops::kLatentUp, own_tokens, moe.latent_size, d);
  // The gate-weighted sum of a token's copies, at the routed width: each copy read, the token
  // written (Megatron-core's unpermute).
  layer.Elementwise(ops::kMoeCombine, (own_copies + static_cast<double>(own_tokens)) * static_cast<double>(rw) * e);
}

}  // namespace shardsim::strategies
