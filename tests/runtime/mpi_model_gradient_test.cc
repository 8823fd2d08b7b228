// The whole model's backward on one rank against central differences of its loss: sampled
// parameters of every kind (norm weights and biases, attention and MLP weights and biases,
// learned positions, embedding, head, router and experts) for each model family the runtime
// trains. The equivalence tests show sharding changes nothing; this shows what is not sharded is
// right.
#include <mpi.h>

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "runtime/corpus.h"
#include "runtime/stage_model.h"
#include "strategies/build_step.h"
#include "tests/runtime/equivalence_harness.h"

namespace shardsim::runtime {
namespace {

using namespace equivalence;  // NOLINT: the harness's names

void ExpectGradientsMatchFiniteDifferences(const ModelSpec& model) {
  PlanSpec plan;
  plan.global_batch_size = 1;
  plan.seq_len = 16;
  plan.dtype = "fp32";
  const strategies::StepProgram program = strategies::BuildStep(model, plan);
  MeshComms comms(MPI_COMM_SELF, plan);
  StageModel m(program, comms, ArchitectureConfig{}, 99);
  // A fixed text, not the shipped corpus (the documentation, which changes): finite differences
  // of top-k routing are only valid away from a routing switch, which these tokens are.
  const Corpus corpus("# shardsim: architecture\n\nshardsim answers one question for people who train large transformers", plan.seq_len);
  std::vector<int32_t> ids(16), targets(16);
  corpus.Batch(ids.data(), targets.data(), 0, 1, 0, 1);
  auto loss = [&] { return m.Forward(0, 0, nullptr, nullptr, ids.data(), targets.data(), 16.0); };
  loss();
  m.Backward(0, 0, nullptr, nullptr);
  const std::vector<float> grads = m.grads();
  // 10 elements of every tensor, at seeded places.
  std::mt19937 rng(7);
  int checked = 0;
  for (const ParamTensor& pt : m.tensors()) {
    for (int k = 0; k < 10; ++k) {
      const int64_t at = pt.offset + static_cast<int64_t>(rng() % static_cast<uint64_t>(pt.size()));
      float& p = m.params()[static_cast<size_t>(at)];
      const float saved = p, eps = 1e-2f;
      p = saved + eps;
      const double up = loss();
      p = saved - eps;
      const double down = loss();
      p = saved;
      const double numeric = (up - down) / (2.0 * eps);
      EXPECT_NEAR(grads[static_cast<size_t>(at)], numeric, 1e-4 + 0.03 * std::abs(numeric))
          << model.name << " " << pt.name << " element " << at - pt.offset;
      ++checked;
    }
  }
  EXPECT_GT(checked, 100) << model.name;
}

TEST(MpiModelGradientTest, GptMatchesFiniteDifferences) {
  ModelSpec m = TestModel();
  m.name = "gpt";
  m.num_layers = 2;
  m.num_kv_heads = m.num_heads;
  m.mlp = MlpKind::kGelu;
  m.norm = NormKind::kLayerNorm;
  m.position = PositionKind::kLearned;
  m.max_seq_len = 16;
  m.linear_bias = true;
  m.tied_embeddings = true;
  ExpectGradientsMatchFiniteDifferences(m);
}

TEST(MpiModelGradientTest, LlamaWithQkvBiasMatchesFiniteDifferences) {
  ModelSpec m = TestModel();
  m.name = "llama-qkv-bias";
  m.num_layers = 2;
  m.qkv_bias = true;
  ExpectGradientsMatchFiniteDifferences(m);
}

TEST(MpiModelGradientTest, MlaMatchesFiniteDifferences) {
  for (const MlaSpec& mla : {MlaSpec{.q_lora_rank = 32, .kv_lora_rank = 16, .qk_nope_head_dim = 16, .qk_rope_head_dim = 8, .v_head_dim = 16},
                             MlaSpec{.q_lora_rank = 0, .kv_lora_rank = 16, .qk_nope_head_dim = 8, .qk_rope_head_dim = 8, .v_head_dim = 24}}) {
    ModelSpec m = TestModel();
    m.name = "mla-q" + std::to_string(mla.q_lora_rank);
    m.num_layers = 2;
    m.num_kv_heads = m.num_heads;
    m.mla = mla;
    ExpectGradientsMatchFiniteDifferences(m);
  }
}

TEST(MpiModelGradientTest, MoeMatchesFiniteDifferences) {
  ModelSpec m = TestMoeModel();
  m.num_layers = 2;
  ExpectGradientsMatchFiniteDifferences(m);
}

}  // namespace
}  // namespace shardsim::runtime
