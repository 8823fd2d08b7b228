// Eager and fused elementwise kernels (PlanSpec::elementwise_kernels): each kernel sequence's
// bytes as torchtitan's uncompiled llama runs it, and what they change in a layer's program.
#include "strategies/elementwise_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/model_presets.h"
#include "strategies/build_step.h"
#include "strategies/op_names.h"
#include "tests/strategies/test_models.h"

namespace shardsim::strategies {
namespace {

PlanSpec With(const std::string& kernels) {
  PlanSpec p = Plan(8, 1, 1, 16, 8192);
  p.micro_batch_size = 2;
  p.elementwise_kernels = kernels;
  return p;
}

// The passes per byte of bf16 input, counted kernel by kernel (bytes read and written per
// element): RMSNorm x.float() 2+4, pow 4+4, mean 4, x * rsqrt 4+4, type_as 4+2, * weight 2+2 = 36
// bytes, 18 passes; SwiGLU silu 2+2, mul 4+2 = 10 bytes, 5 passes over its 2-byte output; RoPE
// float 2+4, the complex product 4+4, type_as 4+2 = 20 bytes, 10 passes.
TEST(ElementwiseKernelsTest, EagerKernelsMoveWhatTheirPrimitivesMove) {
  const ModelSpec llama = FindModelPreset("llama3-8b")->spec;
  EXPECT_DOUBLE_EQ(NormPasses(llama, With("fused"), 2).forward, 2);
  EXPECT_DOUBLE_EQ(NormPasses(llama, With("fused"), 2).backward, 4);
  EXPECT_DOUBLE_EQ(NormPasses(llama, With("eager"), 2).forward, 36.0 / 2);
  EXPECT_GT(NormPasses(llama, With("eager"), 2).backward, 2 * NormPasses(llama, With("eager"), 2).forward);
  EXPECT_DOUBLE_EQ(NormPasses(llama, With("eager-fused-norm"), 2).forward, 2);  // one Triton kernel
  EXPECT_DOUBLE_EQ(ActivationPasses(llama, With("fused"), 2).forward, 3);
  EXPECT_DOUBLE_EQ(ActivationPasses(llama, With("eager"), 2).forward, 10.0 / 2);
  EXPECT_DOUBLE_EQ(ActivationPasses(llama, With("eager-fused-norm"), 2).forward, 5);
  EXPECT_DOUBLE_EQ(RopePasses(With("eager"), 2).forward, 20.0 / 2);
  // At fp32 there is nothing to cast: the complex product alone, as a fused kernel's two passes.
  EXPECT_DOUBLE_EQ(RopePasses(With("eager"), 4).forward, 2);
  // LayerNorm is one native kernel; GELU one too.
  ModelSpec gpt = llama;
  gpt.norm = NormKind::kLayerNorm, gpt.mlp = MlpKind::kGelu;
  EXPECT_DOUBLE_EQ(NormPasses(gpt, With("eager"), 2).forward, 2);
  EXPECT_DOUBLE_EQ(ActivationPasses(gpt, With("eager"), 2).forward, 2);
  gpt.mlp = MlpKind::kRelu2;  // relu, then its square: two kernels
  EXPECT_DOUBLE_EQ(ActivationPasses(gpt, With("eager"), 2).forward, 4);
  EXPECT_DOUBLE_EQ(ActivationPasses(gpt, With("fused"), 2).forward, 2);
}

// In the program: eager norms and activations move more bytes, the rotary embedding runs its own
// kernels (fused, none), and the step is slower; the FLOPs do not change.
TEST(ElementwiseKernelsTest, EagerProgramsMoveMoreAndComputeTheSame) {
  const ModelSpec m = FindModelPreset("llama3-8b")->spec;
  auto bytes_of = [&m](const std::string& kernels, std::string_view name) {
    const StepProgram program = BuildStep(m, With(kernels));
    const LayerProgram& layer = program.Layer(LayerKind::kDense);
    double bytes = -1;
    for (const Op& op : layer.ops) {
      if (op.name == name) bytes = op.bytes;
    }
    return bytes;
  };
  EXPECT_DOUBLE_EQ(bytes_of("eager", ops::kAttentionNorm), 9 * bytes_of("fused", ops::kAttentionNorm));
  EXPECT_DOUBLE_EQ(bytes_of("eager-fused-norm", ops::kAttentionNorm), bytes_of("fused", ops::kAttentionNorm));
  EXPECT_DOUBLE_EQ(bytes_of("eager", ops::BlockActivation(ops::kMlp)), 5.0 / 3 * bytes_of("fused", ops::BlockActivation(ops::kMlp)));
  EXPECT_LT(bytes_of("fused", ops::kRope), 0);  // no op
  // Q and K: (32 + 8) heads of 128 for each of the 16384 tokens, 10 passes of 2 bytes.
  EXPECT_DOUBLE_EQ(bytes_of("eager", ops::kRope), 10 * 16384.0 * 40 * 128 * 2);
  const StepProgram fused = BuildStep(m, With("fused")), eager = BuildStep(m, With("eager"));
  EXPECT_DOUBLE_EQ(eager.model_flops_per_step, fused.model_flops_per_step);
}

}  // namespace
}  // namespace shardsim::strategies
