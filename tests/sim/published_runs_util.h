// The published runs of tests/data/published_runs.json as shardsim inputs, filled the same way
// for every row (see published_runs_test.cc for the rules and their reasons).
#pragma once

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/model_spec.h"
#include "core/plan_spec.h"

namespace shardsim::published {

// Rows that describe a whole training step (not the single-layer microbenchmark).
inline std::vector<nlohmann::json> StepRows() {
  std::ifstream in(SHARDSIM_PUBLISHED_RUNS);
  std::vector<nlohmann::json> rows;
  for (const nlohmann::json& row : nlohmann::json::parse(in)) {
    if (row["parallelism"]["global_batch"].is_number() && !row["measured"].contains("per_layer_ms")) rows.push_back(row);
  }
  return rows;
}

inline bool IsNarayanan(const nlohmann::json& row) { return row["id"].get<std::string>().rfind("nar21", 0) == 0; }

inline std::string ClusterOf(const nlohmann::json& row) { return "dgx-a100:" + std::to_string(row["hardware"]["count"].get<int64_t>()); }

// Megatron's GPT with the row's shape.
inline ModelSpec ModelOf(const nlohmann::json& row) {
  const nlohmann::json& m = row["model"];
  ModelSpec model;
  model.name = m["name"];
  model.num_layers = m["layers"];
  model.hidden_size = m["hidden"];
  model.num_heads = m["heads"];
  model.num_kv_heads = m["kv_heads"];
  model.head_dim = model.hidden_size / model.num_heads;
  model.ffn_hidden_size = m["ffn"];
  model.mlp = MlpKind::kGelu;
  model.norm = NormKind::kLayerNorm;
  model.position = PositionKind::kLearned;
  model.vocab_size = m["vocab"];
  model.max_seq_len = m["seq_len"];
  model.tied_embeddings = true;
  model.linear_bias = true;
  model.dropout = true;
  return model;
}

// The row's configuration: its mesh and batch, the recomputation the paper states, unfused
// attention; micro-batches of 1 with pipelining and up to 8 sequences without where not stated;
// Narayanan's interleaved schedule with the fewest chunks (2 to 4) that divide the layers.
inline PlanSpec PlanOf(const nlohmann::json& row) {
  const nlohmann::json& par = row["parallelism"];
  const ModelSpec model = ModelOf(row);
  PlanSpec plan;
  plan.mesh.data = par["dp"];
  plan.mesh.tensor = par["tp"];
  plan.mesh.pipeline = par["pp"];
  plan.global_batch_size = par["global_batch"];
  plan.seq_len = row["model"]["seq_len"];
  plan.flash_attention = false;
  const int64_t per_replica = plan.global_batch_size / plan.mesh.data;
  plan.micro_batch_size = par["microbatch"].is_number() ? par["microbatch"].get<int64_t>() : plan.mesh.pipeline > 1 ? 1 : std::min<int64_t>(per_replica, 8);
  if (IsNarayanan(row)) {
    plan.recompute = Recompute::kFull;
    for (int64_t v = 2; v <= 4 && plan.mesh.pipeline > 1; ++v) {
      if (model.num_layers % (plan.mesh.pipeline * v) == 0 && (per_replica / plan.micro_batch_size) % plan.mesh.pipeline == 0) {
        plan.pipeline_schedule = "interleaved-1f1b";
        plan.virtual_stages = v;
        break;
      }
    }
  } else {
    plan.recompute = Recompute::kSelective;
    plan.sequence_parallel = true;
  }
  return plan;
}

}  // namespace shardsim::published
