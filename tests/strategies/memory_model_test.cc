#include "strategies/memory_model.h"

#include <gtest/gtest.h>

#include "strategies/build_step.h"
#include "tests/strategies/test_models.h"

namespace shardsim::strategies {
namespace {

// Korthikanti et al. 2022, section 4: activations per layer, 16-bit, GPT layer.
TEST(ActivationMemoryTest, KorthikantiFormulas) {
  const int64_t s = 2048, b = 4, h = 6144, a = 64;
  const ModelSpec m = GptModel(48, h, a);
  const double sbh = static_cast<double>(s * b * h), as_h = static_cast<double>(a * s) / static_cast<double>(h);
  PlanSpec p = Plan(1, 1, 1, b, s);
  p.flash_attention = false;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, p, s * b, false), sbh * (34 + 5 * as_h));
  p.mesh.tensor = 8;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, p, s * b, false), sbh * (10 + 24.0 / 8 + 5 * as_h / 8));
  p.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, p, s * b, false), sbh / 8 * (34 + 5 * as_h));
  p.recompute = Recompute::kSelective;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, p, s * b, false), sbh / 8 * 34);
  p.recompute = Recompute::kFull;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, p, s * b, false), 2 * sbh / 8);
}

TEST(ActivationMemoryTest, SwigluAndGqaAreCounted) {
  const ModelSpec m = FindModelPreset("llama3-8b")->spec;  // D 4096, 32 heads, 8 K/V heads, F 14336
  PlanSpec p = Plan(1, 1, 1, 1, 4096);
  const double d = 4096, kv = 8 * 128, f = 14336;
  // Norm and block inputs 8D; Q, K, V, attention output 2(D + kv + kv + D); SwiGLU 6F.
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, p, 4096, false), 4096 * (8 * d + 2 * (2 * d + 2 * kv) + 6 * f));
}

// ZeRO (Rajbhandari et al. 2019): 2 + 2 + 12 bytes per parameter; stage 1 shards the 12, stage
// 2 also the gradients, stage 3 the parameters too.
TEST(ParameterMemoryTest, ZeroStagesSplitSixteenBytes) {
  const ModelSpec m = FindModelPreset("llama3-8b")->spec;
  PlanSpec p = Plan(8, 1, 1, 8, 4096);
  const double n = static_cast<double>(CountParams(m).total);
  const double dp = 8;
  for (int64_t stage = 0; stage <= 3; ++stage) {
    p.zero_stage = stage;
    const MemoryBreakdown b = EstimateMemory(BuildStep(m, p)).peak;
    EXPECT_NEAR(b.optimizer / n, stage >= 1 ? 12 / dp : 12, 1e-3) << stage;
    EXPECT_NEAR(b.grads / n, stage >= 2 ? 2 / dp : 2, 1e-3) << stage;
    EXPECT_NEAR(b.params / n, stage >= 3 ? 2 / dp : 2, 1e-3) << stage;
  }
}

TEST(ParameterMemoryTest, OneFOneBHoldsPipelineDepthMicrobatches) {
  const ModelSpec m = FindModelPreset("llama3-8b")->spec;
  PlanSpec p = Plan(1, 1, 4, 16, 2048);
  const StepProgram onef = BuildStep(m, p);
  p.pipeline_schedule = "gpipe";
  const StepProgram gpipe = BuildStep(m, p);
  const double layer = LayerActivationBytes(m, p, 2048, false) * 8;  // 8 layers per stage
  EXPECT_NEAR(EstimateMemory(onef).stages[0].activations / layer, 4, 1e-9);   // first stage: p in flight
  EXPECT_NEAR(EstimateMemory(onef).stages[3].activations / layer, 1, 1e-9);   // last stage: one
  EXPECT_NEAR(EstimateMemory(gpipe).stages[0].activations / layer, 16, 1e-9); // GPipe: all m
}

}  // namespace
}  // namespace shardsim::strategies
