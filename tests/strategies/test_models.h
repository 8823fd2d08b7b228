// Models and plans the strategy tests share.
#pragma once

#include "core/model_presets.h"
#include "core/plan_spec.h"

namespace shardsim::strategies {

// Megatron's GPT layer as Korthikanti et al. 2022 count it: MHA, GELU MLP of 4h, dropout.
inline ModelSpec GptModel(int64_t layers, int64_t hidden, int64_t heads) {
  ModelSpec m;
  m.name = "gpt";
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.num_heads = heads;
  m.num_kv_heads = heads;
  m.head_dim = hidden / heads;
  m.ffn_hidden_size = 4 * hidden;
  m.mlp = MlpKind::kGelu;
  m.norm = NormKind::kLayerNorm;
  m.position = PositionKind::kLearned;
  m.vocab_size = 51200;
  m.max_seq_len = 2048;
  m.tied_embeddings = true;
  m.linear_bias = true;
  m.dropout = true;
  return m;
}

inline PlanSpec Plan(int64_t data, int64_t tensor, int64_t pipeline, int64_t global_batch, int64_t seq_len) {
  PlanSpec p;
  p.mesh.data = data;
  p.mesh.tensor = tensor;
  p.mesh.pipeline = pipeline;
  p.global_batch_size = global_batch;
  p.seq_len = seq_len;
  return p;
}

}  // namespace shardsim::strategies
