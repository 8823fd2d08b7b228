#include "strategies/context_parallel.h"

#include "strategies/op_names.h"

namespace shardsim::strategies {

void AppendRingAttentionTransfers(LayerBuilder& layer, const PlanSpec& plan, int64_t kv_width) {
  const int64_t c = plan.mesh.context;
  if (c == 1) return;
  const LayerShape& s = layer.shape();
  const double block = static_cast<double>(s.tokens) * static_cast<double>(kv_width) * s.element_bytes;
  if (plan.context_kv == "all-gather") {
    layer.Collective(ops::kContextKvAllGather, Stream::kContext, {"context"}, block * static_cast<double>(c), true, CollectiveOp::kAllGather, true,
                     CollectiveOp::kReduceScatter, plan.overlap.context);
    return;
  }
  layer.Collective(ops::kContextKv, Stream::kContext, {"context"}, block, true, CollectiveOp::kPermute, true, CollectiveOp::kPermute,
                   plan.overlap.context, c - 1);
  layer.Collective(ops::kContextDkv, Stream::kContext, {"context"}, block, false, CollectiveOp::kPermute, true, CollectiveOp::kPermute,
                   plan.overlap.context, c - 1);
}

}  // namespace shardsim::strategies
