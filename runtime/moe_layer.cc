#include "runtime/moe_layer.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "runtime/linear.h"
#include "runtime/moe_dispatch.h"
#include "runtime/moe_tensor.h"
#include "runtime/router.h"
#include "runtime/swiglu.h"
#include "strategies/op_names.h"

namespace shardsim::runtime {
namespace {

size_t Size(int64_t a, int64_t b) { return static_cast<size_t>(a) * static_cast<size_t>(b); }

}  // namespace

MoeLayer::MoeLayer(const ModelSpec& model, MeshComms& comms, float aux_coeff) : comms_(comms) {
  SHARDSIM_CHECK(model.moe.has_value(), "an MoE model");
  d_ = model.hidden_size;
  e_ = model.moe->num_experts;
  k_ = model.moe->top_k;
  tensor_ = comms.GroupSize({"tensor"});
  SHARDSIM_CHECK(model.moe->expert_ffn_hidden_size % tensor_ == 0, "tensor must divide the expert width");
  fe_ = model.moe->expert_ffn_hidden_size / tensor_;
  fs_ = model.moe->num_shared_experts * fe_;
  ranks_ = comms.GroupSize({"expert"});
  SHARDSIM_CHECK(e_ % ranks_ == 0, "expert must divide the experts");
  local_experts_ = e_ / ranks_;
  first_expert_ = comms.GroupRank({"expert"}) * local_experts_;
  aux_coeff_ = aux_coeff;
}

void MoeLayer::Exchange(std::vector<float>& out, const std::vector<float>& in, const MoeSaved& s, bool reverse, const std::string& what) {
  std::vector<int> send(s.send_counts), receive(s.receive_counts);
  if (reverse) std::swap(send, receive);
  int64_t total = 0;
  for (int& c : send) c *= static_cast<int>(d_);
  for (int& c : receive) c *= static_cast<int>(d_), total += c;
  out.resize(static_cast<size_t>(total));
  comms_.AllToAllV(out.data(), receive, in.data(), send, {"expert"}, what);
}

void MoeLayer::ToExpertMajor(std::vector<std::vector<float>>& per_expert, const std::vector<float>& received, const std::vector<int>& table) {
  const int64_t blocks = static_cast<int64_t>(table.size()) / local_experts_;
  per_expert.assign(static_cast<size_t>(local_experts_), {});
  // Each expert's rows allocated once, at their size (kept for backward: no growth slack).
  for (int64_t el = 0; el < local_experts_; ++el) {
    size_t rows = 0;
    for (int64_t src = 0; src < blocks; ++src) rows += static_cast<size_t>(table[static_cast<size_t>(src * local_experts_ + el)]);
    per_expert[static_cast<size_t>(el)].reserve(rows * static_cast<size_t>(d_));
  }
  size_t at = 0;
  for (int64_t src = 0; src < blocks; ++src) {
    for (int64_t el = 0; el < local_experts_; ++el) {
      const size_t n = Size(table[static_cast<size_t>(src * local_experts_ + el)], d_);
      std::vector<float>& dst = per_expert[static_cast<size_t>(el)];
      dst.insert(dst.end(), received.begin() + static_cast<std::ptrdiff_t>(at), received.begin() + static_cast<std::ptrdiff_t>(at + n));
      at += n;
    }
  }
}

void MoeLayer::FromExpertMajor(std::vector<float>& received, const std::vector<std::vector<float>>& per_expert, const std::vector<int>& table) {
  const int64_t blocks = static_cast<int64_t>(table.size()) / local_experts_;
  received.clear();
  std::vector<size_t> taken(static_cast<size_t>(local_experts_), 0);
  for (int64_t src = 0; src < blocks; ++src) {
    for (int64_t el = 0; el < local_experts_; ++el) {
      const size_t n = Size(table[static_cast<size_t>(src * local_experts_ + el)], d_);
      const std::vector<float>& rows = per_expert[static_cast<size_t>(el)];
      size_t& from = taken[static_cast<size_t>(el)];
      received.insert(received.end(), rows.begin() + static_cast<std::ptrdiff_t>(from), rows.begin() + static_cast<std::ptrdiff_t>(from + n));
      from += n;
    }
  }
}

double MoeLayer::Forward(float* y, const float* h, int t, int64_t batch_tokens, double weight, const MoeWeights& w, MoeSaved& s,
                         const std::function<void(std::string_view)>& op, const std::string& where) {
  namespace ops = strategies::ops;
  const int D = static_cast<int>(d_), E = static_cast<int>(e_), K = static_cast<int>(k_), Fe = static_cast<int>(fe_), Fs = static_cast<int>(fs_);
  const int n = t * K;
  op(ops::kRouter);
  std::vector<float> logits(Size(t, E));
  LinearForward(logits.data(), h, w.router, t, D, E);
  s.probs.resize(Size(t, E));
  s.top.resize(static_cast<size_t>(n));
  s.sent_rows = n;
  s.gates.resize(static_cast<size_t>(n));
  RouterForward(s.probs.data(), s.top.data(), s.gates.data(), logits.data(), t, E, K);
  // The balancing loss counts the whole micro-batch: tensor (sequence parallel) and context ranks
  // hold its other tokens.
  s.counts.resize(static_cast<size_t>(E));
  RouterExpertCounts(s.counts.data(), s.top.data(), t, E, K);
  std::vector<double> counts(s.counts.begin(), s.counts.end());
  if (comms_.GroupSize({"tensor", "context"}) > 1) op(ops::kRouterCounts);
  comms_.AllReduceSum(counts.data(), E, {"tensor", "context"}, where + " router counts all-reduce");
  for (int e = 0; e < E; ++e) s.counts[static_cast<size_t>(e)] = static_cast<int64_t>(counts[static_cast<size_t>(e)] + 0.5);
  const double aux = weight * RouterAuxLoss(s.probs.data(), s.counts.data(), t, E, K, static_cast<double>(batch_tokens), aux_coeff_);

  op(ops::kMoePermute);
  s.offsets.resize(static_cast<size_t>(E) + 1);
  s.assignments.resize(static_cast<size_t>(n));
  BuildExpertDispatch(s.offsets.data(), s.assignments.data(), s.top.data(), t, E, K);
  std::vector<float> rows(Size(n, D));
  DispatchGatherForward(rows.data(), h, s.assignments.data(), n, K, D);
  if (ranks_ > 1) op(ops::kExpertDispatch);
  // Rows per expert, told to the expert ranks so that they know what arrives.
  std::vector<int> per_expert(static_cast<size_t>(E));
  for (int e = 0; e < E; ++e) per_expert[static_cast<size_t>(e)] = s.offsets[static_cast<size_t>(e) + 1] - s.offsets[static_cast<size_t>(e)];
  s.expert_rows.assign(static_cast<size_t>(E), 0);
  comms_.AllToAll(s.expert_rows.data(), per_expert.data(), static_cast<int>(local_experts_), {"expert"}, where + " expert row counts all-to-all");
  s.send_counts.assign(static_cast<size_t>(ranks_), 0);
  s.receive_counts.assign(static_cast<size_t>(ranks_), 0);
  for (int64_t r = 0; r < ranks_; ++r) {
    for (int64_t el = 0; el < local_experts_; ++el) {
      s.send_counts[static_cast<size_t>(r)] += per_expert[static_cast<size_t>(r * local_experts_ + el)];
      s.receive_counts[static_cast<size_t>(r)] += s.expert_rows[static_cast<size_t>(r * local_experts_ + el)];
    }
  }
  received_rows_.push_back(std::accumulate(s.expert_rows.begin(), s.expert_rows.end(), int64_t{0}));
  std::vector<float> received, all;
  Exchange(received, rows, s, false, where + " expert dispatch all-to-all");
  s.tensor_rows = s.expert_rows;
  if (tensor_ > 1) {
    op(ops::kTensorEnterExperts);
    s.tensor_rows = GatherRowTable(comms_, s.expert_rows, where + " expert row counts over tensor");
    AllGatherRows(comms_, all, received, s.tensor_rows, ranks_ * local_experts_, d_, where + " expert rows all-gather over tensor");
  }
  op(ops::kExpertsSort);
  ToExpertMajor(s.x, tensor_ > 1 ? all : received, s.tensor_rows);

  const size_t le = static_cast<size_t>(local_experts_);
  s.g.assign(le, {}), s.u.assign(le, {}), s.act.assign(le, {});
  std::vector<std::vector<float>> out(le);
  op(ops::kExpertsUp);
  for (size_t el = 0; el < le; ++el) {
    const int rows_e = static_cast<int>(s.x[el].size() / Size(1, D));
    s.g[el].resize(Size(rows_e, Fe)), s.u[el].resize(Size(rows_e, Fe)), s.act[el].resize(Size(rows_e, Fe));
    LinearForward(s.g[el].data(), s.x[el].data(), w.gate[el], rows_e, D, Fe);
    LinearForward(s.u[el].data(), s.x[el].data(), w.up[el], rows_e, D, Fe);
  }
  op(ops::kExpertsActivation);
  for (size_t el = 0; el < le; ++el) SwigluForward(s.act[el].data(), s.g[el].data(), s.u[el].data(), static_cast<int>(s.g[el].size() / Size(1, Fe)), Fe);
  op(ops::kExpertsDown);
  for (size_t el = 0; el < le; ++el) {
    const int rows_e = static_cast<int>(s.act[el].size() / Size(1, Fe));
    out[el].resize(Size(rows_e, D));
    LinearForward(out[el].data(), s.act[el].data(), w.down[el], rows_e, Fe, D);
  }
  op(ops::kExpertsUnsort);
  FromExpertMajor(tensor_ > 1 ? all : received, out, s.tensor_rows);
  if (tensor_ > 1) {
    op(ops::kTensorExitExperts);
    ReduceScatterRows(comms_, received, all, s.tensor_rows, ranks_ * local_experts_, d_, where + " expert rows reduce-scatter over tensor");
  }
  if (ranks_ > 1) op(ops::kExpertCombine);
  Exchange(s.expert_out, received, s, true, where + " expert combine all-to-all");
  op(ops::kMoeCombine);
  std::fill(y, y + Size(t, D), 0.0f);
  CombineForward(y, s.expert_out.data(), s.gates.data(), s.assignments.data(), n, K, D);
  // The pass's scratch and all-to-all buffers, all alive here (released on return).
  MemoryHold scratch(account_, MemoryCategory::kBuffers);
  scratch.Set(HeldBytes(logits, rows, received, all) + HeldBytes(out) + HeldBytes(per_expert));
  if (Fs > 0) {
    // The shared experts as a dense MLP split over tensor: every token's input gathered, the
    // partial outputs reduce-scattered back to each rank's tokens.
    const int T = t * static_cast<int>(tensor_);
    const float* x = h;
    if (tensor_ > 1) {
      op(ops::TensorEnter(ops::kSharedExpert));
      s.shared_h.resize(Size(T, D));
      comms_.AllGather(s.shared_h.data(), h, int64_t{t} * D, {"tensor"}, where + " shared expert input all-gather");
      x = s.shared_h.data();
    }
    op(ops::BlockUp(ops::kSharedExpert));
    s.shared_gate.resize(Size(T, Fs)), s.shared_up.resize(Size(T, Fs)), s.shared_act.resize(Size(T, Fs));
    LinearForward(s.shared_gate.data(), x, w.shared_gate, T, D, Fs);
    LinearForward(s.shared_up.data(), x, w.shared_up, T, D, Fs);
    op(ops::BlockActivation(ops::kSharedExpert));
    SwigluForward(s.shared_act.data(), s.shared_gate.data(), s.shared_up.data(), T, Fs);
    op(ops::BlockDown(ops::kSharedExpert));
    std::vector<float> shared(Size(T, D)), mine;
    scratch.Set(scratch.bytes() + HeldBytes(shared));
    LinearForward(shared.data(), s.shared_act.data(), w.shared_down, T, Fs, D);
    if (tensor_ > 1) {
      op(ops::TensorExit(ops::kSharedExpert));
      mine.resize(Size(t, D));
      comms_.ReduceScatterSum(mine.data(), shared.data(), int64_t{t} * D, {"tensor"}, where + " shared expert output reduce-scatter");
      shared.swap(mine);
    }
    op(ops::kMoeCombine);
    for (size_t i = 0; i < Size(t, D); ++i) y[i] += shared[i];
  }
  return aux;
}

void MoeLayer::Backward(float* dh, const float* dy, const float* h, int t, int64_t batch_tokens, double weight, const MoeWeights& w,
                        const MoeWeights& dw, MoeSaved& s, const std::function<void(std::string_view)>& op, const WeightGradFn& weight_grad,
                        const std::string& where) {
  namespace ops = strategies::ops;
  const int D = static_cast<int>(d_), E = static_cast<int>(e_), K = static_cast<int>(k_), Fe = static_cast<int>(fe_), Fs = static_cast<int>(fs_);
  const int n = t * K;
  MemoryHold scratch(account_, MemoryCategory::kBuffers);  // the pass's scratch and all-to-all buffers
  if (Fs > 0) {
    const std::string block(ops::kSharedExpert);
    const int T = t * static_cast<int>(tensor_);
    const float* x = tensor_ > 1 ? s.shared_h.data() : h;
    std::vector<float> dact(Size(T, Fs), 0.0f), dg(Size(T, Fs)), du(Size(T, Fs)), dy_all, dx_all;
    const float* g = dy;
    float* dx = dh;
    if (tensor_ > 1) {
      // The output's reduce-scatter backward: every token's gradient gathered.
      op(ops::Grad(ops::TensorExit(block)));
      dy_all.resize(Size(T, D));
      comms_.AllGather(dy_all.data(), dy, int64_t{t} * D, {"tensor"}, where + " shared expert output gradient all-gather");
      dx_all.assign(Size(T, D), 0.0f);
      g = dy_all.data(), dx = dx_all.data();
    }
    scratch.SetTo(dact, dg, du, dy_all, dx_all);
    op(ops::Dgrad(ops::BlockDown(block)));
    LinearBackward(dact.data(), nullptr, g, s.shared_act.data(), w.shared_down, T, Fs, D);
    weight_grad(ops::BlockDown(block), dw.shared_down, s.shared_act.data(), g, T, Fs, D);
    op(ops::Grad(ops::BlockActivation(block)));
    SwigluBackward(dg.data(), du.data(), dact.data(), s.shared_gate.data(), s.shared_up.data(), T, Fs);
    op(ops::Dgrad(ops::BlockUp(block)));
    LinearBackward(dx, nullptr, dg.data(), x, w.shared_gate, T, D, Fs);
    LinearBackward(dx, nullptr, du.data(), x, w.shared_up, T, D, Fs);
    weight_grad(ops::BlockUp(block), dw.shared_gate, x, dg.data(), T, D, Fs);
    weight_grad(ops::BlockUp(block), dw.shared_up, x, du.data(), T, D, Fs);
    if (tensor_ > 1) {
      // The input's all-gather backward: the partial input gradients summed to each rank's tokens.
      op(ops::Grad(ops::TensorEnter(block)));
      std::vector<float> mine(Size(t, D));
      comms_.ReduceScatterSum(mine.data(), dx_all.data(), int64_t{t} * D, {"tensor"}, where + " shared expert input gradient reduce-scatter");
      for (size_t i = 0; i < mine.size(); ++i) dh[i] += mine[i];
    }
  }
  op(ops::Grad(ops::kMoeCombine));
  std::vector<float> d_out(Size(n, D)), d_gates(static_cast<size_t>(n), 0.0f);
  CombineBackward(d_out.data(), d_gates.data(), dy, s.expert_out.data(), s.gates.data(), s.assignments.data(), n, K, D);
  if (ranks_ > 1) op(ops::Grad(ops::kExpertCombine));
  std::vector<float> received, all;
  Exchange(received, d_out, s, false, where + " expert combine gradient all-to-all");
  if (tensor_ > 1) {
    op(ops::Grad(ops::kTensorExitExperts));
    AllGatherRows(comms_, all, received, s.tensor_rows, ranks_ * local_experts_, d_, where + " expert output gradient all-gather over tensor");
  }
  std::vector<std::vector<float>> d_per;
  op(ops::Grad(ops::kExpertsUnsort));
  ToExpertMajor(d_per, tensor_ > 1 ? all : received, s.tensor_rows);
  const size_t le = static_cast<size_t>(local_experts_);
  std::vector<std::vector<float>> dx(le), dact(le), dg(le), du(le);
  auto rows_of = [&](size_t el) { return static_cast<int>(s.x[el].size() / Size(1, D)); };
  op(ops::Dgrad(ops::kExpertsDown));
  for (size_t el = 0; el < le; ++el) {
    dact[el].assign(Size(rows_of(el), Fe), 0.0f);
    LinearBackward(dact[el].data(), nullptr, d_per[el].data(), s.act[el].data(), w.down[el], rows_of(el), Fe, D);
  }
  for (size_t el = 0; el < le; ++el) weight_grad(ops::kExpertsDown, dw.down[el], s.act[el].data(), d_per[el].data(), rows_of(el), Fe, D);
  op(ops::Grad(ops::kExpertsActivation));
  for (size_t el = 0; el < le; ++el) {
    dg[el].resize(Size(rows_of(el), Fe)), du[el].resize(Size(rows_of(el), Fe));
    SwigluBackward(dg[el].data(), du[el].data(), dact[el].data(), s.g[el].data(), s.u[el].data(), rows_of(el), Fe);
  }
  op(ops::Dgrad(ops::kExpertsUp));
  for (size_t el = 0; el < le; ++el) {
    dx[el].assign(Size(rows_of(el), D), 0.0f);
    LinearBackward(dx[el].data(), nullptr, dg[el].data(), s.x[el].data(), w.gate[el], rows_of(el), D, Fe);
    LinearBackward(dx[el].data(), nullptr, du[el].data(), s.x[el].data(), w.up[el], rows_of(el), D, Fe);
  }
  for (size_t el = 0; el < le; ++el) {
    weight_grad(ops::kExpertsUp, dw.gate[el], s.x[el].data(), dg[el].data(), rows_of(el), D, Fe);
    weight_grad(ops::kExpertsUp, dw.up[el], s.x[el].data(), du[el].data(), rows_of(el), D, Fe);
  }
  op(ops::Grad(ops::kExpertsSort));
  FromExpertMajor(tensor_ > 1 ? all : received, dx, s.tensor_rows);
  if (tensor_ > 1) {
    op(ops::Grad(ops::kTensorEnterExperts));
    ReduceScatterRows(comms_, received, all, s.tensor_rows, ranks_ * local_experts_, d_, where + " expert input gradient reduce-scatter over tensor");
  }
  if (ranks_ > 1) op(ops::Grad(ops::kExpertDispatch));
  std::vector<float> d_rows;
  Exchange(d_rows, received, s, true, where + " expert dispatch gradient all-to-all");
  op(ops::Grad(ops::kMoePermute));
  DispatchGatherBackward(dh, d_rows.data(), s.assignments.data(), n, K, D);
  op(ops::Dgrad(ops::kRouter));
  std::vector<float> d_logits(Size(t, E), 0.0f);
  RouterGatesBackward(d_logits.data(), d_gates.data(), s.top.data(), s.gates.data(), t, E, K);
  RouterAuxLossBackward(d_logits.data(), s.probs.data(), s.counts.data(), t, E, K, static_cast<double>(batch_tokens),
                        static_cast<float>(aux_coeff_ * weight));
  LinearBackward(dh, nullptr, d_logits.data(), h, w.router, t, D, E);
  weight_grad(ops::kRouter, dw.router, h, d_logits.data(), t, D, E);
  // Every buffer of the routed part is still alive here: the pass's largest point.
  scratch.Set(std::max(scratch.bytes(), HeldBytes(d_out, d_gates, received, d_rows, d_logits, all) + HeldBytes(d_per, dx, dact, dg, du)));
}

}  // namespace shardsim::runtime
