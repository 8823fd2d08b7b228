#include "strategies/build_step.h"

#include "core/error.h"
#include "strategies/data_parallel.h"
#include "strategies/expert_parallel.h"
#include "strategies/memory_model.h"
#include "strategies/pipeline_schedule.h"
#include "strategies/recompute.h"
#include "strategies/tensor_parallel.h"

namespace shardsim::strategies {
namespace {

constexpr int kDense = 0, kMoe = 1, kEmbedding = 2, kHead = 3;

LayerShape ShapeOf(const PlanSpec& p) {
  LayerShape s;
  s.tokens = p.micro_batch_size * p.seq_len / p.mesh.context;
  s.seq_len = p.seq_len;
  s.tensor = p.mesh.tensor;
  s.sequence_parallel = p.sequence_parallel && p.mesh.tensor > 1;
  // FP8 training (Transformer Engine style) runs the GEMMs in fp8 but keeps activations and
  // their communication in 16 bits.
  s.element_bytes = p.dtype == "fp32" ? 4 : 2;
  return s;
}

// Parameters of one layer on one device: attention and norms over tensor, experts over
// tensor x expert (the router and norms are replicated).
struct LayerParams {
  double dense = 0, expert = 0;
};

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
    const double expert = matrices * d * static_cast<double>(e.expert_ffn_hidden_size) / t;
    lp.dense += expert * static_cast<double>(e.num_shared_experts) + d * static_cast<double>(e.num_experts);
    lp.expert = expert * static_cast<double>(e.num_experts) / static_cast<double>(p.mesh.expert);
  } else {
    lp.dense += matrices * d * static_cast<double>(m.ffn_hidden_size) / t;
  }
  return lp;
}

LayerProgram TransformerLayer(const ModelSpec& m, const PlanSpec& p, bool moe) {
  LayerBuilder builder(moe ? "moe" : "dense", ShapeOf(p));
  AppendAttentionBlock(builder, m, p);
  if (moe) {
    AppendMoeBlock(builder, m, p);
  } else {
    AppendMlpBlock(builder, m, p, m.ffn_hidden_size, "mlp");
  }
  LayerProgram layer = builder.Build();
  ApplyRecompute(layer, p.recompute);
  const LayerParams lp = ParamsOf(m, p, moe);
  AppendShardedParamOps(layer, p, lp.dense, lp.expert);
  return layer;
}

}  // namespace

