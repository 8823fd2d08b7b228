#include "strategies/layer_builder.h"

#include "strategies/op_names.h"

namespace shardsim::strategies {

void LayerBuilder::Matmul(std::string_view name, int64_t m, int64_t k, int64_t n, bool expert_weight) {
  const double e = shape_.element_bytes;
  const double md = static_cast<double>(m), kd = static_cast<double>(k), nd = static_cast<double>(n);
  Op f = ComputeOp(std::string(name), Phase::kForward, ComputeKind::kMatmul, 2 * md * kd * nd, (md * kd + kd * nd + md * nd) * e);
  f.m = m, f.n = n, f.k = k;
  f.weight_cast_share = expert_weight ? shape_.expert_weight_cast_forward : shape_.weight_cast_forward;
  Op b = f;  // dX[m,k] = dY[m,n] x W^T[n,k]
  b.name = ops::Dgrad(name);
  b.phase = Phase::kBackwardInput;
  b.m = m, b.n = k, b.k = n;
  b.weight_cast_share = expert_weight ? shape_.expert_weight_cast_backward : shape_.weight_cast_backward;
  Op w = f;  // dW[k,n] = X^T[k,m] x dY[m,n]
  w.name = ops::Wgrad(name);
  w.phase = Phase::kBackwardWeight;
  w.m = k, w.n = n, w.k = m;
  w.weight_cast_share = 1;
  w.sixteen_bit = shape_.sixteen_bit_wgrad;
  pieces_.push_back({{f}, {b}, {w}});
}

void LayerBuilder::SixteenBitMatmul(std::string_view name, int64_t m, int64_t k, int64_t n) {
  Matmul(name, m, k, n);
  if (!shape_.fp8) return;
  Piece& piece = pieces_.back();
  for (std::vector<Op>* ops : {&piece.forward, &piece.backward_input, &piece.backward_weight}) {
    for (Op& op : *ops) op.sixteen_bit = true;
  }
}

void LayerBuilder::Elementwise(std::string_view name, double bytes, double backward_factor) {
  Op f = ComputeOp(std::string(name), Phase::kForward, ComputeKind::kElementwise, 0, bytes);
  Op b = f;
  b.name = ops::Grad(name);
  b.phase = Phase::kBackwardInput;
  b.bytes = bytes * backward_factor;
  pieces_.push_back({{f}, {b}, {}});
}

void LayerBuilder::Attention(std::string_view name, double flops, double bytes) {
  Op f = ComputeOp(std::string(name), Phase::kForward, ComputeKind::kAttention, flops, bytes);
  Op b = f;
  b.name = ops::Grad(name);
  b.phase = Phase::kBackwardInput;
  b.flops = 2 * flops;  // dQ, dK, dV, dP: four matmuls against the forward's two
  b.bytes = 2 * bytes;
  pieces_.push_back({{f}, {b}, {}});
}

void LayerBuilder::Scan(std::string_view name, double flops, double bytes) {
  Op f = ComputeOp(std::string(name), Phase::kForward, ComputeKind::kScan, flops, bytes);
  Op b = f;
  b.name = ops::Grad(name);
  b.phase = Phase::kBackwardInput;
  b.flops = 2 * flops;
  b.bytes = 2 * bytes;
  pieces_.push_back({{f}, {b}, {}});
}

void LayerBuilder::Collective(std::string_view name, Stream stream, std::vector<std::string> axes, double bytes,
                              bool has_forward, CollectiveOp forward, bool has_backward, CollectiveOp backward, bool overlapped,
                              int64_t repeat) {
  Piece piece;
  for (int64_t i = 0; i < repeat; ++i) {
    if (has_forward) piece.forward.push_back(CommOp(std::string(name), Phase::kForward, stream, forward, axes, bytes, overlapped));
    if (has_backward) piece.backward_input.push_back(CommOp(ops::Grad(name), Phase::kBackwardInput, stream, backward, axes, bytes, overlapped));
  }
  pieces_.push_back(std::move(piece));
}

void LayerBuilder::Collective(std::string_view name, Stream stream, std::vector<std::string> axes, double forward_bytes, CollectiveOp forward,
                              double backward_bytes, CollectiveOp backward, bool overlapped, TokenRouting routing, int64_t comm_units) {
  Piece piece;
  piece.forward.push_back(CommOp(std::string(name), Phase::kForward, stream, forward, axes, forward_bytes, overlapped));
  piece.backward_input.push_back(CommOp(ops::Grad(name), Phase::kBackwardInput, stream, backward, std::move(axes), backward_bytes, overlapped));
  piece.forward.back().routing = piece.backward_input.back().routing = routing;
  piece.forward.back().comm_units = piece.backward_input.back().comm_units = comm_units;
  pieces_.push_back(std::move(piece));
}

void LayerBuilder::Raw(Op op) {
  Piece piece;
  if (op.phase == Phase::kForward) {
    piece.forward.push_back(std::move(op));
  } else if (op.phase == Phase::kBackwardWeight) {
    piece.backward_weight.push_back(std::move(op));
  } else {
    piece.backward_input.push_back(std::move(op));
  }
  pieces_.push_back(std::move(piece));
}

LayerProgram LayerBuilder::Build() const {
  LayerProgram layer{kind_, {}};
  for (const Piece& p : pieces_) layer.ops.insert(layer.ops.end(), p.forward.begin(), p.forward.end());
  for (auto it = pieces_.rbegin(); it != pieces_.rend(); ++it) layer.ops.insert(layer.ops.end(), it->backward_input.begin(), it->backward_input.end());
  for (auto it = pieces_.rbegin(); it != pieces_.rend(); ++it) layer.ops.insert(layer.ops.end(), it->backward_weight.begin(), it->backward_weight.end());
  return layer;
}

}  // namespace shardsim::strategies
