// One transformer layer of a StageModel, forward and backward, as the step program lists its
// ops: attention (ring attention over context), the MLP or MoE block, the tensor-parallel
// collectives around them, recomputation. The chunk-level passes are in stage_model.cc.
#include <algorithm>
#include <cmath>
#include <optional>

#include "core/error.h"
#include "runtime/attention.h"
#include "runtime/linear.h"
#include "runtime/ring_attention.h"
#include "runtime/gelu.h"
#include "runtime/norm.h"
#include "runtime/rope.h"
#include "runtime/stage_model.h"
#include "runtime/stage_model_saved.h"
#include "runtime/swiglu.h"
#include "strategies/op_keys.h"
#include "strategies/op_names.h"

namespace shardsim::runtime {

void StageModel::KeepShard(Buffer& full, Buffer& shard, const Buffer& local) const {
  if (!sp_ || keeps_gathered_) return;
  shard.assign(local.begin(), local.end());
  Buffer().swap(full);
}

void StageModel::Regather(std::optional<TraceSpan>& span, const strategies::LayerProgram& layer, const std::string& label, std::string_view enter,
                          Buffer& full, Buffer& shard) {
  if (!sp_ || keeps_gathered_) return;
  full.resize(static_cast<size_t>(tokens_ * hidden_));
  Tensor(span, layer, label, strategies::ops::Grad(strategies::ops::Regather(enter)), full.data(), shard.data());
  Buffer().swap(shard);
}

void StageModel::LayerForward(int64_t layer, float* x, LayerSaved& s, bool recompute) {
  namespace ops = strategies::ops;
  const LayerIds& id = layer_ids_.at(layer);
  const strategies::LayerProgram& lp = LayerProgramOf(layer);
  const std::string label = strategies::DecoderLayer(layer);
  const int T = static_cast<int>(tokens_), Tl = static_cast<int>(local_tokens_), D = static_cast<int>(hidden_);
  const int K = static_cast<int>(model_.head_dim), Hl = static_cast<int>(heads_), Gl = static_cast<int>(kv_heads_), F = static_cast<int>(ffn_);
  const std::string where = "layer " + std::to_string(layer);
  std::optional<TraceSpan> span;
  // A recomputation (full recompute before backward) runs the same ops under their R names.
  auto name = [&](std::string_view n) { return recompute ? ops::Recomputed(n) : std::string(n); };
  auto op = [&](std::string_view n) { Begin(span, lp, label, name(n)); };
  auto tensor = [&](std::string_view n, float* out, float* in) { Tensor(span, lp, label, name(n), out, in); };
  s.x.assign(x, x + static_cast<size_t>(Tl) * D);
  op(ops::kAttentionNorm);
  Buffer h(static_cast<size_t>(Tl) * D);
  s.rstd1.resize(static_cast<size_t>(Tl));
  if (id.attn_norm_b >= 0) s.mean1.resize(static_cast<size_t>(Tl));
  NormForward(model_.norm, h.data(), s.mean1.data(), s.rstd1.data(), x, P(id.attn_norm), id.attn_norm_b >= 0 ? P(id.attn_norm_b) : nullptr, Tl, D,
              config_.norm_eps);
  s.h_full.resize(static_cast<size_t>(T) * D);
  tensor(ops::kTensorEnterAttention, s.h_full.data(), h.data());
  if (model_.mla) {
    span.reset();
    MlaForward(id, lp, label, s, recompute);
  } else {
    op(ops::kQkv);
    s.q.resize(static_cast<size_t>(T) * Hl * K);
    s.k.resize(static_cast<size_t>(T) * Gl * K);
    s.v.resize(static_cast<size_t>(T) * Gl * K);
    LinearForward(s.q.data(), s.h_full.data(), P(id.wq), T, D, Hl * K);
    LinearForward(s.k.data(), s.h_full.data(), P(id.wk), T, D, Gl * K);
    LinearForward(s.v.data(), s.h_full.data(), P(id.wv), T, D, Gl * K);
    if (id.bq >= 0) {
      AddRowBias(s.q.data(), P(id.bq), T, Hl * K);
      AddRowBias(s.k.data(), P(id.bk), T, Gl * K);
      AddRowBias(s.v.data(), P(id.bv), T, Gl * K);
    }
    if (model_.position == PositionKind::kRope) {
      RopeForward(s.q.data(), s.q.data(), positions_.data(), T, Hl, K, config_.rope_theta);
      RopeForward(s.k.data(), s.k.data(), positions_.data(), T, Gl, K, config_.rope_theta);
    }
  }
  KeepShard(s.h_full, s.h, h);
  AttentionCore(span, lp, label, s, recompute);
  const int Vw = Hl * static_cast<int>(out_dim_);  // the attention output's width
  if (model_.mla) {
    // The padded heads' value columns.
    const size_t Kp = static_cast<size_t>(attn_dim_), dv = static_cast<size_t>(out_dim_);
    s.o_v.resize(static_cast<size_t>(T) * static_cast<size_t>(Vw));
    for (size_t row = 0; row < static_cast<size_t>(T) * static_cast<size_t>(Hl); ++row) {
      std::copy(s.o.begin() + static_cast<std::ptrdiff_t>(row * Kp), s.o.begin() + static_cast<std::ptrdiff_t>(row * Kp + dv),
                s.o_v.begin() + static_cast<std::ptrdiff_t>(row * dv));
    }
  }
  const float* o = model_.mla ? s.o_v.data() : s.o.data();
  op(ops::kAttentionOut);
  Buffer partial(static_cast<size_t>(T) * D);
  LinearForward(partial.data(), o, P(id.wo), T, Vw, D);
  Buffer y(static_cast<size_t>(T) * D);
  tensor(ops::kTensorExitAttention, y.data(), partial.data());
  op(ops::kAttentionResidual);
  if (id.bo >= 0) AddRowBias(y.data(), P(id.bo), Tl, D);  // after the reduction: once per token
  s.x2.resize(static_cast<size_t>(Tl) * D);
  for (size_t i = 0; i < s.x2.size(); ++i) s.x2[i] = x[i] + y[i];

  op(id.moe ? std::string(ops::kMoeNorm) : ops::BlockNorm(ops::kMlp));
  Buffer h2(static_cast<size_t>(Tl) * D);
  // The layer's scratch, all alive from here to the end (released on return).
  MemoryHold scratch(account_, MemoryCategory::kBuffers, HeldBytes(h, partial, y, h2));
  s.rstd2.resize(static_cast<size_t>(Tl));
  if (id.mlp_norm_b >= 0) s.mean2.resize(static_cast<size_t>(Tl));
  NormForward(model_.norm, h2.data(), s.mean2.data(), s.rstd2.data(), s.x2.data(), P(id.mlp_norm), id.mlp_norm_b >= 0 ? P(id.mlp_norm_b) : nullptr, Tl, D,
              config_.norm_eps);
  if (id.moe) {
    // The MoE block reads and writes this rank's tokens: its tensor ops are its own (moe_layer.h).
    s.h2_full.assign(h2.begin(), h2.end());
    const double aux = moe_->Forward(y.data(), s.h2_full.data(), Tl, plan_.micro_batch_size * plan_.seq_len, aux_weight_, MoePointers(id, false), s.moe,
                                     op, where);
    if (!recompute) aux_loss_ += aux;
  } else {
    s.h2_full.resize(static_cast<size_t>(T) * D);
    tensor(ops::TensorEnter(ops::kMlp), s.h2_full.data(), h2.data());
    op(ops::BlockUp(ops::kMlp));
    const bool gated = id.wgate >= 0;  // SwiGLU; else GELU (GPT)
    if (gated) s.gate.resize(static_cast<size_t>(T) * F);
    s.up.resize(static_cast<size_t>(T) * F);
    s.act.resize(static_cast<size_t>(T) * F);
    if (gated) LinearForward(s.gate.data(), s.h2_full.data(), P(id.wgate), T, D, F);
    LinearForward(s.up.data(), s.h2_full.data(), P(id.wup), T, D, F);
    KeepShard(s.h2_full, s.h2, h2);
    if (id.bup >= 0) AddRowBias(s.up.data(), P(id.bup), T, F);
    op(ops::BlockActivation(ops::kMlp));
    if (gated) {
      SwigluForward(s.act.data(), s.gate.data(), s.up.data(), T, F);
    } else {
      GeluForward(s.act.data(), s.up.data(), static_cast<int64_t>(T) * F);
    }
    op(ops::BlockDown(ops::kMlp));
    LinearForward(partial.data(), s.act.data(), P(id.wdown), T, F, D);
    tensor(ops::TensorExit(ops::kMlp), y.data(), partial.data());
  }
  op(id.moe ? std::string(ops::kMoeCombine) : ops::BlockResidual(ops::kMlp));
  if (id.bdown >= 0) AddRowBias(y.data(), P(id.bdown), Tl, D);
  for (size_t i = 0; i < s.x2.size(); ++i) x[i] = s.x2[i] + y[i];
  // What backward will recompute is not kept: with full recomputation only the layer's input,
  // with selective the attention core's output and statistics. Until then the whole layer's
  // tensors exist (the caller counts what stays).
  if (account_ != nullptr && !recompute && plan_.recompute != Recompute::kNone) {
    // The layer's routed rows are held with its bytes (the account notes them at a peak).
    const RoutedRows rows = s.moe.Routed(hidden_);
    account_->AddRoutedRows(rows);
    account_->Transient(MemoryCategory::kActivations, s.Bytes());
    account_->AddRoutedRows({-rows.received, -rows.sent});
  }
  if (!recompute && plan_.recompute == Recompute::kFull) {
    LayerSaved input;
    input.x = std::move(s.x);
    s = std::move(input);
  } else if (!recompute && plan_.recompute == Recompute::kSelective) {
    Buffer().swap(s.o);
    Buffer().swap(s.lse);
  }
}

void StageModel::AttentionCore(std::optional<TraceSpan>& span, const strategies::LayerProgram& lp, const std::string& label, LayerSaved& s,
                               bool recompute) {
  namespace ops = strategies::ops;
  auto name = [&](std::string_view n) { return recompute ? ops::Recomputed(n) : std::string(n); };
  const int T = static_cast<int>(tokens_), K = static_cast<int>(attn_dim_), Hl = static_cast<int>(heads_), Gl = static_cast<int>(attn_kv_heads_);
  Begin(span, lp, label, name(ops::kAttention));
  const int S = static_cast<int>(plan_.seq_len / c_);
  const AttentionShape shape{static_cast<int>(plan_.micro_batch_size), S, S, Hl, Gl, K};
  s.o.resize(static_cast<size_t>(T) * Hl * K);
  s.lse.resize(static_cast<size_t>(plan_.micro_batch_size * Hl * S));
  const float scale = attn_scale_;
  if (c_ > 1) {
    const double start = tracer_ ? tracer_->Now() : 0;
    const RingAttentionStats stats =
        RingAttentionForward(s.o.data(), s.lse.data(), s.q.data(), s.k.data(), s.v.data(), seq_positions_.data(), shape, true, scale, comms_,
                             RingPass{RingWork::kComputeAndTransfers, {}, &ring_workspace_});
    RingTransfers(lp, label, {name(ops::kContextKv)}, start, stats.comm_wait_s);
  } else {
    AttentionForward(s.o.data(), s.lse.data(), s.q.data(), s.k.data(), s.v.data(), shape, true, scale);
  }
  ring_hold_.Set(ring_workspace_.bytes());
}


void StageModel::RingTransfers(const strategies::LayerProgram& layer, const std::string& label, std::initializer_list<std::string_view> names,
                               double start_s, double wait_s) {
  if (!tracer_) return;
  // The ring's transfers run inside the attention kernel's span: their unhidden waits, measured
  // per pass, become the first op's event (the others' are folded into it) and leave compute.
  bool first = true;
  for (std::string_view name : names) {
    SHARDSIM_CHECK(FindOp(layer, name) != nullptr, "the runtime ran " + Key(label, name) + ", which the step program does not list");
    tracer_->Record(Key(label, name), "context", start_s, start_s + (first ? wait_s : 0.0));
    first = false;
  }
  tracer_->Reassign("compute", "context", wait_s);
}

void StageModel::LayerBackward(int64_t layer, float* dx, LayerSaved& s) {
  namespace ops = strategies::ops;
  const LayerIds& id = layer_ids_.at(layer);
  const strategies::LayerProgram& lp = LayerProgramOf(layer);
  const std::string label = strategies::DecoderLayer(layer);
  const int T = static_cast<int>(tokens_), Tl = static_cast<int>(local_tokens_), D = static_cast<int>(hidden_);
  const int K = static_cast<int>(model_.head_dim), Hl = static_cast<int>(heads_), Gl = static_cast<int>(kv_heads_), F = static_cast<int>(ffn_);
  const std::string where = "layer " + std::to_string(layer) + " backward";
  std::optional<TraceSpan> span;
  auto op = [&](std::string_view name) { Begin(span, lp, label, name); };
  // dx holds d(out); out = x2 + mlp(x2): dx flows to x2 and through the MLP.
  op(id.moe ? ops::Grad(ops::kMoeCombine) : ops::Grad(ops::BlockResidual(ops::kMlp)));
  if (id.bdown >= 0) AddColumnSums(G(id.bdown), dx, Tl, D);
  Buffer dx2(dx, dx + static_cast<size_t>(Tl) * D);
  Buffer dfull(static_cast<size_t>(T) * D);
  if (!id.moe) Tensor(span, lp, label, ops::Grad(ops::TensorExit(ops::kMlp)), dfull.data(), dx);
  Buffer dh2_full(static_cast<size_t>(T) * D, 0.0f);
  // The layer's scratch at its largest points: the MLP's, then the attention's (released on return).
  MemoryHold scratch(account_, MemoryCategory::kBuffers, HeldBytes(dx2, dfull, dh2_full));
  if (id.moe) {
    auto weight_grad = [&](std::string_view name, float* dw, const float* x, const float* dy, int t, int in, int out) {
      if (defer_weights_) {
        s.deferred.push_back({std::string(name), dw, x, Buffer(dy, dy + static_cast<size_t>(t) * static_cast<size_t>(out)), t, in, out});
        return;
      }
      op(ops::Wgrad(name));
      LinearBackward(nullptr, dw, dy, x, nullptr, t, in, out);
    };
    // On this rank's tokens, as the forward (its tensor ops are its own).
    moe_->Backward(dh2_full.data(), dx, s.h2_full.data(), Tl, plan_.micro_batch_size * plan_.seq_len, aux_weight_, MoePointers(id, false),
                   MoePointers(id, true), s.moe, op, weight_grad, where);
  } else {
    op(ops::Dgrad(ops::BlockDown(ops::kMlp)));
    const bool gated = id.wgate >= 0;
    Buffer dact(static_cast<size_t>(T) * F, 0.0f), dgate(gated ? static_cast<size_t>(T) * F : 0), dup(static_cast<size_t>(T) * F);
    scratch.Set(HeldBytes(dx2, dfull, dh2_full) + HeldBytes(dact, dgate, dup));
    LinearBackward(dact.data(), nullptr, dfull.data(), s.act.data(), P(id.wdown), T, F, D);
    WeightGrads(span, lp, label, ops::BlockDown(ops::kMlp), {{id.wdown, s.act.data(), dfull.data(), T, F, D}}, s);
    op(ops::Grad(ops::BlockActivation(ops::kMlp)));
    if (gated) {
      SwigluBackward(dgate.data(), dup.data(), dact.data(), s.gate.data(), s.up.data(), T, F);
    } else {
      GeluBackward(dup.data(), dact.data(), s.up.data(), static_cast<int64_t>(T) * F);
    }
    Regather(span, lp, label, ops::TensorEnter(ops::kMlp), s.h2_full, s.h2);
    op(ops::Dgrad(ops::BlockUp(ops::kMlp)));
    if (gated) LinearBackward(dh2_full.data(), nullptr, dgate.data(), s.h2_full.data(), P(id.wgate), T, D, F);
    LinearBackward(dh2_full.data(), nullptr, dup.data(), s.h2_full.data(), P(id.wup), T, D, F);
    if (id.bup >= 0) AddColumnSums(G(id.bup), dup.data(), T, F);
    if (gated) {
      WeightGrads(span, lp, label, ops::BlockUp(ops::kMlp),
                  {{id.wgate, s.h2_full.data(), dgate.data(), T, D, F}, {id.wup, s.h2_full.data(), dup.data(), T, D, F}}, s);
    } else {
      WeightGrads(span, lp, label, ops::BlockUp(ops::kMlp), {{id.wup, s.h2_full.data(), dup.data(), T, D, F}}, s);
    }
  }
  Buffer dh2(static_cast<size_t>(Tl) * D);
  if (id.moe) {
    std::copy(dh2_full.begin(), dh2_full.begin() + static_cast<std::ptrdiff_t>(dh2.size()), dh2.begin());
  } else {
    Tensor(span, lp, label, ops::Grad(ops::TensorEnter(ops::kMlp)), dh2.data(), dh2_full.data());
  }
  op(id.moe ? ops::Grad(ops::kMoeNorm) : ops::Grad(ops::BlockNorm(ops::kMlp)));
  NormBackward(model_.norm, dx2.data(), G(id.mlp_norm), id.mlp_norm_b >= 0 ? G(id.mlp_norm_b) : nullptr, dh2.data(), s.x2.data(), P(id.mlp_norm),
               s.mean2.data(), s.rstd2.data(), Tl, D);

  // x2 = x + attention(x): dx2 flows to both.
  Tensor(span, lp, label, ops::Grad(ops::kTensorExitAttention), dfull.data(), dx2.data());
  op(ops::Dgrad(ops::kAttentionOut));
  if (id.bo >= 0) AddColumnSums(G(id.bo), dx2.data(), Tl, D);
  const int Vw = Hl * static_cast<int>(out_dim_);
  const float* o = model_.mla ? s.o_v.data() : s.o.data();
  Buffer d_ov(static_cast<size_t>(T) * static_cast<size_t>(Vw), 0.0f);
  LinearBackward(d_ov.data(), nullptr, dfull.data(), o, P(id.wo), T, Vw, D);
  WeightGrads(span, lp, label, ops::kAttentionOut, {{id.wo, o, dfull.data(), T, Vw, D}}, s);
  op(ops::Grad(ops::kAttention));
  // The kernel's per-head width (MLA: padded, mla_attention.cc).
  const int Ka = static_cast<int>(attn_dim_), Ga = static_cast<int>(attn_kv_heads_);
  Buffer d_o;
  if (model_.mla) {
    d_o.assign(static_cast<size_t>(T) * Hl * Ka, 0.0f);
    for (size_t row = 0; row < static_cast<size_t>(T) * static_cast<size_t>(Hl); ++row) {
      std::copy(d_ov.begin() + static_cast<std::ptrdiff_t>(row * out_dim_), d_ov.begin() + static_cast<std::ptrdiff_t>((row + 1) * out_dim_),
                d_o.begin() + static_cast<std::ptrdiff_t>(row * static_cast<size_t>(Ka)));
    }
  } else {
    d_o.swap(d_ov);
  }
  const int S = static_cast<int>(plan_.seq_len / c_);
  const AttentionShape shape{static_cast<int>(plan_.micro_batch_size), S, S, Hl, Ga, Ka};
  Buffer dq(static_cast<size_t>(T) * Hl * Ka, 0.0f), dk(static_cast<size_t>(T) * Ga * Ka, 0.0f), dv(static_cast<size_t>(T) * Ga * Ka, 0.0f);
  const float scale = attn_scale_;
  if (c_ > 1) {
    const double start = tracer_ ? tracer_->Now() : 0;
    const RingAttentionStats stats = RingAttentionBackward(dq.data(), dk.data(), dv.data(), s.q.data(), s.k.data(), s.v.data(), s.o.data(),
                                                           d_o.data(), s.lse.data(), seq_positions_.data(), shape, true, scale, comms_,
                                                           RingPass{RingWork::kComputeAndTransfers, {}, &ring_workspace_});
    RingTransfers(lp, label, {ops::Grad(ops::kContextKv), ops::Grad(ops::kContextDkv)}, start, stats.comm_wait_s);
    ring_hold_.Set(ring_workspace_.bytes());
  } else {
    AttentionBackward(dq.data(), dk.data(), dv.data(), s.q.data(), s.k.data(), s.v.data(), s.o.data(), d_o.data(), s.lse.data(), shape, true, scale);
  }
  Buffer dh_full(static_cast<size_t>(T) * D, 0.0f);
  Regather(span, lp, label, ops::kTensorEnterAttention, s.h_full, s.h);
  if (model_.mla) {
    span.reset();
    MlaBackward(id, lp, label, s, dq.data(), dk.data(), dv.data(), dh_full.data());
  } else {
    if (model_.position == PositionKind::kRope) {
      RopeBackward(dq.data(), dq.data(), positions_.data(), T, Hl, K, config_.rope_theta);
      RopeBackward(dk.data(), dk.data(), positions_.data(), T, Gl, K, config_.rope_theta);
    }
    op(ops::Dgrad(ops::kQkv));
    if (id.bq >= 0) {
      AddColumnSums(G(id.bq), dq.data(), T, Hl * K);
      AddColumnSums(G(id.bk), dk.data(), T, Gl * K);
      AddColumnSums(G(id.bv), dv.data(), T, Gl * K);
    }
    LinearBackward(dh_full.data(), nullptr, dq.data(), s.h_full.data(), P(id.wq), T, D, Hl * K);
    LinearBackward(dh_full.data(), nullptr, dk.data(), s.h_full.data(), P(id.wk), T, D, Gl * K);
    LinearBackward(dh_full.data(), nullptr, dv.data(), s.h_full.data(), P(id.wv), T, D, Gl * K);
    WeightGrads(span, lp, label, ops::kQkv,
                {{id.wq, s.h_full.data(), dq.data(), T, D, Hl * K}, {id.wk, s.h_full.data(), dk.data(), T, D, Gl * K},
                 {id.wv, s.h_full.data(), dv.data(), T, D, Gl * K}},
                s);
  }
  Buffer dh(static_cast<size_t>(Tl) * D);
  scratch.Set(std::max(scratch.bytes(), HeldBytes(dx2, dfull, dh2_full, dh2, d_o, dq) + HeldBytes(dk, dv, dh_full, dh)));
  Tensor(span, lp, label, ops::Grad(ops::kTensorEnterAttention), dh.data(), dh_full.data());
  op(ops::Grad(ops::kAttentionNorm));
  NormBackward(model_.norm, dx2.data(), G(id.attn_norm), id.attn_norm_b >= 0 ? G(id.attn_norm_b) : nullptr, dh.data(), s.x.data(), P(id.attn_norm),
               s.mean1.data(), s.rstd1.data(), Tl, D);
  op(ops::Grad(ops::kAttentionResidual));
  std::copy(dx2.begin(), dx2.end(), dx);
}

}  // namespace shardsim::runtime