StepProgram BuildStep(const ModelSpec& m, const PlanSpec& p) {
  StepProgram program;
  program.model = m;
  program.plan = p;
  const PlanShape shape = DerivePlanShape(p);
  program.microbatches = shape.num_microbatches;
  program.tokens_per_microbatch = p.micro_batch_size * p.seq_len / p.mesh.context;

  program.layer_programs.resize(4);
  program.layer_programs[kDense] = TransformerLayer(m, p, false);
  program.layer_programs[kMoe] = m.moe ? TransformerLayer(m, p, true) : LayerProgram{"moe", {}};
  {
    const double vocab = static_cast<double>(m.vocab_size) * static_cast<double>(m.hidden_size) / static_cast<double>(p.mesh.tensor);
    LayerBuilder embedding("embedding", ShapeOf(p));
    AppendEmbedding(embedding, m, p);
    program.layer_programs[kEmbedding] = embedding.Build();
    AppendShardedParamOps(program.layer_programs[kEmbedding], p, vocab, 0);
    LayerBuilder head("head", ShapeOf(p));
    AppendHead(head, m, p);
    program.layer_programs[kHead] = head.Build();
    // A tied head on the embedding's stage shares its matrix; elsewhere it is a copy.
    AppendShardedParamOps(program.layer_programs[kHead], p, m.tied_embeddings && p.mesh.pipeline == 1 ? 0 : vocab, 0);
  }

  // Model parts hold consecutive layers, as even as possible (LayersPerPart). Chunk c of stage s is part
  // c p + s; DualPipe gives each stage part s for micro-batches flowing down the pipeline and a
  // second copy of part p - 1 - s for those flowing up.
  const int64_t stages = p.mesh.pipeline;
  const bool dual = p.pipeline_schedule == PipelineSchedule::kDualPipe && stages > 1;
  const int64_t chunks = dual ? 2 : p.virtual_stages, parts = dual ? stages : stages * chunks;
  program.paths.assign(dual ? 2 : 1, std::vector<std::pair<int64_t, int64_t>>(static_cast<size_t>(parts)));
  program.scheduled_microbatches = ScheduledMicrobatches(stages, chunks, program.microbatches);
  program.second_direction_from = dual ? program.scheduled_microbatches / 2 : program.scheduled_microbatches;
  const std::vector<int64_t> part_layers = LayersPerPart(m.num_layers, parts);
  std::vector<int64_t> first_layer(static_cast<size_t>(parts) + 1, 0);
  for (int64_t j = 0; j < parts; ++j) first_layer[static_cast<size_t>(j) + 1] = first_layer[static_cast<size_t>(j)] + part_layers[static_cast<size_t>(j)];
  const double t = static_cast<double>(p.mesh.tensor);
  const double vocab_params = static_cast<double>(m.vocab_size) * static_cast<double>(m.hidden_size) / t;
  const LayerParams dense_layer = ParamsOf(m, p, false);
  const LayerParams moe_layer = m.moe ? ParamsOf(m, p, true) : LayerParams{};
  program.stages.resize(static_cast<size_t>(stages));
  for (int64_t s = 0; s < stages; ++s) {
    Stage& stage = program.stages[static_cast<size_t>(s)];
    double dense = 0, expert = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      Chunk chunk;
      const int64_t part = dual ? (c == 0 ? s : stages - 1 - s) : c * stages + s;
      chunk.direction = dual ? c : 0;
      chunk.position = part;
      program.paths[static_cast<size_t>(chunk.direction)][static_cast<size_t>(part)] = {s, c};
      if (part == 0) {
        chunk.layers.push_back({kEmbedding, 1});
        // The vocabulary is split over tensor; a learned position table is replicated.
        dense += vocab_params + (m.position == PositionKind::kLearned ? static_cast<double>(m.max_seq_len * m.hidden_size) : 0.0);
      }
      for (int64_t layer = first_layer[static_cast<size_t>(part)]; layer < first_layer[static_cast<size_t>(part) + 1]; ++layer) {
        const bool moe = IsMoeLayer(m, layer);
        const int index = moe ? kMoe : kDense;
        if (!chunk.layers.empty() && chunk.layers.back().first == index) {
          ++chunk.layers.back().second;
        } else {
          chunk.layers.push_back({index, 1});
        }
        const LayerParams& lp = moe ? moe_layer : dense_layer;
        dense += lp.dense;
        expert += lp.expert;
      }
      if (part == parts - 1) {
        chunk.layers.push_back({kHead, 1});
        // A tied head on the embedding's stage shares its matrix; on another stage it is a copy.
        dense += (m.tied_embeddings && stages == 1 ? 0 : vocab_params) + static_cast<double>(m.hidden_size);
      }
      stage.chunks.push_back(chunk);
    }
    stage.params = dense + expert;
    stage.tasks = ScheduleStage(p.pipeline_schedule, stages, program.scheduled_microbatches, chunks, s);
    stage.step_ops = DataParallelStepOps(p, dense, expert);
    // Copies of one matrix on two stages keep their gradients equal once per step: the tied
    // embedding and head (Megatron's embedding group), and DualPipe's two copies of every part.
    // Costed as an exchange with the pipeline neighbour.
    const bool holds_tied_copy = m.tied_embeddings && stages > 1 && !dual && (s == 0 || s == stages - 1);
    if (holds_tied_copy || dual) {
      const double shared = dual ? stage.params / 2 : vocab_params;
      stage.step_ops.insert(stage.step_ops.begin(), CommOp(dual ? "dualpipe_copy_grad_sync" : "tied_embedding_grad_sync", Phase::kBackwardWeight,
                                                            Stream::kData, CollectiveOp::kPermute, {"pipeline"}, shared * 2, false));
    }
  }
  for (Stage& stage : program.stages) stage.activation_peak_bytes = StageActivationPeak(program, stage);
  program.pipeline_send =
      CommOp("pp_send", Phase::kForward, Stream::kPipeline, CollectiveOp::kPermute, {"pipeline"},
             static_cast<double>(program.tokens_per_microbatch) * static_cast<double>(m.hidden_size) * ShapeOf(p).element_bytes /
                 (ShapeOf(p).sequence_parallel ? t : 1.0),
             p.overlap.pipeline);
  const FlopsPerToken flops = ForwardFlopsPerToken(m, p.seq_len);
  program.palm_flops_per_step = flops.training() * static_cast<double>(shape.tokens_per_step);
  program.model_flops_per_step = 3 * (flops.matmul + flops.attention / 2) * static_cast<double>(shape.tokens_per_step);
  return program;
}

}  // namespace shardsim::strategies
