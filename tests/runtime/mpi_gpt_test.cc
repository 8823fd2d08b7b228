// GPT-family models (LayerNorm with biases, a GELU MLP, learned positions, biases on every
// linear, tied embeddings) and Qwen2-style Q/K/V biases train exactly like one rank under every
// sharding they meet: run under mpiexec with 2, 4 and 8 ranks, each case whose mesh fits the job.
#include <gtest/gtest.h>

#include <vector>

#include "tests/runtime/equivalence_harness.h"

namespace shardsim::runtime {
namespace {

using namespace equivalence;  // NOLINT: the harness's names

// TestModel()'s shape as GPT-2/GPT-3 build it.
ModelSpec Gpt(bool tied) {
  ModelSpec m = TestModel();
  m.name = "mpi-test-gpt";
  m.num_kv_heads = m.num_heads;  // multi-head attention
  m.mlp = MlpKind::kGelu;
  m.norm = NormKind::kLayerNorm;
  m.position = PositionKind::kLearned;
  m.max_seq_len = 64;
  m.linear_bias = true;
  m.tied_embeddings = tied;
  return m;
}

// TestModel() with biases on Q, K and V only (Qwen2).
ModelSpec QkvBias() {
  ModelSpec m = TestModel();
  m.name = "mpi-test-qkv-bias";
  m.qkv_bias = true;
  return m;
}

Case Of(std::string name, MeshShape mesh, ModelSpec model, bool sequence_parallel = false, std::string schedule = "1f1b") {
  Case c{std::move(name), mesh, std::move(schedule)};
  c.sequence_parallel = sequence_parallel;
  c.model = std::move(model);
  return c;
}

std::vector<Case> Cases() {
  std::vector<Case> cases = {
      Of("gpt_data", Mesh(2, 1, 1), Gpt(false)),
      Of("gpt_tensor_sequence", Mesh(1, 2, 1), Gpt(false), true),
      Of("gpt_tensor", Mesh(1, 2, 1), Gpt(false)),
      Of("gpt_pipeline", Mesh(1, 1, 2), Gpt(false)),
      Of("gpt_tensor_sequence_pipeline", Mesh(1, 2, 2), Gpt(false), true),
      Of("gpt_tied_tensor_sequence_pipeline", Mesh(1, 2, 2), Gpt(true), true),
      Of("gpt_data_tensor_sequence_pipeline", Mesh(2, 2, 2), Gpt(true), true),
      Of("gpt_fsdp_zero3", Mesh(1, 1, 1, 1, 2), Gpt(true)),
      Of("gpt_context", Mesh(1, 1, 1, 2), Gpt(true)),
      Of("gpt_tied_data", Mesh(2, 1, 1), Gpt(true)),
      Of("gpt_pipeline_zb_h1", Mesh(1, 1, 2), Gpt(false), false, "zb-h1"),
      Of("gpt_dualpipe", Mesh(1, 1, 2), Gpt(true), false, "dualpipe"),
      Of("qkv_bias_tensor_sequence", Mesh(1, 2, 1), QkvBias(), true),
  };
  cases[7].zero_stage = 3;
  // torchtitan's way: the gathered inputs kept, no regather in the backward.
  cases.push_back(Of("gpt_tensor_sequence_keep_gathered", Mesh(1, 2, 2), Gpt(true), true));
  cases.back().sequence_parallel_inputs = "keep-gathered";
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Gpt, EquivalenceTest, ::testing::ValuesIn(Cases()), CaseName);

}  // namespace
}  // namespace shardsim::runtime
