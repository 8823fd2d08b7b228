#include "strategies/mamba_layer.h"

#include <algorithm>

#include "strategies/elementwise_kernels.h"
#include "strategies/op_names.h"
#include "strategies/tensor_parallel.h"

namespace shardsim::strategies {

MambaWidths MambaWidthsOf(const ModelSpec& m, int64_t tensor) {
  const MambaSpec& s = *m.mamba;
  return {.inner = TensorShard(s.inner(), tensor), .bc = TensorShard(2 * s.groups * s.state_size, tensor), .heads = TensorShard(s.num_heads, tensor)};
}

int64_t MambaScannedGroups(const ModelSpec& m, int64_t tensor, int64_t context) { return std::max(TensorShard(m.mamba->groups, tensor), context); }

MambaWidths MambaScannedWidthsOf(const ModelSpec& m, int64_t tensor, int64_t context) {
  MambaWidths w = MambaWidthsOf(m, tensor);
  w.bc = 2 * MambaScannedGroups(m, tensor, context) * m.mamba->state_size;
  return w;
}

void AppendMambaBlock(LayerBuilder& layer, const ModelSpec& m, const PlanSpec& plan) {
  const LayerShape& s = layer.shape();
  const int64_t t = plan.mesh.tensor, c = plan.mesh.context;
  const MambaWidths w = MambaWidthsOf(m, t), scanned = MambaScannedWidthsOf(m, t, c);
  const double tokens = static_cast<double>(s.tokens), e = s.element_bytes, d = static_cast<double>(m.hidden_size);
  const double shard = tokens / (s.sequence_parallel ? static_cast<double>(s.tensor) : 1.0);
  const ElementwisePasses norm = NormPasses(m, plan, e);
  layer.Elementwise(ops::BlockNorm(ops::kMamba), norm.forward * shard * d * e, norm.BackwardFactor());
  AppendTensorEnter(layer, plan, ops::TensorEnter(ops::kMamba), m.hidden_size, /*several_products=*/false, /*fp8_products=*/true);
  AppendTensorRegather(layer, plan, ops::TensorEnter(ops::kMamba), m.hidden_size, /*fp8_products=*/true);
  layer.Matmul(ops::kMambaIn, s.tokens, m.hidden_size, w.in_proj());
  // Context parallelism (Megatron-core's core/ssm/mamba_context_parallel.py pre_conv_ssm): z, x,
  // B, C (with their copies) and dt go by five all-to-alls from this rank's tokens to whole
  // sequences of its share of the heads; around them three passes over the projection's width:
  // each tensor's split and concatenation into the all-to-all's layout, their concatenation after
  // (B and C repeated on the way), and undoing the attention's load-balanced token order. The
  // backward sends the gradients the other way through the same copies.
  const auto to_heads = [&](std::string_view name, int64_t width, int64_t count) {
    layer.Collective(name, Stream::kContext, {"context"}, tokens * static_cast<double>(width) * e, true, CollectiveOp::kAllToAll, true,
                     CollectiveOp::kAllToAll, /*overlapped=*/false, count);
  };
  if (c > 1) {
    layer.Elementwise(ops::kMambaContextLayout, 3 * 2 * tokens * static_cast<double>(scanned.in_proj()) * e, 1.0);
    to_heads(ops::kMambaZxToHeads, w.inner, 2);
    to_heads(ops::kMambaBcToHeads, scanned.bc / 2, 2);
    to_heads(ops::kMambaDtToHeads, w.heads, 1);
  }
  // The depthwise causal convolution and its SiLU over x, B and C: read and written once.
  layer.Elementwise(ops::kMambaConv, 2 * tokens * static_cast<double>(scanned.conv()) * e);
  // The scan reads x, B, C and dt and writes y; its FLOPs split over tensor with the heads and
  // groups (and over context with the heads, each copy of a group costing its own C B^T).
  const double copies = static_cast<double>(MambaScannedGroups(m, t, c) - TensorShard(m.mamba->groups, t));
  layer.Scan(ops::kSsd, tokens * (MambaScanFlopsPerToken(m, s.seq_len) / static_cast<double>(t) + copies * MambaGroupScanFlopsPerToken(m, s.seq_len)),
             tokens * static_cast<double>(scanned.conv() + w.heads + w.inner) * e);
  // post_conv_ssm: y back to this rank's tokens, behind two passes (the load-balanced order redone,
  // the split and concatenation out of the all-to-all's layout).
  if (c > 1) {
    to_heads(ops::kMambaToSequence, w.inner, 1);
    layer.Elementwise(ops::kMambaContextLayout, 2 * 2 * tokens * static_cast<double>(w.inner) * e, 1.0);
  }
  // The gated RMSNorm: reads y and z, writes its output.
  layer.Elementwise(ops::kMambaGatedNorm, 3 * tokens * static_cast<double>(w.inner) * e);
  layer.Matmul(ops::kMambaOut, s.tokens, w.inner, m.hidden_size);
  AppendTensorExit(layer, plan, ops::TensorExit(ops::kMamba), m.hidden_size, /*fp8_products=*/true);
  layer.Elementwise(ops::BlockResidual(ops::kMamba), 3 * shard * d * e);
}

double MambaActivationBytesPerToken(const ModelSpec& m, const PlanSpec& p) {
  if (!m.mamba) return 0;
  const MambaWidths w = MambaScannedWidthsOf(m, p.mesh.tensor, p.mesh.context);
  const double a = ActivationBytes(p.dtype), d = static_cast<double>(m.hidden_size);
  const double sp = p.sequence_parallel && !KeepsGatheredSequence(p) ? static_cast<double>(p.mesh.tensor) : 1.0;
  return a * (d / sp + static_cast<double>(w.in_proj() + 3 * w.inner));
}

}  // namespace shardsim::strategies
