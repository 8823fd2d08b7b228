// Multi-head latent attention (runtime/mla_attention.cc) trains exactly like one rank: data,
// tensor (with and without sequence parallelism), data x tensor, pipeline, FSDP, context (ring
// attention over the padded heads), with MoE layers; run under mpiexec with 2, 4 and 8 ranks,
// each case whose mesh fits the job.
#include <gtest/gtest.h>

#include <vector>

#include "tests/runtime/equivalence_harness.h"

namespace shardsim::runtime {
namespace {

using namespace equivalence;  // NOLINT: the harness's names

// TestModel() with MLA: compressed queries, a value width below the query/key width (DeepSeek's
// shape), or uncompressed queries with a value width above it.
ModelSpec Mla(bool compressed_queries, bool moe = false) {
  ModelSpec m = moe ? TestMoeModel() : TestModel();
  m.name = "mpi-test-mla";
  m.num_kv_heads = m.num_heads;
  m.mla = compressed_queries ? MlaSpec{.q_lora_rank = 32, .kv_lora_rank = 16, .qk_nope_head_dim = 16, .qk_rope_head_dim = 8, .v_head_dim = 16}
                             : MlaSpec{.q_lora_rank = 0, .kv_lora_rank = 16, .qk_nope_head_dim = 8, .qk_rope_head_dim = 8, .v_head_dim = 24};
  return m;
}

Case Of(std::string name, MeshShape mesh, ModelSpec model, bool sequence_parallel = false) {
  Case c{std::move(name), mesh};
  c.sequence_parallel = sequence_parallel;
  c.model = std::move(model);
  return c;
}

std::vector<Case> Cases() {
  std::vector<Case> cases = {
      Of("mla_data", Mesh(2, 1, 1), Mla(true)),
      Of("mla_tensor", Mesh(1, 2, 1), Mla(true)),
      Of("mla_tensor_uncompressed_queries", Mesh(1, 2, 1), Mla(false)),
      Of("mla_tensor_sequence", Mesh(1, 2, 1), Mla(true), true),
      Of("mla_data_tensor", Mesh(2, 2, 1), Mla(true)),
      Of("mla_data_tensor_sequence_pipeline", Mesh(2, 2, 2), Mla(false), true),
      Of("mla_pipeline_zb_h1", Mesh(1, 1, 2), Mla(true)),
      Of("mla_fsdp_zero3", Mesh(1, 1, 1, 1, 2), Mla(true)),
      Of("mla_context", Mesh(1, 1, 1, 2), Mla(true)),
      Of("mla_moe_expert", Mesh(1, 1, 1, 1, 1, 2), Mla(true, true)),
      Of("mla_moe_expert_tensor_sequence", Mesh(1, 2, 1, 1, 1, 2), Mla(true, true), true),
  };
  cases[6].schedule = "zb-h1";
  cases[7].zero_stage = 3;
  cases[9].moe = cases[10].moe = true;
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Mla, EquivalenceTest, ::testing::ValuesIn(Cases()), CaseName);

}  // namespace
}  // namespace shardsim::runtime
