// Multi-head latent attention (DeepSeek-V2, Liu et al. 2024, section 2.1; DeepSeek-V3's
// config.json names) in a StageModel: queries from a low-rank latent (q_lora_rank > 0: h W_qDown,
// RMSNorm, W_qUp) or straight from h (W_q); keys and values from one latent c = h W_kvDown, whose
// last qk_rope_head_dim columns are a key part shared by every head and carry the position
// (RoPE), the rest RMSNorm'd and projected up per head into k_nope and v. Each head attends with
// k = [k_nope, k_rope] at scale 1 / sqrt(qk_nope + qk_rope).
//
// Tensor parallelism follows the step program (strategies/tensor_parallel.cc): the down
// projections and latent norms are replicated over tensor, the up projections split by heads,
// the output projection by rows. A rank's backward sees only its heads, so the replicated
// tensors' gradients are partial sums over tensor (ParamTensor::tensor_partial).
// The latent norms run inside the program's q_down and kv_down ops (it lists no op of their own).
// The attention kernel takes one width per head: q, k and v are padded with zeros to the wider of
// the query/key and value widths (the scores and outputs are unchanged; the padding costs time).
#include <algorithm>
#include <cmath>
#include <optional>

#include "runtime/linear.h"
#include "runtime/rmsnorm.h"
#include "runtime/rope.h"
#include "runtime/stage_model.h"
#include "runtime/stage_model_saved.h"
#include "strategies/op_names.h"

