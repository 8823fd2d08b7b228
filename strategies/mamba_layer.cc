#include "strategies/mamba_layer.h"

#include "strategies/elementwise_kernels.h"
#include "strategies/op_names.h"
#include "strategies/tensor_parallel.h"

namespace shardsim::strategies {

MambaWidths MambaWidthsOf(const ModelSpec& m, int64_t tensor) {
  const MambaSpec& s = *m.mamba;
  return {.inner = TensorShard(s.inner(), tensor), .bc = TensorShard(2 * s.groups * s.state_size, tensor), .heads = TensorShard(s.num_heads, tensor)};
}

void AppendMambaBlock(LayerBuilder& layer, const ModelSpec& m, const PlanSpec& plan) {
  const LayerShape& s = layer.shape();
  const MambaWidths w = MambaWidthsOf(m, plan.mesh.tensor);
  const double tokens = static_cast<double>(s.tokens), e = s.element_bytes, d = static_cast<double>(m.hidden_size);
  const double shard = tokens / (s.sequence_parallel ? static_cast<double>(s.tensor) : 1.0);
  const ElementwisePasses norm = NormPasses(m, plan, e);
  layer.Elementwise(ops::BlockNorm(ops::kMamba), norm.forward * shard * d * e, norm.BackwardFactor());
  AppendTensorEnter(layer, plan, ops::TensorEnter(ops::kMamba), m.hidden_size, /*several_products=*/false, /*fp8_products=*/true);
  AppendTensorRegather(layer, plan, ops::TensorEnter(ops::kMamba), m.hidden_size, /*fp8_products=*/true);
  layer.Matmul(ops::kMambaIn, s.tokens, m.hidden_size, w.in_proj());
  // The depthwise causal convolution and its SiLU over x, B and C: read and written once.
  layer.Elementwise(ops::kMambaConv, 2 * tokens * static_cast<double>(w.conv()) * e);
  // The scan reads x, B, C and dt and writes y; its FLOPs split over tensor with the heads and
  // groups.
  layer.Scan(ops::kSsd, tokens * MambaScanFlopsPerToken(m, s.seq_len) / static_cast<double>(plan.mesh.tensor),
             tokens * static_cast<double>(w.conv() + w.heads + w.inner) * e);
  // The gated RMSNorm: reads y and z, writes its output.
  layer.Elementwise(ops::kMambaGatedNorm, 3 * tokens * static_cast<double>(w.inner) * e);
  layer.Matmul(ops::kMambaOut, s.tokens, w.inner, m.hidden_size);
  AppendTensorExit(layer, plan, ops::TensorExit(ops::kMamba), m.hidden_size, /*fp8_products=*/true);
  layer.Elementwise(ops::BlockResidual(ops::kMamba), 3 * shard * d * e);
}

double MambaActivationBytesPerToken(const ModelSpec& m, const PlanSpec& p) {
  if (!m.mamba) return 0;
  const MambaWidths w = MambaWidthsOf(m, p.mesh.tensor);
  const double a = ActivationBytes(p.dtype), d = static_cast<double>(m.hidden_size);
  const double sp = p.sequence_parallel && !KeepsGatheredSequence(p) ? static_cast<double>(p.mesh.tensor) : 1.0;
  return a * (d / sp + static_cast<double>(w.in_proj() + 2 * w.inner));
}

}  // namespace shardsim::strategies
