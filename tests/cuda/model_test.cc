// The GPU model trains: its loss falls on a repeating sequence, bf16 and fp32 agree on the first
// step's loss, and the same seed gives the same losses to 1e-4 (atomic adds reorder sums). Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/model_presets.h"
#include "cuda/device_info.h"
#include "cuda/gpu_model.h"

namespace shardsim::cuda {
namespace {

ModelSpec Tiny() { return FindModelPreset("tiny-dense")->spec; }

std::vector<int32_t> Tokens(int rows, int seq, int vocab) {
  std::vector<int32_t> t(static_cast<size_t>(rows) * (seq + 1));
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int32_t>((i * 7 + i / 5) % vocab);
  return t;
}

std::vector<double> Losses(DType dtype, int steps) {
  GpuTrainConfig c;
  c.micro_batch = 2;
  c.seq_len = 64;
  c.dtype = dtype;
  c.attention_tile = 24;
  c.lr = 3e-3f;
  GpuModel m(Tiny(), c);
  const std::vector<int32_t> tokens = Tokens(2, 64, static_cast<int>(Tiny().vocab_size));
  std::vector<double> out;
  for (int i = 0; i < steps; ++i) out.push_back(m.Step(tokens).loss);
  return out;
}

TEST(GpuModelTest, RefusesWhatItCannotTrain) {
  ModelSpec m = Tiny();
  m.linear_bias = true;
  EXPECT_THROW(CheckGpuTrainable(m), InputError);
}

TEST(GpuModelTest, TrainsAndAgreesAcrossPrecisions) {
  std::string why;
  if (!HasDevice(&why)) GTEST_SKIP() << "CUDA path not checked: " << why;
  const std::vector<double> fp32 = Losses(DType::kF32, 8), again = Losses(DType::kF32, 8), bf16 = Losses(DType::kBf16, 8);
  EXPECT_NEAR(fp32.front(), std::log(static_cast<double>(Tiny().vocab_size)), 0.5);
  EXPECT_LT(fp32.back(), fp32.front() - 0.5);
  EXPECT_LT(bf16.back(), bf16.front() - 0.5);
  EXPECT_NEAR(bf16.front(), fp32.front(), 1e-2 * fp32.front());
  for (size_t i = 0; i < fp32.size(); ++i) EXPECT_NEAR(again[i], fp32[i], 1e-4 * fp32[i]) << "step " << i + 1;
}

}  // namespace
}  // namespace shardsim::cuda