namespace shardsim::runtime {

void StageModel::AddMla(const std::string& n, LayerIds& ids, float init_stddev) {
  const MlaSpec& a = *model_.mla;
  const int64_t d = hidden_, h = model_.num_heads, tr = tensor_rank_, qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
  const int64_t q_cols = h * qk, kv_cols = h * (a.qk_nope_head_dim + a.v_head_dim);
  auto replicated = [&](int id) {
    tensors_[static_cast<size_t>(id)].tensor_partial = true;  // summed over tensor (a rank's heads)
    return id;
  };
  if (a.q_lora_rank > 0) {
    ids.q_down = replicated(Add(n + "q_down", d, a.q_lora_rank, 0, d, 0, a.q_lora_rank, true, true, init_stddev));
    ids.q_norm = replicated(Add(n + "q_norm", 1, a.q_lora_rank, 0, 1, 0, a.q_lora_rank, true, false, 0));
    ids.q_up = Add(n + "q_up", a.q_lora_rank, q_cols, 0, a.q_lora_rank, tr * q_cols / t_, (tr + 1) * q_cols / t_, false, true, init_stddev);
  } else {
    ids.wq = Add(n + "wq", d, q_cols, 0, d, tr * q_cols / t_, (tr + 1) * q_cols / t_, false, true, init_stddev);
  }
  const int64_t down = a.kv_lora_rank + a.qk_rope_head_dim;
  ids.kv_down = replicated(Add(n + "kv_down", d, down, 0, d, 0, down, true, true, init_stddev));
  ids.kv_norm = replicated(Add(n + "kv_norm", 1, a.kv_lora_rank, 0, 1, 0, a.kv_lora_rank, true, false, 0));
  ids.kv_up = Add(n + "kv_up", a.kv_lora_rank, kv_cols, 0, a.kv_lora_rank, tr * kv_cols / t_, (tr + 1) * kv_cols / t_, false, true, init_stddev);
}

void StageModel::MlaForward(const LayerIds& id, const strategies::LayerProgram& lp, const std::string& label, LayerSaved& s, bool recompute) {
  namespace ops = strategies::ops;
  const MlaSpec& a = *model_.mla;
  const int T = static_cast<int>(tokens_), D = static_cast<int>(hidden_), H = static_cast<int>(heads_), Kp = static_cast<int>(attn_dim_);
  const int dn = static_cast<int>(a.qk_nope_head_dim), dr = static_cast<int>(a.qk_rope_head_dim), dv = static_cast<int>(a.v_head_dim);
  const int rq = static_cast<int>(a.q_lora_rank), rkv = static_cast<int>(a.kv_lora_rank), qk = dn + dr;
  std::optional<TraceSpan> span;
  auto op = [&](std::string_view n) { Begin(span, lp, label, recompute ? ops::Recomputed(n) : std::string(n)); };
  Buffer q(static_cast<size_t>(T) * H * qk);
  if (rq > 0) {
    op(ops::kQDown);
    s.cq.resize(static_cast<size_t>(T) * rq), s.rstd_q.resize(static_cast<size_t>(T)), s.cqn.resize(static_cast<size_t>(T) * rq);
    LinearForward(s.cq.data(), s.h_full.data(), P(id.q_down), T, D, rq);
    RmsNormForward(s.cqn.data(), s.rstd_q.data(), s.cq.data(), P(id.q_norm), T, rq, config_.norm_eps);
    op(ops::kQUp);
    LinearForward(q.data(), s.cqn.data(), P(id.q_up), T, rq, H * qk);
  } else {
    op(ops::kQ);
    LinearForward(q.data(), s.h_full.data(), P(id.wq), T, D, H * qk);
  }
  op(ops::kKvDown);
  Buffer ckv(static_cast<size_t>(T) * (rkv + dr)), kr(static_cast<size_t>(T) * dr);
  LinearForward(ckv.data(), s.h_full.data(), P(id.kv_down), T, D, rkv + dr);
  s.c.resize(static_cast<size_t>(T) * rkv), s.rstd_kv.resize(static_cast<size_t>(T)), s.cn.resize(static_cast<size_t>(T) * rkv);
  for (int t = 0; t < T; ++t) {
    const float* row = ckv.data() + static_cast<size_t>(t) * (rkv + dr);
    std::copy(row, row + rkv, s.c.begin() + static_cast<std::ptrdiff_t>(t) * rkv);
    std::copy(row + rkv, row + rkv + dr, kr.begin() + static_cast<std::ptrdiff_t>(t) * dr);
  }
  RmsNormForward(s.cn.data(), s.rstd_kv.data(), s.c.data(), P(id.kv_norm), T, rkv, config_.norm_eps);
  op(ops::kKvUp);
  Buffer kv(static_cast<size_t>(T) * H * (dn + dv));
  LinearForward(kv.data(), s.cn.data(), P(id.kv_up), T, rkv, H * (dn + dv));
  // Positions on the rope parts, then q, k, v per head padded to the kernel's width.
  Buffer qr(static_cast<size_t>(T) * H * dr);
  for (int t = 0; t < T; ++t) {
    for (int h = 0; h < H; ++h) {
      const float* from = q.data() + (static_cast<size_t>(t) * H + h) * qk + dn;
      std::copy(from, from + dr, qr.begin() + static_cast<std::ptrdiff_t>((static_cast<size_t>(t) * H + h) * dr));
    }
  }
  RopeForward(qr.data(), qr.data(), positions_.data(), T, H, dr, config_.rope_theta);
  RopeForward(kr.data(), kr.data(), positions_.data(), T, 1, dr, config_.rope_theta);
  s.q.assign(static_cast<size_t>(T) * H * Kp, 0.0f), s.k.assign(s.q.size(), 0.0f), s.v.assign(s.q.size(), 0.0f);
  for (int t = 0; t < T; ++t) {
    for (int h = 0; h < H; ++h) {
      const size_t row = static_cast<size_t>(t) * H + h;
      float* qo = s.q.data() + row * Kp;
      float* ko = s.k.data() + row * Kp;
      float* vo = s.v.data() + row * Kp;
      const float* qi = q.data() + row * qk;
      const float* kvi = kv.data() + row * (dn + dv);
      std::copy(qi, qi + dn, qo);
      std::copy(qr.data() + row * dr, qr.data() + (row + 1) * dr, qo + dn);
      std::copy(kvi, kvi + dn, ko);
      std::copy(kr.data() + static_cast<size_t>(t) * dr, kr.data() + static_cast<size_t>(t + 1) * dr, ko + dn);
      std::copy(kvi + dn, kvi + dn + dv, vo);
    }
  }
}

void StageModel::MlaBackward(const LayerIds& id, const strategies::LayerProgram& lp, const std::string& label, LayerSaved& s, const float* dq,
                             const float* dk, const float* dv, float* dh_full) {
  namespace ops = strategies::ops;
  const MlaSpec& a = *model_.mla;
  const int T = static_cast<int>(tokens_), D = static_cast<int>(hidden_), H = static_cast<int>(heads_), Kp = static_cast<int>(attn_dim_);
  const int dn = static_cast<int>(a.qk_nope_head_dim), dr = static_cast<int>(a.qk_rope_head_dim), dvw = static_cast<int>(a.v_head_dim);
  const int rq = static_cast<int>(a.q_lora_rank), rkv = static_cast<int>(a.kv_lora_rank), qk = dn + dr;
  std::optional<TraceSpan> span;
  auto op = [&](std::string_view n) { Begin(span, lp, label, n); };
  // Back from the padded heads: the query's and the up projection's gradients, the shared rope
  // key's summed over heads, the positions undone.
  Buffer dqq(static_cast<size_t>(T) * H * qk), dqr(static_cast<size_t>(T) * H * dr), dkv(static_cast<size_t>(T) * H * (dn + dvw));
  Buffer dkr(static_cast<size_t>(T) * dr, 0.0f);
  for (int t = 0; t < T; ++t) {
    for (int h = 0; h < H; ++h) {
      const size_t row = static_cast<size_t>(t) * H + h;
      const float *qi = dq + row * Kp, *ki = dk + row * Kp, *vi = dv + row * Kp;
      std::copy(qi, qi + dn, dqq.begin() + static_cast<std::ptrdiff_t>(row * qk));
      std::copy(qi + dn, qi + dn + dr, dqr.begin() + static_cast<std::ptrdiff_t>(row * dr));
      std::copy(ki, ki + dn, dkv.begin() + static_cast<std::ptrdiff_t>(row * (dn + dvw)));
      std::copy(vi, vi + dvw, dkv.begin() + static_cast<std::ptrdiff_t>(row * (dn + dvw) + dn));
      for (int j = 0; j < dr; ++j) dkr[static_cast<size_t>(t) * dr + j] += ki[dn + j];
    }
  }
  RopeBackward(dqr.data(), dqr.data(), positions_.data(), T, H, dr, config_.rope_theta);
  RopeBackward(dkr.data(), dkr.data(), positions_.data(), T, 1, dr, config_.rope_theta);
  for (size_t row = 0; row < static_cast<size_t>(T) * H; ++row) {
    std::copy(dqr.begin() + static_cast<std::ptrdiff_t>(row * dr), dqr.begin() + static_cast<std::ptrdiff_t>((row + 1) * dr),
              dqq.begin() + static_cast<std::ptrdiff_t>(row * qk + dn));
  }
  op(ops::Dgrad(ops::kKvUp));
  Buffer dcn(static_cast<size_t>(T) * rkv, 0.0f), dc(static_cast<size_t>(T) * rkv, 0.0f), dckv(static_cast<size_t>(T) * (rkv + dr));
  LinearBackward(dcn.data(), nullptr, dkv.data(), s.cn.data(), P(id.kv_up), T, rkv, H * (dn + dvw));
  WeightGrads(span, lp, label, ops::kKvUp, {{id.kv_up, s.cn.data(), dkv.data(), T, rkv, H * (dn + dvw)}}, s);
  op(ops::Dgrad(ops::kKvDown));
  RmsNormBackward(dc.data(), G(id.kv_norm), dcn.data(), s.c.data(), P(id.kv_norm), s.rstd_kv.data(), T, rkv);
  for (int t = 0; t < T; ++t) {
    std::copy(dc.begin() + static_cast<std::ptrdiff_t>(t) * rkv, dc.begin() + static_cast<std::ptrdiff_t>(t + 1) * rkv,
              dckv.begin() + static_cast<std::ptrdiff_t>(t) * (rkv + dr));
    std::copy(dkr.begin() + static_cast<std::ptrdiff_t>(t) * dr, dkr.begin() + static_cast<std::ptrdiff_t>(t + 1) * dr,
              dckv.begin() + static_cast<std::ptrdiff_t>(t) * (rkv + dr) + rkv);
  }
  LinearBackward(dh_full, nullptr, dckv.data(), s.h_full.data(), P(id.kv_down), T, D, rkv + dr);
  WeightGrads(span, lp, label, ops::kKvDown, {{id.kv_down, s.h_full.data(), dckv.data(), T, D, rkv + dr}}, s);
  if (rq > 0) {
    op(ops::Dgrad(ops::kQUp));
    Buffer dcqn(static_cast<size_t>(T) * rq, 0.0f), dcq(static_cast<size_t>(T) * rq, 0.0f);
    LinearBackward(dcqn.data(), nullptr, dqq.data(), s.cqn.data(), P(id.q_up), T, rq, H * qk);
    WeightGrads(span, lp, label, ops::kQUp, {{id.q_up, s.cqn.data(), dqq.data(), T, rq, H * qk}}, s);
    op(ops::Dgrad(ops::kQDown));
    RmsNormBackward(dcq.data(), G(id.q_norm), dcqn.data(), s.cq.data(), P(id.q_norm), s.rstd_q.data(), T, rq);
    LinearBackward(dh_full, nullptr, dcq.data(), s.h_full.data(), P(id.q_down), T, D, rq);
    WeightGrads(span, lp, label, ops::kQDown, {{id.q_down, s.h_full.data(), dcq.data(), T, D, rq}}, s);
  } else {
    op(ops::Dgrad(ops::kQ));
    LinearBackward(dh_full, nullptr, dqq.data(), s.h_full.data(), P(id.wq), T, D, H * qk);
    WeightGrads(span, lp, label, ops::kQ, {{id.wq, s.h_full.data(), dqq.data(), T, D, H * qk}}, s);
  }
}

}  // namespace shardsim::runtime
