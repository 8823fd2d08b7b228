#include "runtime/stage_model.h"

#include "runtime/stage_model_saved.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/error.h"
#include "core/suggest.h"
#include "runtime/cross_entropy.h"
#include "runtime/embedding.h"
#include "runtime/gemm.h"
#include "runtime/init.h"
#include "runtime/linear.h"
#include "runtime/norm.h"
#include "runtime/resident_pages.h"
#include "strategies/schedule.h"
#include "strategies/op_keys.h"
#include "strategies/op_names.h"
#include "strategies/stage_layout.h"

namespace shardsim::runtime {


StageModel::StageModel(const strategies::StepProgram& program, MeshComms& comms, const ArchitectureConfig& config, uint64_t seed)
    : model_(program.model), plan_(program.plan), comms_(comms), config_(config), program_(program) {
  const ModelSpec& model = model_;
  const PlanSpec& plan = plan_;
  CheckRuntimeSupports(model, plan);
  stage_ = comms.Coordinate("pipeline");
  tensor_rank_ = comms.Coordinate("tensor");
  t_ = plan.mesh.tensor;
  sp_ = plan.sequence_parallel && t_ > 1;
  keeps_gathered_ = KeepsGatheredSequence(plan);
  // Context parallelism: each context rank holds S / c tokens of every sequence, two zigzag
  // chunks (ring_attention.h), so causal work is even; attention runs around the context ring.
  c_ = plan.mesh.context;
  seq_positions_ = SequencePositions(c_ > 1 ? SequenceLayout::kZigzag : SequenceLayout::kContiguous, plan.seq_len, c_, comms.Coordinate("context"));
  tokens_ = plan.micro_batch_size * plan.seq_len / c_;
  local_tokens_ = sp_ ? tokens_ / t_ : tokens_;
  hidden_ = model.hidden_size;
  vocab_local_ = model.vocab_size / t_;
  vocab0_ = tensor_rank_ * vocab_local_;
  heads_ = model.num_heads / t_;
  kv_heads_ = model.num_kv_heads / t_;
  ffn_ = model.ffn_hidden_size / t_;
  attn_dim_ = model.head_dim, attn_kv_heads_ = kv_heads_, out_dim_ = model.head_dim;
  attn_scale_ = 1.0f / std::sqrt(static_cast<float>(model.head_dim));
  if (model.mla) {
    const MlaSpec& a = *model.mla;
    attn_dim_ = std::max(a.qk_nope_head_dim + a.qk_rope_head_dim, a.v_head_dim), attn_kv_heads_ = heads_, out_dim_ = a.v_head_dim;
    attn_scale_ = 1.0f / std::sqrt(static_cast<float>(a.qk_nope_head_dim + a.qk_rope_head_dim));
  }
  SHARDSIM_CHECK(model.ffn_hidden_size % t_ == 0, "tensor must divide the MLP width");
  if (model.moe) moe_ = std::make_unique<MoeLayer>(model, comms, config.router_aux_coeff);
  for (int64_t b = 0; b < plan.micro_batch_size; ++b) positions_.insert(positions_.end(), seq_positions_.begin(), seq_positions_.end());

  const int64_t d = hidden_, k = model.head_dim, q_cols = model.num_heads * k, kv_cols = model.num_kv_heads * k, f = model.ffn_hidden_size;
  const int64_t tr = tensor_rank_;
  // Output projections scaled down with depth (GPT-2's 1/sqrt(2L)).
  const float out_stddev = config.init_stddev / std::sqrt(2.0f * static_cast<float>(model.num_layers));
  bool holds_embedding = false;
  for (const strategies::ChunkLayout& layout : program.layout.at[static_cast<size_t>(stage_)]) holds_embedding = holds_embedding || layout.embedding;
  for (const strategies::ChunkLayout& layout : program.layout.at[static_cast<size_t>(stage_)]) {
    chunk_buckets_.emplace_back();
    if (layout.embedding) {
      NewBucket("embedding", std::string(strategies::kEmbeddingLayer), false);
      embedding_bucket_ = static_cast<int>(buckets_.size()) - 1;
      // Vocabulary-parallel: this tensor rank's rows of the table.
      embedding_ = Add("embedding", model.vocab_size, d, vocab0_, vocab0_ + vocab_local_, 0, d, false, true, config.init_stddev);
      if (model.position == PositionKind::kLearned) {
        // Learned positions (GPT): replicated over tensor, in a bucket of their own (so that the
        // table's bucket is the same on every stage that holds a copy of it).
        NewBucket("positions", std::string(strategies::kEmbeddingLayer), false);
        pos_bucket_ = static_cast<int>(buckets_.size()) - 1;
        pos_table_ = Add("positions", model.max_seq_len, d, 0, model.max_seq_len, 0, d, true, true, config.init_stddev);
      }
    }
    for (int64_t l = layout.first_layer; l < layout.first_layer + layout.layers; ++l) {
      const std::string n = "layer" + std::to_string(l) + ".";
      NewBucket("layer" + std::to_string(l), strategies::DecoderLayer(l), false);
      layer_buckets_[l].push_back(static_cast<int>(buckets_.size()) - 1);
      LayerIds ids;
      const bool layer_norm = model.norm == NormKind::kLayerNorm, qkv_bias = model.linear_bias || model.qkv_bias;
      ids.attn_norm = Add(n + "attn_norm", 1, d, 0, 1, 0, d, true, false, 0);
      if (layer_norm) ids.attn_norm_b = AddBias(n + "attn_norm_bias", d, 0, d, true);
      if (model.mla) {
        AddMla(n, ids, config.init_stddev);
      } else {
        ids.wq = Add(n + "wq", d, q_cols, 0, d, tr * q_cols / t_, (tr + 1) * q_cols / t_, false, true, config.init_stddev);
        ids.wk = Add(n + "wk", d, kv_cols, 0, d, tr * kv_cols / t_, (tr + 1) * kv_cols / t_, false, true, config.init_stddev);
        ids.wv = Add(n + "wv", d, kv_cols, 0, d, tr * kv_cols / t_, (tr + 1) * kv_cols / t_, false, true, config.init_stddev);
      }
      if (qkv_bias) {
        // Column-parallel biases: split with their columns.
        ids.bq = AddBias(n + "bq", q_cols, tr * q_cols / t_, (tr + 1) * q_cols / t_, false);
        ids.bk = AddBias(n + "bk", kv_cols, tr * kv_cols / t_, (tr + 1) * kv_cols / t_, false);
        ids.bv = AddBias(n + "bv", kv_cols, tr * kv_cols / t_, (tr + 1) * kv_cols / t_, false);
      }
      const int64_t o_rows = model.num_heads * out_dim_;  // the attention output's width
      ids.wo = Add(n + "wo", o_rows, d, tr * o_rows / t_, (tr + 1) * o_rows / t_, 0, d, false, true, out_stddev);
      // A row-parallel bias: replicated, added once after the reduction (Megatron-LM).
      if (model.linear_bias) ids.bo = AddBias(n + "bo", d, 0, d, true);
      ids.mlp_norm = Add(n + "mlp_norm", 1, d, 0, 1, 0, d, true, false, 0);
      if (layer_norm) ids.mlp_norm_b = AddBias(n + "mlp_norm_bias", d, 0, d, true);
      if (IsMoeLayer(model, l)) {
        // Router and shared experts: dense (replicated over expert); the routed experts this
        // expert rank holds: their own bucket, sharded over expert.
        const int64_t e = model.moe->num_experts, fe = model.moe->expert_ffn_hidden_size, fs = model.moe->num_shared_experts * fe;
        ids.moe = true;
        ids.router = Add(n + "router", d, e, 0, d, 0, e, true, true, config.init_stddev);
        if (fs > 0) {
          // Split over tensor as a dense MLP: gate and up by columns, down by rows.
          ids.shared_gate = Add(n + "shared_gate", d, fs, 0, d, tr * fs / t_, (tr + 1) * fs / t_, false, true, config.init_stddev);
          ids.shared_up = Add(n + "shared_up", d, fs, 0, d, tr * fs / t_, (tr + 1) * fs / t_, false, true, config.init_stddev);
          ids.shared_down = Add(n + "shared_down", fs, d, tr * fs / t_, (tr + 1) * fs / t_, 0, d, false, true, out_stddev);
        }
        NewBucket("layer" + std::to_string(l) + ".experts", strategies::DecoderLayer(l), true);
        layer_buckets_[l].push_back(static_cast<int>(buckets_.size()) - 1);
        for (int64_t x = moe_->first_expert(); x < moe_->first_expert() + moe_->local_experts(); ++x) {
          const std::string ex = n + "expert" + std::to_string(x) + ".";
          // Expert-tensor parallelism: each expert split over tensor as a dense MLP.
          ids.expert_gate.push_back(Add(ex + "wgate", d, fe, 0, d, tr * fe / t_, (tr + 1) * fe / t_, false, true, config.init_stddev));
          ids.expert_up.push_back(Add(ex + "wup", d, fe, 0, d, tr * fe / t_, (tr + 1) * fe / t_, false, true, config.init_stddev));
          ids.expert_down.push_back(Add(ex + "wdown", fe, d, tr * fe / t_, (tr + 1) * fe / t_, 0, d, false, true, out_stddev));
        }
      } else {
        // SwiGLU: gate and up; GELU (GPT): up only, with its biases.
        if (model.mlp == MlpKind::kSwiGlu) ids.wgate = Add(n + "wgate", d, f, 0, d, tr * f / t_, (tr + 1) * f / t_, false, true, config.init_stddev);
        ids.wup = Add(n + "wup", d, f, 0, d, tr * f / t_, (tr + 1) * f / t_, false, true, config.init_stddev);
        if (model.linear_bias) ids.bup = AddBias(n + "bup", f, tr * f / t_, (tr + 1) * f / t_, false);
        ids.wdown = Add(n + "wdown", f, d, tr * f / t_, (tr + 1) * f / t_, 0, d, false, true, out_stddev);
        if (model.linear_bias) ids.bdown = AddBias(n + "bdown", d, 0, d, true);
      }
      layer_ids_[l] = ids;
    }
    if (layout.head) {
      NewBucket("head", std::string(strategies::kHeadLayer), false);
      head_bucket_ = static_cast<int>(buckets_.size()) - 1;
      final_norm_ = Add("final_norm", 1, d, 0, 1, 0, d, true, false, 0);
      if (model.norm == NormKind::kLayerNorm) final_norm_b_ = AddBias("final_norm_bias", d, 0, d, true);
      // Vocabulary-parallel: this tensor rank's columns of the output matrix.
      if (!model.tied_embeddings) {
        head_ = Add("head", d, model.vocab_size, 0, d, vocab0_, vocab0_ + vocab_local_, false, true, config.init_stddev);
      } else if (!holds_embedding) {
        // A tied head on a stage without the embedding reads its own copy of this tensor rank's
        // rows of the table, in a bucket of its own (stage_copies.h).
        NewBucket("tied_embedding", std::string(strategies::kHeadLayer), false);
        tied_copy_bucket_ = static_cast<int>(buckets_.size()) - 1;
        embedding_ = Add("embedding", model.vocab_size, d, vocab0_, vocab0_ + vocab_local_, 0, d, false, true, config.init_stddev);
      }
    }
  }
  MarkCopies();
  // Sequence parallelism: every replicated tensor sees a share of the tokens.
  for (ParamTensor& pt : tensors_) {
    pt.tensor_partial = t_ > 1 && pt.tensor_replicated && (sp_ || pt.tensor_partial);
    tensor_partial_ = tensor_partial_ || pt.tensor_partial;
  }
  for (const ParamTensor& pt : tensors_) buckets_[static_cast<size_t>(pt.bucket)].count += pt.size();
  // Values: norms start at one, the rest from the sharding-independent normal draws.
  params_.assign(tensors_.empty() ? 0 : static_cast<size_t>(tensors_.back().offset + tensors_.back().size()), 0.0f);
  grads_.assign(params_.size(), 0.0f);
  ReleaseToZero(grads_.data(), grads_.data() + grads_.size());  // held only where a backward writes
  for (const ParamTensor& pt : tensors_) {
    float* out = params_.data() + pt.offset;
    for (int64_t r = pt.row0; r < pt.row1; ++r) {
      for (int64_t c = pt.col0; c < pt.col1; ++c) *out++ = pt.zeros ? 0.0f : InitialValue(seed, pt.name, r, c, pt.init_stddev);
    }
  }
}

StageModel::~StageModel() = default;

void StageModel::set_memory_account(MemoryAccount* account) {
  account_ = account;
  params_hold_ = MemoryHold(account, MemoryCategory::kParams);
  grads_hold_ = MemoryHold(account, MemoryCategory::kGrads);
  CountStates();
  ring_hold_ = MemoryHold(account, MemoryCategory::kBuffers, ring_workspace_.bytes());
  if (moe_) moe_->set_memory_account(account);
}

void StageModel::CountStates() {
  params_hold_.Set(ResidentBytes(params_.data(), params_.data() + params_.size()));
  grads_hold_.Set(ResidentBytes(grads_.data(), grads_.data() + grads_.size()));
}

void StageModel::NewBucket(const std::string& name, const std::string& layer, bool expert) {
  ParamBucket bucket;
  bucket.name = name;
  bucket.offset = tensors_.empty() ? 0 : tensors_.back().offset + tensors_.back().size();
  bucket.expert = expert;
  bucket.layer = layer;
  bucket.chunk = static_cast<int64_t>(chunk_buckets_.size()) - 1;
  buckets_.push_back(bucket);
  chunk_buckets_.back().push_back(static_cast<int>(buckets_.size()) - 1);
}

int StageModel::AddBias(const std::string& name, int64_t cols, int64_t col0, int64_t col1, bool replicated) {
  const int id = Add(name, 1, cols, 0, 1, col0, col1, replicated, false, 0);
  tensors_.back().zeros = true;
  return id;
}

void StageModel::MarkCopies() {
  const int64_t p = plan_.mesh.pipeline;
  const auto& path = program_.layout.paths.front();
  const int64_t embedding_stage = path.front().first, head_stage = path.back().first;
  bool holds_head = false;
  for (int64_t c = 0; c < program_.layout.chunks; ++c) holds_head = holds_head || chunk(c).head;
  for (ParamBucket& b : buckets_) {
    b.read_by_other_chunk = model_.tied_embeddings && holds_head && static_cast<int>(&b - buckets_.data()) == embedding_bucket_;
    if (program_.layout.paths.size() > 1) {
      // DualPipe: stage p - 1 - s holds the same parts; the copy in a direction-0 chunk counts.
      b.copy_stage = p - 1 - stage_;
      b.copy_of = b.name;
      b.copy_counted = chunk(b.chunk).direction == 0;
    } else if (model_.tied_embeddings && embedding_stage != head_stage && (b.name == "embedding" || b.name == "tied_embedding")) {
      b.copy_stage = b.name == "embedding" ? head_stage : embedding_stage;
      b.copy_of = "embedding";
      b.copy_counted = b.name == "embedding";
    }
  }
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

const strategies::LayerProgram& StageModel::LayerProgramOf(int64_t layer) const {
  return program_.ProgramOfLayer(layer);
}

const strategies::Op* StageModel::FindOp(const strategies::LayerProgram& layer, std::string_view name) {
  for (const strategies::Op& op : layer.ops) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

std::string StageModel::Key(const std::string& label, std::string_view op) const { return strategies::OpKey(stage_, label, op, current_mb_); }

void StageModel::Begin(std::optional<TraceSpan>& span, const strategies::LayerProgram& layer, const std::string& label, std::string_view name) {
  span.reset();
  const strategies::Op* op = FindOp(layer, name);
  SHARDSIM_CHECK(op != nullptr, "the runtime ran " + Key(label, name) + ", which the step program's " + strategies::ToString(layer.kind) +
                                    " layer does not list");
  const bool optimizer = !op->is_comm() && op->kind == strategies::ComputeKind::kOptimizer;
  span.emplace(tracer_, Key(label, name), optimizer ? "optimizer" : strategies::ToString(op->stream));
}

void StageModel::Tensor(std::optional<TraceSpan>& span, const strategies::LayerProgram& layer, const std::string& label, std::string_view name,
                        float* out, float* in) {
  const int64_t full = tokens_ * hidden_, local = local_tokens_ * hidden_;
  const strategies::Op* op = FindOp(layer, name);
  if (op == nullptr) {
    SHARDSIM_CHECK(full == local, "the step program has no " + Key(label, name) + " but sequence parallelism splits the tokens");
    if (out != in) std::copy(in, in + full, out);
    return;
  }
  Begin(span, layer, label, name);
  const std::string what = Key(label, name);
  switch (op->collective) {
    case CollectiveOp::kAllGather: comms_.AllGather(out, in, local, op->axes, what); break;
    case CollectiveOp::kReduceScatter: comms_.ReduceScatterSum(out, in, local, op->axes, what); break;
    case CollectiveOp::kAllReduce:
      comms_.AllReduceSum(in, full, op->axes, what);
      if (out != in) std::copy(in, in + full, out);
      break;
    default: SHARDSIM_CHECK(false, what + ": the runtime runs tensor ops as all-gather, reduce-scatter or all-reduce, not " + ToString(op->collective));
  }
}

void StageModel::WeightGrads(std::optional<TraceSpan>& span, const strategies::LayerProgram& layer, const std::string& label, std::string_view op,
                             std::initializer_list<WeightGrad> grads, LayerSaved& s) {
  if (defer_weights_) {
    for (const WeightGrad& g : grads) {
      s.deferred.push_back({std::string(op), G(g.weight), g.x, Buffer(g.dy, g.dy + static_cast<size_t>(g.t) * static_cast<size_t>(g.out)), g.t, g.in, g.out});
    }
    return;
  }
  Begin(span, layer, label, strategies::ops::Wgrad(op));
  for (const WeightGrad& g : grads) LinearBackward(nullptr, G(g.weight), g.dy, g.x, P(g.weight), g.t, g.in, g.out);
}

void StageModel::Use(const std::vector<int>& order, size_t i) {
  if (param_use_) param_use_(order[i], i + 1 < order.size() ? order[i + 1] : -1, current_mb_, backward_);
}

double StageModel::Forward(int64_t chunk, int64_t mb, const float* in, float* out, const int32_t* ids, const int32_t* targets,
                           double loss_normaliser) {
  namespace ops = strategies::ops;
  auto saved = std::make_unique<Saved>();
  saved->activations = MemoryHold(account_, MemoryCategory::kActivations);
  saved->routed = RoutedRowsHold(account_);
  saved->logits = MemoryHold(account_, MemoryCategory::kBuffers);
  MemoryHold scratch(account_, MemoryCategory::kBuffers);  // x, and the embedding's and head's scratch
  current_mb_ = mb;
  backward_ = false;
  const strategies::ChunkLayout& layout = this->chunk(chunk);
  const int T = static_cast<int>(tokens_), D = static_cast<int>(hidden_), Tl = static_cast<int>(local_tokens_), V = static_cast<int>(model_.vocab_size);
  const int Vl = static_cast<int>(vocab_local_), v0 = static_cast<int>(vocab0_);
  Buffer x(static_cast<size_t>(Tl) * D);
  // Buckets in the order this pass reads them; a tied head reads the embedding gathered first.
  const std::vector<int>& order = chunk_buckets_[static_cast<size_t>(chunk)];
  size_t next = 0;
  std::optional<TraceSpan> span;
  const std::string embedding_label(strategies::kEmbeddingLayer), head_label(strategies::kHeadLayer);
  if (layout.embedding) {
    // Vocabulary-parallel lookup: this rank's rows, the others' zeros, summed over tensor (SP:
    // reduce-scattered to this rank's tokens).
    Use(order, next++);
    const strategies::LayerProgram& lp = program_.Layer(strategies::LayerKind::kEmbedding);
    saved->ids.assign(ids, ids + T);
    Begin(span, lp, embedding_label, ops::kEmbedding);
    Buffer partial(static_cast<size_t>(T) * D);
    scratch.SetTo(x, partial);
    EmbeddingShardForward(partial.data(), saved->ids.data(), P(embedding_), T, V, v0, Vl, D);
    Tensor(span, lp, embedding_label, ops::kTensorEmbedding, x.data(), partial.data());
    if (pos_table_ >= 0) {
      // Learned positions, added to this rank's tokens (with sequence parallelism, its share).
      Use(order, next++);
      Begin(span, lp, embedding_label, ops::kEmbedding);
      const int64_t first = sp_ ? tensor_rank_ * Tl : 0;
      for (int i = 0; i < Tl; ++i) {
        const float* pos = P(pos_table_) + static_cast<int64_t>(positions_[static_cast<size_t>(first + i)]) * D;
        for (int j = 0; j < D; ++j) x[static_cast<size_t>(i) * D + static_cast<size_t>(j)] += pos[j];
      }
    }
    span.reset();
  } else {
    std::copy(in, in + static_cast<size_t>(Tl) * D, x.begin());
  }
  scratch.SetTo(x);
  const int64_t l0 = layout.first_layer;
  saved->layers.resize(static_cast<size_t>(layout.layers));
  aux_loss_ = 0;
  aux_weight_ = static_cast<double>(plan_.micro_batch_size * plan_.seq_len) / loss_normaliser;
  for (size_t i = 0; i < saved->layers.size(); ++i) {
    for (size_t b = 0; b < layer_buckets_.at(l0 + static_cast<int64_t>(i)).size(); ++b) Use(order, next++);
    LayerForward(l0 + static_cast<int64_t>(i), x.data(), saved->layers[i]);
    saved->Account(hidden_);
  }
  double loss = 0;
  if (layout.head) {
    Use(order, next++);
    const strategies::LayerProgram& lp = program_.Layer(strategies::LayerKind::kHead);
    Begin(span, lp, head_label, ops::kFinalNorm);
    saved->final_x = x;
    Buffer h(x.size());
    saved->final_rstd.resize(static_cast<size_t>(Tl));
    if (final_norm_b_ >= 0) saved->final_mean.resize(static_cast<size_t>(Tl));
    NormForward(model_.norm, h.data(), saved->final_mean.data(), saved->final_rstd.data(), x.data(), P(final_norm_),
                final_norm_b_ >= 0 ? P(final_norm_b_) : nullptr, Tl, D, config_.norm_eps);
    saved->final_h_full.resize(static_cast<size_t>(T) * D);
    Tensor(span, lp, head_label, ops::kTensorEnterHead, saved->final_h_full.data(), h.data());
    // Logits of this rank's vocabulary columns for every token: h W[D, V/t] (tied: h E_shard^T).
    if (tied_copy_bucket_ >= 0) Use(order, next++);
    Begin(span, lp, head_label, ops::kLogits);
    saved->probs.resize(static_cast<size_t>(T) * Vl);
    if (model_.tied_embeddings) {
      Gemm(saved->probs.data(), saved->final_h_full.data(), P(embedding_), T, Vl, D, Transpose::kNo, Transpose::kYes, 1.0f, 0.0f);
    } else {
      LinearForward(saved->probs.data(), saved->final_h_full.data(), P(head_), T, D, Vl);
    }
    KeepShard(saved->final_h_full, saved->final_h, h);
    // Vocabulary-parallel cross-entropy: the row maxima and then the sums over tensor.
    Begin(span, lp, head_label, ops::kCrossEntropy);
    saved->targets.assign(targets, targets + T);
    saved->normaliser = loss_normaliser;
    Buffer row_max(static_cast<size_t>(T));
    saved->sums.resize(static_cast<size_t>(2 * T));
    VocabShardRowMax(row_max.data(), saved->probs.data(), T, Vl);
    if (FindOp(lp, ops::kTensorLossMax)) {
      Begin(span, lp, head_label, ops::kTensorLossMax);
      comms_.AllReduceMax(row_max.data(), T, FindOp(lp, ops::kTensorLossMax)->axes, Key(head_label, ops::kTensorLossMax));
      Begin(span, lp, head_label, ops::kCrossEntropy);
    }
    VocabShardExp(saved->probs.data(), saved->sums.data(), saved->probs.data(), row_max.data(), saved->targets.data(), T, Vl, v0);
    if (FindOp(lp, ops::kTensorLossSum)) {
      Begin(span, lp, head_label, ops::kTensorLossSum);
      comms_.AllReduceSum(saved->sums.data(), 2 * T, FindOp(lp, ops::kTensorLossSum)->axes, Key(head_label, ops::kTensorLossSum));
      Begin(span, lp, head_label, ops::kCrossEntropy);
    }
    loss = VocabShardLoss(saved->sums.data(), row_max.data(), saved->targets.data(), T, loss_normaliser);
    scratch.SetTo(x, h, row_max);
    saved->logits.SetTo(saved->probs);
    saved->Account(hidden_);
    // Every tensor rank holds the same loss over every token: count it once.
    if (tensor_rank_ != 0) loss = 0;
    span.reset();
  } else {
    std::copy(x.begin(), x.end(), out);
  }
  saved->Account(hidden_);
  saved_[{chunk, mb}] = std::move(saved);
  // The MoE layers' balancing loss, each rank its share.
  return loss + aux_loss_;
}

void StageModel::Backward(int64_t chunk, int64_t mb, const float* dout, float* din, const std::function<void(int)>& done, bool defer_weights) {
  namespace ops = strategies::ops;
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
  backward_ = true;
  defer_weights_ = defer_weights;
  const strategies::ChunkLayout& layout = this->chunk(chunk);
  const int T = static_cast<int>(tokens_), D = static_cast<int>(hidden_), Tl = static_cast<int>(local_tokens_), V = static_cast<int>(model_.vocab_size);
  const int Vl = static_cast<int>(vocab_local_), v0 = static_cast<int>(vocab0_);
  const std::string embedding_label(strategies::kEmbeddingLayer), head_label(strategies::kHeadLayer);
  std::optional<TraceSpan> span;
  Buffer dx(static_cast<size_t>(Tl) * D, 0.0f);
  MemoryHold scratch(account_, MemoryCategory::kBuffers);  // dx, and the head's and embedding's scratch
  scratch.SetTo(dx);
  if (layout.head) {
    Use(order, next++);
    if (tied_copy_bucket_ >= 0) Use(order, next++);  // the copy, read first in reverse order, then the head's bucket
    const strategies::LayerProgram& lp = program_.Layer(strategies::LayerKind::kHead);
    Begin(span, lp, head_label, ops::Grad(ops::kCrossEntropy));
    Buffer dlogits(static_cast<size_t>(T) * Vl);
    VocabShardLossBackward(dlogits.data(), s.probs.data(), s.sums.data(), s.targets.data(), T, Vl, v0, s.normaliser);
    Regather(span, lp, head_label, ops::kTensorEnterHead, s.final_h_full, s.final_h);
    Begin(span, lp, head_label, ops::Dgrad(ops::kLogits));
    Buffer dh_full(static_cast<size_t>(T) * D, 0.0f);
    Buffer dh(static_cast<size_t>(Tl) * D);
    scratch.SetTo(dx, dlogits, dh_full, dh);
    // The probabilities are read for the last time: the logits' gradient replaces them.
    Buffer().swap(s.probs);
    s.logits.Set(0);
    const float* w = model_.tied_embeddings ? P(embedding_) : P(head_);
    if (model_.tied_embeddings) {
      // logits = h E^T: dh = dlogits E, dE += dlogits^T h (the embedding's bucket reports it).
      Gemm(dh_full.data(), dlogits.data(), w, T, D, Vl, Transpose::kNo, Transpose::kNo, 1.0f, 1.0f);
      Begin(span, lp, head_label, ops::Wgrad(ops::kLogits));
      Gemm(G(embedding_), dlogits.data(), s.final_h_full.data(), Vl, D, T, Transpose::kYes, Transpose::kNo, 1.0f, 1.0f);
    } else {
      LinearBackward(dh_full.data(), nullptr, dlogits.data(), s.final_h_full.data(), w, T, D, Vl);
      if (defer_weights) {
        s.head_deferred.push_back({std::string(ops::kLogits), G(head_), s.final_h_full.data(), std::move(dlogits), T, D, Vl});
      } else {
        Begin(span, lp, head_label, ops::Wgrad(ops::kLogits));
        LinearBackward(nullptr, G(head_), dlogits.data(), s.final_h_full.data(), w, T, D, Vl);
      }
    }
    Tensor(span, lp, head_label, ops::Grad(ops::kTensorEnterHead), dh.data(), dh_full.data());
    Begin(span, lp, head_label, ops::Grad(ops::kFinalNorm));
    NormBackward(model_.norm, dx.data(), G(final_norm_), final_norm_b_ >= 0 ? G(final_norm_b_) : nullptr, dh.data(), s.final_x.data(), P(final_norm_),
                 s.final_mean.data(), s.final_rstd.data(), Tl, D);
    span.reset();
    // The final norm's input is read for the last time (a deferred W reads final_h_full).
    if (s.head_deferred.empty()) Buffer().swap(s.final_h_full);
    Buffer().swap(s.final_x);
    Buffer().swap(s.final_rstd);
    Buffer().swap(s.final_mean);
    s.Account(hidden_);  // the logits' gradient kept for a deferred W
    scratch.SetTo(dx);
    if (s.head_deferred.empty()) report(head_bucket_);
    if (tied_copy_bucket_ >= 0) report(tied_copy_bucket_);
  } else {
    std::copy(dout, dout + static_cast<size_t>(Tl) * D, dx.begin());
  }
  const int64_t l0 = layout.first_layer;
  for (size_t i = s.layers.size(); i-- > 0;) {
    const int64_t layer = l0 + static_cast<int64_t>(i);
    for (size_t b = 0; b < layer_buckets_.at(layer).size(); ++b) Use(order, next++);
    LayerSaved& saved = s.layers[i];
    if (plan_.recompute == Recompute::kFull) {
      // The layer's forward again from its kept input (the program's R ops).
      Buffer x(saved.x);
      scratch.SetTo(dx, x);
      LayerForward(layer, x.data(), saved, /*recompute=*/true);
    } else if (plan_.recompute == Recompute::kSelective) {
      AttentionCore(span, LayerProgramOf(layer), strategies::DecoderLayer(layer), saved, /*recompute=*/true);
      span.reset();
    }
    s.Account(hidden_);  // recomputed activations, held until this layer's backward is done
    scratch.SetTo(dx);
    LayerBackward(layer, dx.data(), saved);
    // What the layer saved is not read again, but for the inputs of weight gradients left for
    // the W task.
    if (defer_weights) {
      saved.KeepWeightGradInputs();
    } else {
      saved = LayerSaved();
    }
    s.Account(hidden_);
    if (!defer_weights) {
      for (int bucket : layer_buckets_.at(layer)) report(bucket);
    }
  }
  if (layout.embedding) {
    const strategies::LayerProgram& lp = program_.Layer(strategies::LayerKind::kEmbedding);
    if (pos_table_ >= 0) {
      // The learned positions' gradient from this rank's tokens (partial over tensor with
      // sequence parallelism: summed with the replicated weights').
      Use(order, next++);
      Begin(span, lp, embedding_label, ops::Grad(ops::kEmbedding));
      const int64_t first = sp_ ? tensor_rank_ * Tl : 0;
      for (int i = 0; i < Tl; ++i) {
        float* dpos = G(pos_table_) + static_cast<int64_t>(positions_[static_cast<size_t>(first + i)]) * D;
        for (int j = 0; j < D; ++j) dpos[j] += dx[static_cast<size_t>(i) * D + static_cast<size_t>(j)];
      }
    }
    Use(order, next++);  // the embedding's backward reads no parameter, but its gather keeps the order
    Buffer dfull(static_cast<size_t>(T) * D);
    scratch.SetTo(dx, dfull);
    Tensor(span, lp, embedding_label, ops::Grad(ops::kTensorEmbedding), dfull.data(), dx.data());
    Begin(span, lp, embedding_label, ops::Grad(ops::kEmbedding));
    EmbeddingShardBackward(G(embedding_), dfull.data(), s.ids.data(), T, V, v0, Vl, D);
    span.reset();
    // The program reduces gradients in the W phase: with W deferred, the W task reports it.
    if (!defer_weights) {
      report(embedding_bucket_);
      if (pos_bucket_ >= 0) report(pos_bucket_);
    }
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
  backward_ = true;
  // Runs deferred weight gradients under their W ops.
  auto run = [&](const std::vector<Deferred>& deferred, const strategies::LayerProgram& lp, const std::string& label) {
    std::optional<TraceSpan> span;
    std::string open;
    for (const Deferred& d : deferred) {
      if (d.op != open) Begin(span, lp, label, strategies::ops::Wgrad(d.op)), open = d.op;
      LinearBackward(nullptr, d.dw, d.dy.data(), d.x, nullptr, d.t, d.in, d.out);
    }
  };
  if (!s.head_deferred.empty()) {
    run(s.head_deferred, program_.Layer(strategies::LayerKind::kHead), std::string(strategies::kHeadLayer));
    std::vector<Deferred>().swap(s.head_deferred);
    s.Account(hidden_);
    if (done) done(head_bucket_);
  }
  const int64_t l0 = this->chunk(chunk).first_layer;
  for (size_t i = s.layers.size(); i-- > 0;) {
    const int64_t layer = l0 + static_cast<int64_t>(i);
    run(s.layers[i].deferred, LayerProgramOf(layer), strategies::DecoderLayer(layer));
    s.layers[i] = LayerSaved();
    s.Account(hidden_);
    if (done) {
      for (int bucket : layer_buckets_.at(layer)) done(bucket);
    }
  }
  if (this->chunk(chunk).embedding && done) {
    done(embedding_bucket_);
    if (pos_bucket_ >= 0) done(pos_bucket_);
  }
  saved_.erase(it);
}

}  // namespace shardsim::runtime
