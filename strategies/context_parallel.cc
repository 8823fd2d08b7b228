#include "strategies/context_parallel.h"

namespace shardsim::strategies {

void AppendRingAttentionTransfers(LayerBuilder& layer, const PlanSpec& plan, int64_t kv_width) {
  const int64_t c = plan.mesh.context;
  if (c == 1) return;
  const LayerShape& s = layer.shape();
  const double block = static_cast<double>(s.tokens) * static_cast<double>(kv_width) * s.element_bytes;
  if (plan.context_kv == "all-gather") {
    layer.Collective("cp_kv_allgather", Stream::kContext, {"context"}, block * static_cast<double>(c), true, CollectiveOp::kAllGather, true,
                     CollectiveOp::kReduceScatter, plan.overlap.context);
    return;
  }
  layer.Collective("cp_kv", Stream::kContext, {"context"}, block, true, CollectiveOp::kPermute, true, CollectiveOp::kPermute,
                   plan.overlap.context, c - 1);
  layer.Collective("cp_dkv", Stream::kContext, {"context"}, block, false, CollectiveOp::kPermute, true, CollectiveOp::kPermute,
                   plan.overlap.context, c - 1);
}

}  // namespace shardsim::strategies
