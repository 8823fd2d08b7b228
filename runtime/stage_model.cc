#include "runtime/stage_model.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/error.h"
#include "runtime/attention.h"
#include "runtime/cross_entropy.h"
#include "runtime/embedding.h"
#include "runtime/init.h"
#include "runtime/linear.h"
#include "runtime/ring_attention.h"
#include "runtime/rmsnorm.h"
#include "runtime/rope.h"
#include "runtime/swiglu.h"
#include "strategies/schedule.h"
#include "strategies/stage_layout.h"

namespace shardsim::runtime {

using Buffer = std::vector<float>;

// What one layer's backward needs from its forward (T tokens of the micro-batch, Tl held).
// A weight gradient left for the W task (zero-bubble schedules): dW += x^T dy.
struct StageModel::Deferred {
  int weight = -1;
  const float* x = nullptr;  // a buffer of the layer's saved activations
  Buffer dy;
  int t = 0, in = 0, out = 0;
};

struct StageModel::LayerSaved {
  Buffer x, rstd1, h_full, q, k, v, o, lse, x2, rstd2, h2_full, gate, up, act;
  MoeSaved moe;
  std::vector<Deferred> deferred;
};

struct StageModel::Saved {
  std::vector<LayerSaved> layers;
  std::vector<int32_t> ids;     // the tokens this rank embeds (its share with SP)
  Buffer final_x, final_rstd, final_h, dlogits;  // last part
};

void CheckRuntimeSupports(const ModelSpec& m, const PlanSpec& p) {
  auto refuse = [](const std::string& where, const std::string& what, const std::string& valid) {
    throw InputError(where, what + ": the runtime does not implement it yet", valid, "plan and estimate it with shardsim plan / estimate instead");
  };
  if (m.mla) refuse("model", "multi-head latent attention", "grouped-query attention");
  if (m.moe && p.mesh.tensor > 1) refuse("plan:/mesh/tensor", "tensor parallelism of MoE layers", "tensor 1 with MoE models (expert, data, fsdp, context, pipeline)");
  if (m.linear_bias || m.qkv_bias) refuse("model", "linear biases", "bias-free linears (LLaMA)");
  if (m.mlp != MlpKind::kSwiGlu) refuse("model/mlp", "a GELU MLP", "swiglu");
  if (m.norm != NormKind::kRmsNorm) refuse("model/norm", "LayerNorm", "rmsnorm");
  if (m.position != PositionKind::kRope) refuse("model/position", "learned positions", "rope");
  if (m.num_heads * m.head_dim != m.hidden_size) refuse("model/head_dim", "head_dim x heads != hidden_size", "head_dim = hidden_size / heads");
  if (m.vocab_size < 256) refuse("model/vocab_size", "a vocabulary smaller than the 256 bytes of the byte-level corpus", "256 or more");
  if (m.head_dim % 2 != 0) refuse("model/head_dim", "an odd head_dim (RoPE rotates pairs)", "an even head_dim");
  if (m.ffn_hidden_size % p.mesh.tensor != 0) refuse("plan:/mesh/tensor", "tensor not dividing ffn_hidden_size", "a divisor of ffn_hidden_size");
  if (m.tied_embeddings && p.mesh.pipeline > 1) {
    const strategies::StageLayout layout = strategies::LayOut(m, p);
    const auto& path = layout.paths.front();
    if (path.front().first != path.back().first) refuse("model/tied_embeddings", "tied embeddings across pipeline stages", "untied, or the embedding and loss on one stage (zbv)");
  }
  if (p.zero_stage == 2 && p.mesh.fsdp > 1) {
    refuse("plan:/zero_stage", "ZeRO-2 with fsdp > 1 (gradients and parameters sharded over different groups)", "0, 1 or 3 with fsdp");
  }
  if (strategies::ScheduleOf(p).Directions(p.mesh.pipeline) > 1) {
    refuse("plan:/pipeline_schedule", p.pipeline_schedule + " (two model copies per stage)", "schedules with one direction: gpipe, 1f1b, interleaved-1f1b, zb-h1, zbv");
  }
}

StageModel::StageModel(const strategies::StepProgram& program, MeshComms& comms, const ArchitectureConfig& config, uint64_t seed)
    : model_(program.model), plan_(program.plan), comms_(comms), config_(config), program_(program) {
  const ModelSpec& model = model_;
  const PlanSpec& plan = plan_;
  CheckRuntimeSupports(model, plan);
  stage_ = comms.Coordinate("pipeline");
  tensor_rank_ = comms.Coordinate("tensor");
  t_ = plan.mesh.tensor;
  sp_ = plan.sequence_parallel && t_ > 1;
  // Context parallelism: each context rank holds S / c tokens of every sequence, two zigzag
  // chunks (ring_attention.h), so causal work is even; attention runs around the context ring.
  c_ = plan.mesh.context;
  seq_positions_ = SequencePositions(c_ > 1 ? SequenceLayout::kZigzag : SequenceLayout::kContiguous, plan.seq_len, c_, comms.Coordinate("context"));
  tokens_ = plan.micro_batch_size * plan.seq_len / c_;
  local_tokens_ = sp_ ? tokens_ / t_ : tokens_;
  hidden_ = model.hidden_size;
  heads_ = model.num_heads / t_;
  kv_heads_ = model.num_kv_heads / t_;
  ffn_ = model.ffn_hidden_size / t_;
  SHARDSIM_CHECK(model.ffn_hidden_size % t_ == 0, "tensor must divide the MLP width");
  if (model.moe) moe_ = std::make_unique<MoeLayer>(model, comms, config.router_aux_coeff);
  for (int64_t b = 0; b < plan.micro_batch_size; ++b) positions_.insert(positions_.end(), seq_positions_.begin(), seq_positions_.end());

  const int64_t d = hidden_, k = model.head_dim, q_cols = model.num_heads * k, kv_cols = model.num_kv_heads * k, f = model.ffn_hidden_size;
  const int64_t tr = tensor_rank_;
  // Output projections scaled down with depth (GPT-2's 1/sqrt(2L)).
  const float out_stddev = config.init_stddev / std::sqrt(2.0f * static_cast<float>(model.num_layers));
  for (const strategies::ChunkLayout& layout : program.layout.at[static_cast<size_t>(stage_)]) {
    chunk_buckets_.emplace_back();
    if (layout.embedding) {
      NewBucket("embedding", false);
      embedding_bucket_ = static_cast<int>(buckets_.size()) - 1;
      embedding_ = Add("embedding", model.vocab_size, d, 0, model.vocab_size, 0, d, true, true, config.init_stddev);
    }
    for (int64_t l = layout.first_layer; l < layout.first_layer + layout.layers; ++l) {
      const std::string n = "layer" + std::to_string(l) + ".";
      NewBucket("layer" + std::to_string(l), false);
      layer_buckets_[l].push_back(static_cast<int>(buckets_.size()) - 1);
      LayerIds ids;
      ids.attn_norm = Add(n + "attn_norm", 1, d, 0, 1, 0, d, true, false, 0);
      ids.wq = Add(n + "wq", d, q_cols, 0, d, tr * q_cols / t_, (tr + 1) * q_cols / t_, false, true, config.init_stddev);
      ids.wk = Add(n + "wk", d, kv_cols, 0, d, tr * kv_cols / t_, (tr + 1) * kv_cols / t_, false, true, config.init_stddev);
      ids.wv = Add(n + "wv", d, kv_cols, 0, d, tr * kv_cols / t_, (tr + 1) * kv_cols / t_, false, true, config.init_stddev);
      ids.wo = Add(n + "wo", q_cols, d, tr * q_cols / t_, (tr + 1) * q_cols / t_, 0, d, false, true, out_stddev);
      ids.mlp_norm = Add(n + "mlp_norm", 1, d, 0, 1, 0, d, true, false, 0);
      if (IsMoeLayer(model, l)) {
        // Router and shared experts: dense (replicated over expert); the routed experts this
        // expert rank holds: their own bucket, sharded over expert.
        const int64_t e = model.moe->num_experts, fe = model.moe->expert_ffn_hidden_size, fs = model.moe->num_shared_experts * fe;
        ids.moe = true;
        ids.router = Add(n + "router", d, e, 0, d, 0, e, true, true, config.init_stddev);
        if (fs > 0) {
          ids.shared_gate = Add(n + "shared_gate", d, fs, 0, d, 0, fs, true, true, config.init_stddev);
          ids.shared_up = Add(n + "shared_up", d, fs, 0, d, 0, fs, true, true, config.init_stddev);
          ids.shared_down = Add(n + "shared_down", fs, d, 0, fs, 0, d, true, true, out_stddev);
        }
        NewBucket("layer" + std::to_string(l) + ".experts", true);
        layer_buckets_[l].push_back(static_cast<int>(buckets_.size()) - 1);
        for (int64_t x = moe_->first_expert(); x < moe_->first_expert() + moe_->local_experts(); ++x) {
          const std::string ex = n + "expert" + std::to_string(x) + ".";
          ids.expert_gate.push_back(Add(ex + "wgate", d, fe, 0, d, 0, fe, true, true, config.init_stddev));
          ids.expert_up.push_back(Add(ex + "wup", d, fe, 0, d, 0, fe, true, true, config.init_stddev));
          ids.expert_down.push_back(Add(ex + "wdown", fe, d, 0, fe, 0, d, true, true, out_stddev));
        }
      } else {
        ids.wgate = Add(n + "wgate", d, f, 0, d, tr * f / t_, (tr + 1) * f / t_, false, true, config.init_stddev);
        ids.wup = Add(n + "wup", d, f, 0, d, tr * f / t_, (tr + 1) * f / t_, false, true, config.init_stddev);
        ids.wdown = Add(n + "wdown", f, d, tr * f / t_, (tr + 1) * f / t_, 0, d, false, true, out_stddev);
      }
      layer_ids_[l] = ids;
    }
    if (layout.head) {
      NewBucket("head", false);
      head_bucket_ = static_cast<int>(buckets_.size()) - 1;
      final_norm_ = Add("final_norm", 1, d, 0, 1, 0, d, true, false, 0);
      if (!model.tied_embeddings) head_ = Add("head", d, model.vocab_size, 0, d, 0, model.vocab_size, true, true, config.init_stddev);
    }
  }
  for (const ParamTensor& pt : tensors_) buckets_[static_cast<size_t>(pt.bucket)].count += pt.size();
  // Values: norms start at one, the rest from the sharding-independent normal draws.
  params_.assign(tensors_.empty() ? 0 : static_cast<size_t>(tensors_.back().offset + tensors_.back().size()), 0.0f);
  grads_.assign(params_.size(), 0.0f);
  for (const ParamTensor& pt : tensors_) {
    float* out = params_.data() + pt.offset;
    for (int64_t r = pt.row0; r < pt.row1; ++r) {
      for (int64_t c = pt.col0; c < pt.col1; ++c) *out++ = pt.init_stddev == 0 ? 1.0f : InitNormal(seed, pt.name, r, c, pt.init_stddev);
    }
  }
}

StageModel::~StageModel() = default;

void StageModel::NewBucket(const std::string& name, bool expert) {
  ParamBucket bucket{name, tensors_.empty() ? 0 : tensors_.back().offset + tensors_.back().size(), 0, expert};
  buckets_.push_back(bucket);
  chunk_buckets_.back().push_back(static_cast<int>(buckets_.size()) - 1);
}

int StageModel::Add(const std::string& name, int64_t rows, int64_t cols, int64_t row0, int64_t row1, int64_t col0, int64_t col1, bool replicated,
                    bool decay, float init_stddev) {
  ParamTensor pt{name, rows, cols, row0, row1, col0, col1, replicated, decay, 0, init_stddev, static_cast<int>(buckets_.size()) - 1};
  pt.offset = tensors_.empty() ? 0 : tensors_.back().offset + tensors_.back().size();
  tensors_.push_back(pt);
  return static_cast<int>(tensors_.size()) - 1;
}

MoeWeights StageModel::MoePointers(const LayerIds& id, bool gradients) {
  auto at = [&](int tensor) { return tensor < 0 ? nullptr : (gradients ? G(tensor) : P(tensor)); };
  MoeWeights w;
  w.router = at(id.router);
  w.shared_gate = at(id.shared_gate), w.shared_up = at(id.shared_up), w.shared_down = at(id.shared_down);
  for (size_t i = 0; i < id.expert_gate.size(); ++i) {
    w.gate.push_back(at(id.expert_gate[i])), w.up.push_back(at(id.expert_up[i])), w.down.push_back(at(id.expert_down[i]));
  }
  return w;
}

void StageModel::LinearGrad(float* dx, int weight, const float* dy, const float* x, int t, int in, int out, LayerSaved& s) {
  if (defer_weights_) {
    LinearBackward(dx, nullptr, dy, x, P(weight), t, in, out);
    s.deferred.push_back({weight, x, Buffer(dy, dy + static_cast<size_t>(t) * static_cast<size_t>(out)), t, in, out});
  } else {
    LinearBackward(dx, G(weight), dy, x, P(weight), t, in, out);
  }
}

void StageModel::ToFull(float* full, const float* local, const std::string& what) {
  if (sp_) {
    comms_.AllGather(full, local, local_tokens_ * hidden_, {"tensor"}, what);
  } else {
    std::copy(local, local + tokens_ * hidden_, full);
  }
}

void StageModel::FromPartial(float* local, float* partial, const std::string& what) {
  if (sp_) {
    comms_.ReduceScatterSum(local, partial, local_tokens_ * hidden_, {"tensor"}, what);
  } else {
    comms_.AllReduceSum(partial, tokens_ * hidden_, {"tensor"}, what);
    std::copy(partial, partial + tokens_ * hidden_, local);
  }
}

void StageModel::GradToLocal(float* local, float* full, const std::string& what) { FromPartial(local, full, what); }

void StageModel::GradToFull(float* full, const float* local, const std::string& what) { ToFull(full, local, what); }

void StageModel::LayerForward(int64_t layer, float* x, LayerSaved& s) {
  const LayerIds& id = layer_ids_.at(layer);
  const int T = static_cast<int>(tokens_), Tl = static_cast<int>(local_tokens_), D = static_cast<int>(hidden_);
  const int K = static_cast<int>(model_.head_dim), Hl = static_cast<int>(heads_), Gl = static_cast<int>(kv_heads_), F = static_cast<int>(ffn_);
  const std::string where = "layer " + std::to_string(layer);
  std::optional<TraceSpan> span;
  auto op = [&](const char* name, const char* category) {
    span.reset();
    span.emplace(tracer_, Key(layer, name), category);
  };
  s.x.assign(x, x + static_cast<size_t>(Tl) * D);
  op("attention_norm", "compute");
  Buffer h(static_cast<size_t>(Tl) * D);
  s.rstd1.resize(static_cast<size_t>(Tl));
  RmsNormForward(h.data(), s.rstd1.data(), x, P(id.attn_norm), Tl, D, config_.norm_eps);
  op("tp_enter_attention", "tensor");
  s.h_full.resize(static_cast<size_t>(T) * D);
  ToFull(s.h_full.data(), h.data(), where + " attention input all-gather");
  op("qkv", "compute");
  s.q.resize(static_cast<size_t>(T) * Hl * K);
  s.k.resize(static_cast<size_t>(T) * Gl * K);
  s.v.resize(static_cast<size_t>(T) * Gl * K);
  LinearForward(s.q.data(), s.h_full.data(), P(id.wq), T, D, Hl * K);
  LinearForward(s.k.data(), s.h_full.data(), P(id.wk), T, D, Gl * K);
  LinearForward(s.v.data(), s.h_full.data(), P(id.wv), T, D, Gl * K);
  RopeForward(s.q.data(), s.q.data(), positions_.data(), T, Hl, K, config_.rope_theta);
  RopeForward(s.k.data(), s.k.data(), positions_.data(), T, Gl, K, config_.rope_theta);
  op("attention", "compute");
  const int S = static_cast<int>(plan_.seq_len / c_);
  const AttentionShape shape{static_cast<int>(plan_.micro_batch_size), S, S, Hl, Gl, K};
  s.o.resize(static_cast<size_t>(T) * Hl * K);
  s.lse.resize(static_cast<size_t>(plan_.micro_batch_size * Hl * S));
  const float scale = 1.0f / std::sqrt(static_cast<float>(K));
  if (c_ > 1) {
    const RingAttentionStats stats =
        RingAttentionForward(s.o.data(), s.lse.data(), s.q.data(), s.k.data(), s.v.data(), seq_positions_.data(), shape, true, scale, comms_,
                             RingPass{RingWork::kComputeAndTransfers, {}, &ring_workspace_});
    if (tracer_) tracer_->Reassign("compute", "context", stats.comm_wait_s);  // ring transfers not hidden under the blocks
  } else {
    AttentionForward(s.o.data(), s.lse.data(), s.q.data(), s.k.data(), s.v.data(), shape, true, scale);
  }
  op("attention_out", "compute");
  Buffer partial(static_cast<size_t>(T) * D);
  LinearForward(partial.data(), s.o.data(), P(id.wo), T, Hl * K, D);
  op("tp_exit_attention", "tensor");
  Buffer y(static_cast<size_t>(Tl) * D);
  FromPartial(y.data(), partial.data(), where + " attention output " + (sp_ ? "reduce-scatter" : "all-reduce"));
  op("attention_residual", "compute");
  s.x2.resize(static_cast<size_t>(Tl) * D);
  for (size_t i = 0; i < s.x2.size(); ++i) s.x2[i] = x[i] + y[i];

  op("mlp_norm", "compute");
  Buffer h2(static_cast<size_t>(Tl) * D);
  s.rstd2.resize(static_cast<size_t>(Tl));
  RmsNormForward(h2.data(), s.rstd2.data(), s.x2.data(), P(id.mlp_norm), Tl, D, config_.norm_eps);
  op("tp_enter_mlp", "tensor");
  s.h2_full.resize(static_cast<size_t>(T) * D);
  ToFull(s.h2_full.data(), h2.data(), where + " MLP input all-gather");
  if (id.moe) {
    aux_loss_ += moe_->Forward(partial.data(), s.h2_full.data(), T, plan_.micro_batch_size * plan_.seq_len, aux_weight_, MoePointers(id, false), s.moe, op,
                               where);
  } else {
    op("mlp_up", "compute");
    s.gate.resize(static_cast<size_t>(T) * F);
    s.up.resize(static_cast<size_t>(T) * F);
    s.act.resize(static_cast<size_t>(T) * F);
    LinearForward(s.gate.data(), s.h2_full.data(), P(id.wgate), T, D, F);
    LinearForward(s.up.data(), s.h2_full.data(), P(id.wup), T, D, F);
    op("mlp_activation", "compute");
    SwigluForward(s.act.data(), s.gate.data(), s.up.data(), T, F);
    op("mlp_down", "compute");
    LinearForward(partial.data(), s.act.data(), P(id.wdown), T, F, D);
  }
  op("tp_exit_mlp", "tensor");
  FromPartial(y.data(), partial.data(), where + " MLP output " + (sp_ ? "reduce-scatter" : "all-reduce"));
  op("mlp_residual", "compute");
  for (size_t i = 0; i < s.x2.size(); ++i) x[i] = s.x2[i] + y[i];
}

void StageModel::LayerBackward(int64_t layer, float* dx, LayerSaved& s) {
  const LayerIds& id = layer_ids_.at(layer);
  const int T = static_cast<int>(tokens_), Tl = static_cast<int>(local_tokens_), D = static_cast<int>(hidden_);
  const int K = static_cast<int>(model_.head_dim), Hl = static_cast<int>(heads_), Gl = static_cast<int>(kv_heads_), F = static_cast<int>(ffn_);
  const std::string where = "layer " + std::to_string(layer) + " backward";
  std::optional<TraceSpan> span;
  auto op = [&](const char* name, const char* category) {
    span.reset();
    span.emplace(tracer_, Key(layer, name), category);
  };
  // dx holds d(out); out = x2 + mlp(x2). Weight gradients (the program's W ops) are computed
  // with the input gradients here.
  Buffer dx2(dx, dx + static_cast<size_t>(Tl) * D);
  op("tp_exit_mlp_grad", "tensor");
  Buffer dfull(static_cast<size_t>(T) * D);
  GradToFull(dfull.data(), dx, where + " MLP output gradient all-gather");
  Buffer dh2_full(static_cast<size_t>(T) * D, 0.0f);
  if (id.moe) {
    moe_->Backward(dh2_full.data(), dfull.data(), s.h2_full.data(), T, plan_.micro_batch_size * plan_.seq_len, aux_weight_, MoePointers(id, false),
                   MoePointers(id, true), s.moe, op, where);
  } else {
    op("mlp_down_dgrad", "compute");
    Buffer dact(static_cast<size_t>(T) * F, 0.0f), dgate(static_cast<size_t>(T) * F), dup(static_cast<size_t>(T) * F);
    LinearGrad(dact.data(), id.wdown, dfull.data(), s.act.data(), T, F, D, s);
    op("mlp_activation_grad", "compute");
    SwigluBackward(dgate.data(), dup.data(), dact.data(), s.gate.data(), s.up.data(), T, F);
    op("mlp_up_dgrad", "compute");
    LinearGrad(dh2_full.data(), id.wgate, dgate.data(), s.h2_full.data(), T, D, F, s);
    LinearGrad(dh2_full.data(), id.wup, dup.data(), s.h2_full.data(), T, D, F, s);
  }
  op("tp_enter_mlp_grad", "tensor");
  Buffer dh2(static_cast<size_t>(Tl) * D);
  GradToLocal(dh2.data(), dh2_full.data(), where + " MLP input gradient " + (sp_ ? "reduce-scatter" : "all-reduce"));
  op("mlp_norm_grad", "compute");
  RmsNormBackward(dx2.data(), G(id.mlp_norm), dh2.data(), s.x2.data(), P(id.mlp_norm), s.rstd2.data(), Tl, D);

  // x2 = x + attention(x): dx2 flows to both.
  op("tp_exit_attention_grad", "tensor");
  GradToFull(dfull.data(), dx2.data(), where + " attention output gradient all-gather");
  op("attention_out_dgrad", "compute");
  Buffer d_o(static_cast<size_t>(T) * Hl * K, 0.0f);
  LinearGrad(d_o.data(), id.wo, dfull.data(), s.o.data(), T, Hl * K, D, s);
  op("attention_grad", "compute");
  const int S = static_cast<int>(plan_.seq_len / c_);
  const AttentionShape shape{static_cast<int>(plan_.micro_batch_size), S, S, Hl, Gl, K};
  Buffer dq(static_cast<size_t>(T) * Hl * K, 0.0f), dk(static_cast<size_t>(T) * Gl * K, 0.0f), dv(static_cast<size_t>(T) * Gl * K, 0.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(K));
  if (c_ > 1) {
    const RingAttentionStats stats = RingAttentionBackward(dq.data(), dk.data(), dv.data(), s.q.data(), s.k.data(), s.v.data(), s.o.data(),
                                                           d_o.data(), s.lse.data(), seq_positions_.data(), shape, true, scale, comms_,
                                                           RingPass{RingWork::kComputeAndTransfers, {}, &ring_workspace_});
    if (tracer_) tracer_->Reassign("compute", "context", stats.comm_wait_s);
  } else {
    AttentionBackward(dq.data(), dk.data(), dv.data(), s.q.data(), s.k.data(), s.v.data(), s.o.data(), d_o.data(), s.lse.data(), shape, true, scale);
  }
  RopeBackward(dq.data(), dq.data(), positions_.data(), T, Hl, K, config_.rope_theta);
  RopeBackward(dk.data(), dk.data(), positions_.data(), T, Gl, K, config_.rope_theta);
  op("qkv_dgrad", "compute");
  Buffer dh_full(static_cast<size_t>(T) * D, 0.0f);
  LinearGrad(dh_full.data(), id.wq, dq.data(), s.h_full.data(), T, D, Hl * K, s);
  LinearGrad(dh_full.data(), id.wk, dk.data(), s.h_full.data(), T, D, Gl * K, s);
  LinearGrad(dh_full.data(), id.wv, dv.data(), s.h_full.data(), T, D, Gl * K, s);
  op("tp_enter_attention_grad", "tensor");
  Buffer dh(static_cast<size_t>(Tl) * D);
  GradToLocal(dh.data(), dh_full.data(), where + " attention input gradient " + (sp_ ? "reduce-scatter" : "all-reduce"));
  op("attention_norm_grad", "compute");
  std::copy(dx2.begin(), dx2.end(), dx);
  RmsNormBackward(dx, G(id.attn_norm), dh.data(), s.x.data(), P(id.attn_norm), s.rstd1.data(), Tl, D);
}

double StageModel::Forward(int64_t chunk, int64_t mb, const float* in, float* out, const int32_t* ids, const int32_t* targets,
                           double loss_normaliser) {
  auto saved = std::make_unique<Saved>();
  current_mb_ = mb;
  const strategies::ChunkLayout& layout = this->chunk(chunk);
  const int D = static_cast<int>(hidden_), Tl = static_cast<int>(local_tokens_), V = static_cast<int>(model_.vocab_size);
  // With SP this rank holds tokens [first, first + Tl) of the micro-batch between layers.
  const int64_t first = sp_ ? tensor_rank_ * local_tokens_ : 0;
  Buffer x(static_cast<size_t>(Tl) * D);
  // Buckets in the order this pass reads them; a tied head reads the embedding gathered first.
  const std::vector<int>& order = chunk_buckets_[static_cast<size_t>(chunk)];
  size_t next = 0;
  if (layout.embedding) {
    Use(order, next++);
    saved->ids.assign(ids + first, ids + first + Tl);
    const TraceSpan span(tracer_, Key(0, "embedding"), "compute");
    EmbeddingForward(x.data(), saved->ids.data(), P(embedding_), Tl, V, D);
  } else {
    std::copy(in, in + static_cast<size_t>(Tl) * D, x.begin());
  }
  const int64_t l0 = layout.first_layer;
  saved->layers.resize(static_cast<size_t>(layout.layers));
  aux_loss_ = 0;
  aux_weight_ = static_cast<double>(plan_.micro_batch_size * plan_.seq_len) / loss_normaliser;
  for (size_t i = 0; i < saved->layers.size(); ++i) {
    for (size_t b = 0; b < layer_buckets_.at(l0 + static_cast<int64_t>(i)).size(); ++b) Use(order, next++);
    LayerForward(l0 + static_cast<int64_t>(i), x.data(), saved->layers[i]);
  }
  double loss = 0;
  if (layout.head) {
    Use(order, next++);
    const TraceSpan span(tracer_, Key(model_.num_layers - 1, "head"), "compute");
    saved->final_x = x;
    saved->final_h.resize(x.size());
    saved->final_rstd.resize(static_cast<size_t>(Tl));
    RmsNormForward(saved->final_h.data(), saved->final_rstd.data(), x.data(), P(final_norm_), Tl, D, config_.norm_eps);
    saved->dlogits.resize(static_cast<size_t>(Tl) * V);
    const float* head = model_.tied_embeddings ? nullptr : P(head_);
    Buffer tied;
    if (!head) {  // logits = h E^T: the embedding transposed as a [D, V] matrix
      tied.resize(static_cast<size_t>(D) * V);
      const float* e = P(embedding_);
      for (int vi = 0; vi < V; ++vi)
        for (int di = 0; di < D; ++di) tied[static_cast<size_t>(di) * V + vi] = e[static_cast<size_t>(vi) * D + di];
      head = tied.data();
    }
    LinearForward(saved->dlogits.data(), saved->final_h.data(), head, Tl, D, V);
    loss = CrossEntropyForwardBackward(saved->dlogits.data(), saved->dlogits.data(), targets + first, Tl, V, loss_normaliser);
    // Without SP every tensor rank computes the same loss: count it once.
    if (!sp_ && tensor_rank_ != 0) loss = 0;
  } else {
    std::copy(x.begin(), x.end(), out);
  }
  saved_[{chunk, mb}] = std::move(saved);
  // The MoE layers' balancing loss, each rank its share.
  return loss + aux_loss_;
}

void StageModel::Backward(int64_t chunk, int64_t mb, const float* dout, float* din, const std::function<void(int)>& done, bool defer_weights) {
  auto report = [&done](int bucket) {
    if (done) done(bucket);
  };
  // Buckets in reverse order of the forward.
  std::vector<int> order = chunk_buckets_[static_cast<size_t>(chunk)];
  std::reverse(order.begin(), order.end());
  size_t next = 0;
  auto it = saved_.find({chunk, mb});
  SHARDSIM_CHECK(it != saved_.end(), "backward before forward");
  Saved& s = *it->second;
  current_mb_ = mb;
  defer_weights_ = defer_weights;
  const strategies::ChunkLayout& layout = this->chunk(chunk);
  const int D = static_cast<int>(hidden_), Tl = static_cast<int>(local_tokens_), V = static_cast<int>(model_.vocab_size);
  Buffer dx(static_cast<size_t>(Tl) * D, 0.0f);
  if (layout.head) {
    Use(order, next++);
    const TraceSpan span(tracer_, Key(model_.num_layers - 1, "head_grad"), "compute");
    Buffer dh(static_cast<size_t>(Tl) * D, 0.0f);
    if (model_.tied_embeddings) {
      // logits = h E^T: dh = dlogits E, dE += dlogits^T h.
      const float* e = P(embedding_);
      float* de = G(embedding_);
      for (int ti = 0; ti < Tl; ++ti) {
        const float* g = s.dlogits.data() + static_cast<size_t>(ti) * V;
        const float* h = s.final_h.data() + static_cast<size_t>(ti) * D;
        for (int vi = 0; vi < V; ++vi) {
          for (int di = 0; di < D; ++di) {
            dh[static_cast<size_t>(ti) * D + di] += g[vi] * e[static_cast<size_t>(vi) * D + di];
            de[static_cast<size_t>(vi) * D + di] += g[vi] * h[di];
          }
        }
      }
    } else {
      LinearBackward(dh.data(), G(head_), s.dlogits.data(), s.final_h.data(), P(head_), Tl, D, V);
    }
    RmsNormBackward(dx.data(), G(final_norm_), dh.data(), s.final_x.data(), P(final_norm_), s.final_rstd.data(), Tl, D);
    // A tied head writes the embedding's gradient, which is reported with the embedding.
    report(head_bucket_);
  } else {
    std::copy(dout, dout + static_cast<size_t>(Tl) * D, dx.begin());
  }
  const int64_t l0 = layout.first_layer;
  for (size_t i = s.layers.size(); i-- > 0;) {
    const int64_t layer = l0 + static_cast<int64_t>(i);
    for (size_t b = 0; b < layer_buckets_.at(layer).size(); ++b) Use(order, next++);
    LayerBackward(layer, dx.data(), s.layers[i]);
    if (!defer_weights) {
      for (int bucket : layer_buckets_.at(layer)) report(bucket);
    }
  }
  if (layout.embedding) {
    Use(order, next++);  // the embedding's backward reads no parameter, but its gather keeps the order
    const TraceSpan span(tracer_, Key(0, "embedding_grad"), "compute");
    EmbeddingBackward(G(embedding_), dx.data(), s.ids.data(), Tl, V, D);
    report(embedding_bucket_);
  } else {
    std::copy(dx.begin(), dx.end(), din);
  }
  defer_weights_ = false;
  if (!defer_weights) saved_.erase(it);
}

void StageModel::BackwardWeight(int64_t chunk, int64_t mb, const std::function<void(int)>& done) {
  auto it = saved_.find({chunk, mb});
  SHARDSIM_CHECK(it != saved_.end(), "weight gradients before the input gradients");
  Saved& s = *it->second;
  current_mb_ = mb;
  const int64_t l0 = this->chunk(chunk).first_layer;
  for (size_t i = s.layers.size(); i-- > 0;) {
    const int64_t layer = l0 + static_cast<int64_t>(i);
    {
      const TraceSpan span(tracer_, Key(layer, "weight_grad"), "compute");
      for (const Deferred& d : s.layers[i].deferred) LinearBackward(nullptr, G(d.weight), d.dy.data(), d.x, P(d.weight), d.t, d.in, d.out);
    }
    if (done) {
      for (int bucket : layer_buckets_.at(layer)) done(bucket);
    }
  }
  saved_.erase(it);
}

}  // namespace shardsim::runtime
