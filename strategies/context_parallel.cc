#include "strategies/context_parallel.h"

#include "strategies/op_names.h"
#include "strategies/tensor_parallel.h"

namespace shardsim::strategies {
namespace {

// An all-gather of every context rank's K/V `block`, hidden under the attention's local block.
Op LocalBlockGather(std::string name, Phase phase, const PlanSpec& plan, double block) {
  const int64_t c = plan.mesh.context;
  Op gather = CommOp(std::move(name), phase, Stream::kContext, CollectiveOp::kAllGather, {"context"}, block * static_cast<double>(c), plan.overlap.context);
  gather.partner_to = 1.0 / static_cast<double>(c);
  return gather;
}

}  // namespace

bool RepeatsKv(const ModelSpec& m, const PlanSpec& plan) { return plan.repeat_kv && !m.mla && m.num_kv_heads < m.num_heads; }

int64_t AttentionKvWidth(const ModelSpec& m, const PlanSpec& plan, bool repeated) {
  const int64_t t = plan.mesh.tensor, heads = TensorShard(m.num_heads, t);
  if (m.mla) return heads * (m.mla->qk_nope_head_dim + m.mla->qk_rope_head_dim + m.mla->v_head_dim);
  return 2 * (repeated ? heads : TensorShard(m.num_kv_heads, t)) * m.head_dim;
}

double ContextKvBytes(const ModelSpec& m, const PlanSpec& plan, int64_t tokens) {
  const int64_t c = plan.mesh.context;
  if (c == 1) return 0;
  const double block = static_cast<double>(tokens) * static_cast<double>(AttentionKvWidth(m, plan)) * ActivationBytes(plan.dtype);
  return plan.context_kv == "all-gather" ? static_cast<double>(c - 1) * block : block;
}

void AppendRingAttentionTransfers(LayerBuilder& layer, const PlanSpec& plan, int64_t kv_width) {
  const int64_t c = plan.mesh.context;
  if (c == 1) return;
  const LayerShape& s = layer.shape();
  const double block = static_cast<double>(s.tokens) * static_cast<double>(kv_width) * s.element_bytes;
  if (plan.context_kv == "all-gather") {
    // The gather hides under the attention's local block only (OverlapPartner).
    layer.Raw(LocalBlockGather(std::string(ops::kContextKvAllGather), Phase::kForward, plan, block));
    // dK/dV pass on while the other blocks' backward computes.
    Op reduce = CommOp(ops::Grad(ops::kContextKvAllGather), Phase::kBackwardInput, Stream::kContext, CollectiveOp::kReduceScatter, {"context"},
                       block * static_cast<double>(c), plan.overlap.context);
    reduce.partner_from = 1.0 / static_cast<double>(c);
    layer.Raw(std::move(reduce));
    return;
  }
  layer.Collective(ops::kContextKv, Stream::kContext, {"context"}, block, true, CollectiveOp::kPermute, true, CollectiveOp::kPermute,
                   plan.overlap.context, c - 1);
  layer.Collective(ops::kContextDkv, Stream::kContext, {"context"}, block, false, CollectiveOp::kPermute, true, CollectiveOp::kPermute,
                   plan.overlap.context, c - 1);
}

void AppendContextBackwardGather(LayerBuilder& layer, const PlanSpec& plan, int64_t kv_width) {
  if (plan.mesh.context == 1 || plan.context_kv != "all-gather") return;
  const LayerShape& s = layer.shape();
  const double block = static_cast<double>(s.tokens) * static_cast<double>(kv_width) * s.element_bytes;
  layer.Raw(LocalBlockGather(ops::Regather(ops::kContextKvAllGather), Phase::kBackwardInput, plan, block));
}

}  // namespace shardsim::strategies
