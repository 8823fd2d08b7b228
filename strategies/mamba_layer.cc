#include "strategies/mamba_layer.h"

#include <algorithm>

#include "strategies/elementwise_kernels.h"
#include "strategies/op_names.h"
#include "strategies/tensor_parallel.h"

namespace shardsim::strategies {

MambaWidths MambaWidthsOf(const ModelSpec& m, int64_t tensor, int64_t context) {
  const MambaSpec& s = *m.mamba;
  const int64_t groups = std::max(TensorShard(s.groups, tensor), context);  // with their copies (plan_rules.cc)
  return {.inner = TensorShard(s.inner(), tensor), .bc = 2 * groups * s.state_size, .heads = TensorShard(s.num_heads, tensor)};
}

void AppendMambaBlock(LayerBuilder& layer, const ModelSpec& m, const PlanSpec& plan) {
  const LayerShape& s = layer.shape();
  const int64_t t = plan.mesh.tensor, c = plan.mesh.context;
  const MambaWidths w = MambaWidthsOf(m, t), scanned = MambaWidthsOf(m, t, c);
  const double tokens = static_cast<double>(s.tokens), e = s.element_bytes, d = static_cast<double>(m.hidden_size);
  const double shard = tokens / (s.sequence_parallel ? static_cast<double>(s.tensor) : 1.0);
  const ElementwisePasses norm = NormPasses(m, plan, e);
  layer.Elementwise(ops::BlockNorm(ops::kMamba), norm.forward * shard * d * e, norm.BackwardFactor());
  AppendTensorEnter(layer, plan, ops::TensorEnter(ops::kMamba), m.hidden_size, /*several_products=*/false, /*fp8_products=*/true);
  AppendTensorRegather(layer, plan, ops::TensorEnter(ops::kMamba), m.hidden_size, /*fp8_products=*/true);
  layer.Matmul(ops::kMambaIn, s.tokens, m.hidden_size, w.in_proj());
  // Context parallelism (Megatron-core's core/ssm/mamba_context_parallel.py): z, x, B, C and dt,
  // B and C repeated where the groups are fewer than the context ranks, go from this rank's
  // tokens to the whole sequences of its share of the heads (all-to-alls, each behind a copy into
  // its layout), and the scan's output comes back; the backward sends their gradients the other
  // way. Every rank scans as many (token, channel) pairs as without.
  if (c > 1) {
    layer.Elementwise(ops::kMambaContextLayout, 2 * tokens * static_cast<double>(scanned.in_proj() + w.inner) * e, 1.0);
    layer.Collective(ops::kMambaToHeads, Stream::kContext, {"context"}, tokens * static_cast<double>(scanned.in_proj()) * e, true, CollectiveOp::kAllToAll,
                     true, CollectiveOp::kAllToAll, /*overlapped=*/false);
  }
  // The depthwise causal convolution and its SiLU over x, B and C: read and written once.
  layer.Elementwise(ops::kMambaConv, 2 * tokens * static_cast<double>(scanned.conv()) * e);
  // The scan reads x, B, C and dt and writes y; its FLOPs split over tensor with the heads and
  // groups (and over context with the heads, each copy of a group costing its own).
  const double group_copies = static_cast<double>(scanned.bc - w.bc) / static_cast<double>(2 * m.mamba->state_size);
  layer.Scan(ops::kSsd, tokens * (MambaScanFlopsPerToken(m, s.seq_len) / static_cast<double>(t) + group_copies * MambaGroupScanFlopsPerToken(m, s.seq_len)),
             tokens * static_cast<double>(scanned.conv() + w.heads + w.inner) * e);
  if (c > 1) {
    layer.Collective(ops::kMambaToSequence, Stream::kContext, {"context"}, tokens * static_cast<double>(w.inner) * e, true, CollectiveOp::kAllToAll, true,
                     CollectiveOp::kAllToAll, /*overlapped=*/false);
  }
  // The gated RMSNorm: reads y and z, writes its output.
  layer.Elementwise(ops::kMambaGatedNorm, 3 * tokens * static_cast<double>(w.inner) * e);
  layer.Matmul(ops::kMambaOut, s.tokens, w.inner, m.hidden_size);
  AppendTensorExit(layer, plan, ops::TensorExit(ops::kMamba), m.hidden_size, /*fp8_products=*/true);
  layer.Elementwise(ops::BlockResidual(ops::kMamba), 3 * shard * d * e);
}

double MambaActivationBytesPerToken(const ModelSpec& m, const PlanSpec& p) {
  if (!m.mamba) return 0;
  const MambaWidths w = MambaWidthsOf(m, p.mesh.tensor, p.mesh.context);
  const double a = ActivationBytes(p.dtype), d = static_cast<double>(m.hidden_size);
  const double sp = p.sequence_parallel && !KeepsGatheredSequence(p) ? static_cast<double>(p.mesh.tensor) : 1.0;
  // Under context parallelism the scan keeps its output over its heads and the gated norm its
  // input over the tokens: two tensors where one serves both without.
  const int64_t outputs = p.mesh.context > 1 ? 3 : 2;
  return a * (d / sp + static_cast<double>(w.in_proj() + outputs * w.inner));
}

}  // namespace shardsim::strategies
