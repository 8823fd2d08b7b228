#include "strategies/build_step.h"

#include <algorithm>

#include "core/error.h"
#include "strategies/data_parallel.h"
#include "strategies/expert_parallel.h"
#include "strategies/mamba_layer.h"
#include "strategies/memory_model.h"
#include "strategies/op_names.h"
#include "strategies/recompute.h"
#include "strategies/schedule.h"
#include "strategies/state_bytes.h"
#include "strategies/tensor_parallel.h"

namespace shardsim::strategies {
namespace {

LayerShape ShapeOf(const PlanSpec& p) {
  LayerShape s;
  s.tokens = p.micro_batch_size * p.seq_len / p.mesh.context;
  s.seq_len = p.seq_len;
  s.tensor = p.mesh.tensor;
  s.sequence_parallel = p.sequence_parallel && p.mesh.tensor > 1;
  // FP8 training (Transformer Engine style) runs the GEMMs in fp8 but keeps activations and
  // their communication in 16 bits.
  s.element_bytes = ComputeElementBytes(p);
  const int64_t microbatches = DerivePlanShape(p).num_microbatches;
  const WeightCastShares casts = Fp8WeightCastShares(p, microbatches);
  s.weight_cast_forward = casts.forward;
  s.weight_cast_backward = casts.backward_input;
  const WeightCastShares expert_casts = Fp8WeightCastShares(p, microbatches, ParamKind::kExpert);
  s.expert_weight_cast_forward = expert_casts.forward;
  s.expert_weight_cast_backward = expert_casts.backward_input;
  s.sixteen_bit_wgrad = SixteenBitWgrad(p);
  s.fp8 = p.dtype == "fp8";
  return s;
}

// Parameters of one layer on one device: attention and norms over tensor, experts over
// tensor x expert (the router and norms are replicated).
struct LayerParams {
  double dense = 0, expert = 0;
};

// A Mamba-2 mixer's parameters on one tensor rank (mamba_layer.h: everything split by heads and
// groups) and its pre-norm's.
double MambaLayerParams(const ModelSpec& m, const PlanSpec& p) {
  const MambaSpec& s = *m.mamba;
  const MambaWidths w = MambaWidthsOf(m, p.mesh.tensor);
  const double d = static_cast<double>(m.hidden_size);
  return d * static_cast<double>(w.in_proj() + w.inner) + static_cast<double>(w.conv() * (s.conv_kernel + 1) + 3 * w.heads + w.inner) + d;
}

LayerParams ParamsOf(const ModelSpec& m, const PlanSpec& p, bool moe);

// The parameters of a decoder layer of `kind` on one device: a transformer layer's, or a hybrid
// layer's one block with its pre-norm.
LayerParams ParamsOfKind(const ModelSpec& m, const PlanSpec& p, LayerKind kind) {
  const LayerBlocks blocks = BlocksOf(kind);
  if (blocks.transformer()) return ParamsOf(m, p, blocks.moe);
  if (blocks.mamba) return {.dense = MambaLayerParams(m, p)};
  const LayerParams whole = ParamsOf(m, p, blocks.moe);
  const ParamCounts c = CountParams(m);
  const double d = static_cast<double>(m.hidden_size), attention = static_cast<double>(c.per_layer_attention) / static_cast<double>(p.mesh.tensor);
  // ParamsOf's layer less the other block and its norm.
  if (blocks.attention) return {.dense = attention + d};
  return {.dense = whole.dense - attention - d, .expert = whole.expert};
}

LayerParams ParamsOf(const ModelSpec& m, const PlanSpec& p, bool moe) {
  const ParamCounts c = CountParams(m);
  const double t = static_cast<double>(p.mesh.tensor), d = static_cast<double>(m.hidden_size);
  const double matrices = m.mlp == MlpKind::kSwiGlu ? 3.0 : 2.0;
  LayerParams lp;
  // Attention is split over tensor, except MLA's low-rank down projections (replicated).
  double replicated = 0;
  if (m.mla) {
    const MlaSpec& a = *m.mla;
    replicated = d * static_cast<double>(a.q_lora_rank + a.kv_lora_rank + a.qk_rope_head_dim) + static_cast<double>(a.q_lora_rank + a.kv_lora_rank);
  }
  lp.dense = (static_cast<double>(c.per_layer_attention) - replicated) / t + replicated + 2 * d;
  if (moe) {
    const MoeSpec& e = *m.moe;
    // Shared experts read D, routed ones the routed width (LatentMoE's latent); the router and the
    // latent projections are replicated over tensor.
    const double shared = matrices * d * static_cast<double>(e.expert_ffn_hidden_size) / t;
    const double routed = matrices * static_cast<double>(RoutedWidth(m)) * static_cast<double>(e.expert_ffn_hidden_size) /
                          static_cast<double>(ExpertTensorDegree(p));
    lp.dense += shared * static_cast<double>(e.num_shared_experts) + d * static_cast<double>(e.num_experts + 2 * e.latent_size);
    lp.expert = routed * static_cast<double>(e.num_experts) / static_cast<double>(ExpertDegree(p));
  } else {
    lp.dense += matrices * d * static_cast<double>(m.ffn_hidden_size) / t;
  }
  return lp;
}

// MLA's low-rank down projections and their latent norms, per layer: replicated over tensor,
// but each tensor rank's backward sees only its own heads, so their gradients are partial sums
// over tensor, with sequence parallelism or without.
double MlaDownParams(const ModelSpec& m) {
  if (!m.mla) return 0;
  const MlaSpec& a = *m.mla;
  return static_cast<double>(m.hidden_size) * static_cast<double>(a.q_lora_rank + a.kv_lora_rank + a.qk_rope_head_dim) +
         static_cast<double>(a.q_lora_rank + a.kv_lora_rank);
}

// Parameters of `stage` replicated over tensor whose gradients are partial sums over tensor:
// with sequence parallelism (`sequence_parallel`: each tensor rank sees a share of the tokens),
// each layer's two norms with their LayerNorm biases, the row-parallel linears' biases, an MoE
// layer's router, the final norm and a learned position table; always, MLA's down projections.
double ReplicatedOverTensor(const ModelSpec& m, bool sequence_parallel, const Stage& stage, bool holds_embedding, bool holds_head) {
  const double d = static_cast<double>(m.hidden_size);
  const double norm = (m.norm == NormKind::kLayerNorm ? 2 : 1) * d, biases = m.linear_bias ? 2 * d : 0;
  double n = 0;
  for (const Chunk& chunk : stage.chunks) {
    for (const auto& [kind, count, sixteen_bit] : chunk.layers) {
      const bool mtp = kind == LayerKind::kMtp;
      if (!IsTransformerLayer(kind) && !mtp) continue;
      n += static_cast<double>(count) * MlaDownParams(m);
      if (!sequence_parallel) continue;
      // A transformer layer's two norms (a hybrid layer's one; a Mamba-2 mixer's gated norm is
      // split over tensor with its heads), a multi-token-prediction module's layer (a hybrid
      // model's: one per block) and its three norms of width D.
      const LayerBlocks blocks = BlocksOf(kind);
      const std::string mtp_blocks = mtp ? MtpBlocks(m) : std::string();
      const double layer_norms = mtp && IsHybrid(m) ? static_cast<double>(mtp_blocks.size()) * norm : mtp || blocks.transformer() ? 2 * norm + biases : norm;
      n += static_cast<double>(count) * (layer_norms + (mtp ? 3 * d : 0));
      const auto routers = mtp ? std::count(mtp_blocks.begin(), mtp_blocks.end(), kHybridMoe) : IsMoeKind(kind) ? 1 : 0;
      if (routers > 0) n += static_cast<double>(count * routers) * d * static_cast<double>(m.moe->num_experts + 2 * m.moe->latent_size);
    }
  }
  if (!sequence_parallel) return n;
  if (holds_head) n += (m.norm == NormKind::kLayerNorm ? 2 : 1) * d;
  if (holds_embedding && m.position == PositionKind::kLearned) n += static_cast<double>(m.max_seq_len) * d;
  return n;
}

// Activation offloading's copies (PlanSpec::offload_layers): what the layer keeps for its backward
// goes to host memory under its forward and comes back under its backward, each overlapped with
// the layer's compute on the host stream (Transformer Engine's CPU offload, under Megatron-core,
// copies each saved tensor out on its own stream as the forward saves it and reloads a layer
// ahead of the backward that reads it; XLA's host offload under MaxText's *_offloaded policies
// is scheduled the same way). Every layer program carries them; the step's costing applies them
// to the offloaded layers only (strategies::OffloadedLayers).
void AppendOffload(LayerProgram& layer, const ModelSpec& m, const PlanSpec& p) {
  const double bytes = LayerKindActivationBytes(m, p, ShapeOf(p).tokens, layer.kind);
  layer.ops.push_back(CommOp(std::string(ops::kOffload), Phase::kForward, Stream::kHost, CollectiveOp::kPermute, {}, bytes, true));
  layer.ops.push_back(CommOp(std::string(ops::kReload), Phase::kBackwardInput, Stream::kHost, CollectiveOp::kPermute, {}, bytes, true));
}

// The program of transformer layers of `kind`; empty for a kind the model lacks (MoE in a dense
// model, local attention without a sliding window).
LayerProgram TransformerLayer(const ModelSpec& m, const PlanSpec& p, LayerKind kind) {
  const bool moe = IsMoeKind(kind);
  const LayerBlocks blocks = BlocksOf(kind);
  const bool hybrid_kind = !blocks.transformer();
  if ((moe && !m.moe) || (IsLocalAttentionKind(kind) && !m.sliding_window) || (hybrid_kind != IsHybrid(m)) ||
      (hybrid_kind && NumHybridLayers(m, blocks.pattern()) == 0)) {
    return LayerProgram{kind, {}};
  }
  LayerBuilder builder(kind, ShapeOf(p));
  if (blocks.mamba) AppendMambaBlock(builder, m, p);
  if (blocks.attention) AppendAttentionBlock(builder, m, p);
  if (blocks.moe) AppendMoeBlock(builder, m, p);
  if (blocks.mlp) AppendMlpBlock(builder, m, p, m.ffn_hidden_size, ops::kMlp);
  LayerProgram layer = builder.Build();
  ApplyRecompute(layer, m, p);
  const LayerParams lp = ParamsOfKind(m, p, kind);
  AppendShardedParamOps(layer, p, lp.dense, lp.expert);
  // Last, so that each phase waits for its collectives before its host copies, in the estimate
  // (op_cost.cc: host copies hide under what the rest makes the phase) as in the simulation.
  if (p.offload_layers > 0) AppendOffload(layer, m, p);
  return layer;
}

// One multi-token-prediction module's parameters on one device: its layer's (a hybrid model's
// blocks', each with its pre-norm), the 2D -> D projection split over tensor and three norms (the
// two inputs', the head's).
LayerParams MtpParamsOf(const ModelSpec& m, const PlanSpec& p) {
  LayerParams lp;
  if (IsHybrid(m)) {
    for (const char block : m.mtp_pattern) {
      const LayerParams b = ParamsOfKind(m, p, HybridBlockKind(block));
      lp.dense += b.dense, lp.expert += b.expert;
    }
  } else {
    lp = ParamsOf(m, p, MtpLayerIsMoe(m));
  }
  const double d = static_cast<double>(m.hidden_size);
  lp.dense += 2 * d * d / static_cast<double>(p.mesh.tensor) + 3 * d;
  return lp;
}

// A multi-token-prediction module: entry, transformer layer and the shared head with its loss;
// recomputation reruns the entry and the layer, as it reruns a layer, never the head.
LayerProgram MtpModule(const ModelSpec& m, const PlanSpec& p) {
  auto build = [&m, &p](bool with_head) {
    LayerBuilder builder(LayerKind::kMtp, ShapeOf(p));
    AppendMtpEntry(builder, m, p);
    for (const char block : MtpBlocks(m)) {
      if (block == kHybridMamba) AppendMambaBlock(builder, m, p);
      if (block == kHybridAttention) AppendAttentionBlock(builder, m, p);
      if (block == kHybridMoe) AppendMoeBlock(builder, m, p);
      if (block == kHybridMlp) AppendMlpBlock(builder, m, p, m.ffn_hidden_size, ops::kMlp);
    }
    if (with_head) AppendHead(builder, m, p);
    return builder.Build();
  };
  LayerProgram module = build(true);
  LayerProgram rerun = build(false);
  ApplyRecompute(rerun, m, p);
  for (Op& op : rerun.ops) {
    if (op.phase == Phase::kRecompute) module.ops.push_back(std::move(op));
  }
  const LayerParams lp = MtpParamsOf(m, p);
  AppendShardedParamOps(module, p, lp.dense, lp.expert);
  return module;
}

}  // namespace

namespace {

// The layer programs a LayerCache keeps, in its order: they depend on the plan, not its schedule.
constexpr std::array<LayerKind, kTransformerKinds.size() + 1> kCachedKinds = {
    LayerKind::kDense, LayerKind::kMoe,           LayerKind::kDenseLocal, LayerKind::kMoeLocal, LayerKind::kMamba,
    LayerKind::kAttentionOnly, LayerKind::kMlpOnly, LayerKind::kMoeOnly, LayerKind::kMtp};
static_assert(kCachedKinds[kTransformerKinds.size()] == LayerKind::kMtp);

// The program index of cache slot `k` (LayerCache::layers_): kCachedKinds, then the transformer
// kinds' 16-bit twins.
size_t CachedProgramIndex(size_t k) {
  if (k < kCachedKinds.size()) return static_cast<size_t>(kCachedKinds[k]);
  return LayerRun{.kind = kTransformerKinds[k - kCachedKinds.size()], .sixteen_bit = true}.program();
}

LayerProgram CachedProgram(const ModelSpec& m, const PlanSpec& p, size_t k) {
  if (k >= kCachedKinds.size()) {
    // A decoder layer the fp8 plan keeps at 16 bits; none where it keeps none.
    const LayerKind kind = kTransformerKinds[k - kCachedKinds.size()];
    if (!HasSixteenBitLayers(p)) return LayerProgram{.kind = kind, .sixteen_bit = true};
    LayerProgram twin = TransformerLayer(m, AtSixteenBits(p), kind);
    twin.sixteen_bit = true;
    // Its products run at 16 bits in the fp8 plan's roofline (Op::sixteen_bit).
    for (Op& op : twin.ops) op.sixteen_bit = op.kind == ComputeKind::kMatmul && !op.is_comm();
    return twin;
  }
  const LayerKind kind = kCachedKinds[k];
  if (kind != LayerKind::kMtp) return TransformerLayer(m, p, kind);
  return m.mtp_layers > 0 ? MtpModule(m, p) : LayerProgram{.kind = LayerKind::kMtp};
}

// `plan` with the fields the layer programs do not read set to their defaults.
PlanSpec WithoutSchedule(const PlanSpec& plan) {
  PlanSpec p = plan;
  p.pipeline_schedule = PlanSpec{}.pipeline_schedule;
  p.virtual_stages = PlanSpec{}.virtual_stages;
  return p;
}

}  // namespace

void LayerCache::Prepare(const ModelSpec& model, const PlanSpec& plan) {
  SHARDSIM_CHECK(model_ == nullptr || model_ == &model, "a LayerCache serves one model");
  model_ = &model;
  PlanSpec shared = WithoutSchedule(plan);
  if (valid_ && shared == plan_) return;
  plan_ = std::move(shared);
  valid_ = true, has_layers_ = false;
  step_ops_.clear();
}

void LayerCache::Recycle(StepProgram&& program) {
  if (!valid_ || has_layers_ || WithoutSchedule(program.plan) != plan_) return;
  for (size_t k = 0; k < layers_.size(); ++k) layers_[k] = std::move(program.layer_programs[CachedProgramIndex(k)]);
  has_layers_ = true;
}

const std::vector<Op>& LayerCache::StepOps(const PlanSpec& plan, const Stage& stage) {
  const std::array<double, 4> key = {stage.dense_params, stage.expert_params, stage.sixteen_bit_params, stage.sixteen_bit_expert_params};
  for (const auto& [params, ops] : step_ops_) {
    if (params == key) return ops;
  }
  step_ops_.emplace_back(key, DataParallelStepOps(plan, key[0], key[1], key[2], key[3]));
  return std::get<1>(step_ops_.back());
}

StepProgram BuildStep(const ModelSpec& m, const PlanSpec& p, TaskLists* task_lists, LayerCache* cache) {
  StepProgram program;
  program.model = m;
  program.plan = p;
  program.schedule = &ScheduleOf(p);
  const PlanShape shape = DerivePlanShape(p);
  program.microbatches = shape.num_microbatches;
  program.tokens_per_microbatch = p.micro_batch_size * p.seq_len / p.mesh.context;
  program.layout = LayOut(m, p);

  auto& programs = program.layer_programs;
  if (cache) cache->Prepare(m, p);
  const bool cached = cache && cache->has_layers_;
  for (size_t k = 0; k < LayerCache::kPrograms; ++k) programs[CachedProgramIndex(k)] = cached ? std::move(cache->layers_[k]) : CachedProgram(m, p, k);
  if (cached) cache->has_layers_ = false;
  const double t = static_cast<double>(p.mesh.tensor);
  const double vocab_params = static_cast<double>(m.vocab_size) * static_cast<double>(m.hidden_size) / t;
  // The tied head shares the embedding's matrix when both sit on one stage (one stage, or ZB-V's
  // first stage); elsewhere it is a copy.
  const auto& path = program.layout.paths.front();
  const bool tied_on_one_stage = m.tied_embeddings && path.front().first == path.back().first;
  {
    LayerBuilder embedding(LayerKind::kEmbedding, ShapeOf(p));
    AppendEmbedding(embedding, m, p);
    programs[static_cast<size_t>(LayerKind::kEmbedding)] = embedding.Build();
    AppendShardedParamOps(programs[static_cast<size_t>(LayerKind::kEmbedding)], p, vocab_params, 0, vocab_params);
    LayerBuilder head(LayerKind::kHead, ShapeOf(p));
    AppendHead(head, m, p);
    programs[static_cast<size_t>(LayerKind::kHead)] = head.Build();
    // The final norm's weight and the output matrix (shared with a tied embedding on one stage).
    const double head_matrix = tied_on_one_stage ? 0 : vocab_params;
    AppendShardedParamOps(programs[static_cast<size_t>(LayerKind::kHead)], p, head_matrix + static_cast<double>(m.hidden_size), 0, head_matrix);
  }

  const int64_t stages = p.mesh.pipeline;
  const bool two_copies = program.layout.paths.size() > 1;  // DualPipe: every part twice
  std::array<LayerParams, kLayerKinds> layer_params{};
  for (LayerKind kind : kTransformerKinds) {
    if (!programs[static_cast<size_t>(kind)].ops.empty()) layer_params[static_cast<size_t>(kind)] = ParamsOfKind(m, p, kind);
  }
  const LayerParams mtp_module = m.mtp_layers > 0 ? MtpParamsOf(m, p) : LayerParams{};
  program.stages.resize(static_cast<size_t>(stages));
  // The multi-token-prediction modules read the embedding and run the output head: the stage
  // that runs them keeps a copy of whichever it does not hold (Megatron-core builds both where
  // `mtp_process`; tied, one matrix serves both), each kept equal with its original once per step.
  int64_t embedding_stage = -1, head_stage = -1, mtp_stage = -1;
  for (int64_t s = 0; s < stages; ++s) {
    for (const ChunkLayout& c : program.layout.at[static_cast<size_t>(s)]) {
      if (c.embedding && embedding_stage < 0) embedding_stage = s;
      if (c.head && head_stage < 0) head_stage = s;
      if (c.mtp > 0) mtp_stage = s;
    }
  }
  bool embedding_copied = false, head_copied = false;
  if (mtp_stage >= 0 && !two_copies) {
    embedding_copied = mtp_stage != embedding_stage && !(m.tied_embeddings && mtp_stage == head_stage);
    head_copied = !m.tied_embeddings && mtp_stage != head_stage;
  }
  for (int64_t s = 0; s < stages; ++s) {
    Stage& stage = program.stages[static_cast<size_t>(s)];
    double dense = 0, expert = 0, vocab = 0, sixteen_bit_dense = 0, sixteen_bit_expert = 0;
    bool holds_embedding = false, holds_head = false;
    for (int64_t c = 0; c < program.layout.chunks; ++c) {
      Chunk chunk;
      chunk.layout = program.layout.Chunk(s, c);
      auto append = [&chunk](LayerKind kind, bool sixteen_bit = false) {
        if (!chunk.layers.empty() && chunk.layers.back().kind == kind && chunk.layers.back().sixteen_bit == sixteen_bit) {
          ++chunk.layers.back().count;
        } else {
          chunk.layers.push_back({.kind = kind, .count = 1, .sixteen_bit = sixteen_bit});
        }
      };
      if (chunk.layout.embedding) {
        append(LayerKind::kEmbedding);
        holds_embedding = true;
        // The vocabulary is split over tensor; a learned position table is replicated.
        const double positions = m.position == PositionKind::kLearned ? static_cast<double>(m.max_seq_len * m.hidden_size) : 0.0;
        dense += vocab_params + positions;
        vocab += vocab_params + positions;
      }
      for (int64_t layer = chunk.layout.first_layer; layer < chunk.layout.first_layer + chunk.layout.layers; ++layer) {
        const LayerKind kind = LayerKindOf(m, layer);
        const bool sixteen_bit = SixteenBitLayer(p, m.num_layers, layer);
        append(kind, sixteen_bit);
        const LayerParams& lp = layer_params[static_cast<size_t>(kind)];
        dense += lp.dense;
        expert += lp.expert;
        if (sixteen_bit) sixteen_bit_dense += lp.dense, sixteen_bit_expert += lp.expert;
      }
      // The multi-token-prediction modules after the decoder layers, where the layout puts them
      // (beside the head by default). Each runs the shared head and its loss in its own program.
      // Shared weights (mtp_shared_weights): one module's, however many run.
      for (int64_t k = 0; k < chunk.layout.mtp; ++k) append(LayerKind::kMtp);
      const double mtp_weights = static_cast<double>(m.mtp_shared_weights ? std::min<int64_t>(1, chunk.layout.mtp) : chunk.layout.mtp);
      dense += mtp_weights * mtp_module.dense;
      expert += mtp_weights * mtp_module.expert;
      if (chunk.layout.head) {
        append(LayerKind::kHead);
        holds_head = true;
        dense += (tied_on_one_stage ? 0 : vocab_params) + static_cast<double>(m.hidden_size);
        vocab += tied_on_one_stage ? 0 : vocab_params;
      }
      stage.chunks.push_back(std::move(chunk));
    }
    // Vocabulary matrices this stage keeps equal with a copy on another stage: the tied embedding
    // and head apart, and the multi-token-prediction modules' copies (above) and their originals.
    double synced = m.tied_embeddings && stages > 1 && !two_copies && holds_embedding != holds_head ? 1 : 0;
    const double mtp_copies = (embedding_copied ? 1 : 0) + (head_copied ? 1 : 0);
    if (s == mtp_stage) dense += mtp_copies * vocab_params, vocab += mtp_copies * vocab_params, synced += mtp_copies;
    if (s == embedding_stage && embedding_copied) synced += 1;
    if (s == head_stage && head_copied) synced += 1;
    stage.dense_params = dense;
    stage.expert_params = expert;
    stage.sixteen_bit_params = vocab + sixteen_bit_dense;
    stage.sixteen_bit_expert_params = sixteen_bit_expert;
    // Stages of equal parameters (most of a pipeline) share one derivation.
    if (cache) {
      stage.step_ops = cache->StepOps(p, stage);
    } else {
      stage.step_ops = DataParallelStepOps(p, dense, expert, stage.sixteen_bit_params, sixteen_bit_expert);
    }
    // Sequence parallelism: the weights replicated over tensor (norms, the MoE router, learned
    // positions) see a share of the tokens on each tensor rank, so their gradients are summed
    // over tensor once per step (Megatron-LM all-reduces the layernorm gradients so); MLA's down
    // projections see a share of the heads, so theirs are summed too.
    if (ShapeOf(p).sequence_parallel || (m.mla && t > 1)) {
      const double replicated = ReplicatedOverTensor(m, ShapeOf(p).sequence_parallel, stage, holds_embedding, holds_head);
      stage.step_ops.insert(stage.step_ops.begin(), CommOp(std::string(ops::kTensorReplicatedGrads), Phase::kBackwardWeight, Stream::kTensor,
                                                            CollectiveOp::kAllReduce, {"tensor"}, replicated * GradReduceBytes(p), false));
    }
    // Copies of one matrix on two stages keep their gradients equal once per step: the tied
    // embedding and head (Megatron's embedding group), and DualPipe's two copies of every part.
    // Costed as an exchange with the pipeline neighbour.
    if (synced > 0 || two_copies) {
      const double shared = two_copies ? stage.params() / 2 : synced * vocab_params;
      stage.step_ops.insert(stage.step_ops.begin(), CommOp(std::string(two_copies ? ops::kDualPipeCopySync : ops::kTiedEmbeddingSync), Phase::kBackwardWeight,
                                                            Stream::kData, CollectiveOp::kPermute, {"pipeline"}, shared * GradReduceBytes(p), false));
    }
  }
  TaskLists own;  // one set of task lists for every stage, when the caller keeps none
  for (int64_t s = 0; s < stages; ++s) program.stages[static_cast<size_t>(s)].activation_peak_bytes = StageActivationPeak(program, s, task_lists ? task_lists : &own);
  program.pipeline_send =
      CommOp(std::string(ops::kPipelineSend), Phase::kForward, Stream::kPipeline, CollectiveOp::kPermute, {"pipeline"},
             static_cast<double>(program.tokens_per_microbatch) * static_cast<double>(m.hidden_size) * ShapeOf(p).element_bytes /
                 (ShapeOf(p).sequence_parallel ? t : 1.0),
             p.overlap.pipeline);
  const FlopsPerToken flops = ForwardFlopsPerToken(m, p.seq_len);
  program.palm_flops_per_step = flops.training() * static_cast<double>(shape.tokens_per_step);
  program.model_flops_per_step = flops.causal_training() * static_cast<double>(shape.tokens_per_step);
  return program;
}

}  // namespace shardsim::strategies
