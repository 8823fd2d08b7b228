#include "strategies/context_parallel.h"

#include "strategies/op_names.h"

namespace shardsim::strategies {
namespace {

int64_t DivUp(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

bool RepeatsKv(const ModelSpec& m, const PlanSpec& plan) { return plan.repeat_kv && !m.mla && m.num_kv_heads < m.num_heads; }

int64_t AttentionKvWidth(const ModelSpec& m, const PlanSpec& plan) {
  const int64_t t = plan.mesh.tensor, heads = DivUp(m.num_heads, t);
  if (m.mla) return heads * (m.mla->qk_nope_head_dim + m.mla->qk_rope_head_dim + m.mla->v_head_dim);
  return 2 * (RepeatsKv(m, plan) ? heads : DivUp(m.num_kv_heads, t)) * m.head_dim;
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
    Op gather = CommOp(std::string(ops::kContextKvAllGather), Phase::kForward, Stream::kContext, CollectiveOp::kAllGather, {"context"},
                       block * static_cast<double>(c), plan.overlap.context);
    gather.partner_share = 1.0 / static_cast<double>(c);
    layer.Raw(std::move(gather));
    layer.Raw(CommOp(ops::Grad(ops::kContextKvAllGather), Phase::kBackwardInput, Stream::kContext, CollectiveOp::kReduceScatter, {"context"},
                     block * static_cast<double>(c), plan.overlap.context));
    return;
  }
  layer.Collective(ops::kContextKv, Stream::kContext, {"context"}, block, true, CollectiveOp::kPermute, true, CollectiveOp::kPermute,
                   plan.overlap.context, c - 1);
  layer.Collective(ops::kContextDkv, Stream::kContext, {"context"}, block, false, CollectiveOp::kPermute, true, CollectiveOp::kPermute,
                   plan.overlap.context, c - 1);
}

}  // namespace shardsim::strategies
