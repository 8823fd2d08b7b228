#include "runtime/adamw.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace shardsim::runtime {
namespace {

TEST(AdamWTest, FirstStepByHand) {
  // Step 1: m_hat = g, v_hat = g^2, so the update is lr * g / (|g| + eps) after decay.
  const AdamWConfig config{
      .lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.5f};
  std::vector<float> p = {1.0f, -2.0f, 0.5f}, m(3, 0.0f), v(3, 0.0f);
  const std::vector<float> g = {0.2f, -0.4f, 0.0f};
  AdamWStep(p.data(), m.data(), v.data(), g.data(), 3, config, 1);
  // p * (1 - 0.1 * 0.5) - 0.1 * sign(g)
  EXPECT_NEAR(p[0], 1.0 * 0.95 - 0.1, 1e-6);
  EXPECT_NEAR(p[1], -2.0 * 0.95 + 0.1, 1e-6);
  EXPECT_NEAR(p[2], 0.5 * 0.95, 1e-6);
  EXPECT_NEAR(m[0], 0.1 * 0.2, 1e-7);
  EXPECT_NEAR(v[1], 0.05 * 0.16, 1e-7);
}

TEST(AdamWTest, SecondStepUsesBiasCorrection) {
  const AdamWConfig config{
      .lr = 0.01f, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f, .weight_decay = 0.0f};
  std::vector<float> p = {1.0f}, m = {0.0f}, v = {0.0f};
  AdamWStep(p.data(), m.data(), v.data(), std::vector<float>{1.0f}.data(), 1, config, 1);
  AdamWStep(p.data(), m.data(), v.data(), std::vector<float>{3.0f}.data(), 1, config, 2);
  const double m2 = 0.9 * 0.1 + 0.1 * 3.0;     // 0.39
  const double v2 = 0.99 * 0.01 + 0.01 * 9.0;  // 0.0999
  const double m_hat = m2 / (1 - 0.81), v_hat = v2 / (1 - 0.9801);
  EXPECT_NEAR(p[0], 1.0 - 0.01 - 0.01 * m_hat / (std::sqrt(v_hat) + 1e-8), 1e-6);
}

TEST(GradClipTest, SquaredSumFactorAndScale) {
  const std::vector<float> g = {3.0f, -4.0f};
  EXPECT_DOUBLE_EQ(GradSquaredSum(g.data(), 2), 25.0);
  EXPECT_FLOAT_EQ(ClipFactor(25.0, 1.0f), static_cast<float>(1.0 / (5.0 + 1e-6)));
  EXPECT_FLOAT_EQ(ClipFactor(25.0, 10.0f), 1.0f);
  std::vector<float> x = {1.0f, -2.0f};
  ScaleInPlace(x.data(), 2, 0.5f);
  EXPECT_EQ(x, (std::vector<float>{0.5f, -1.0f}));
}

}  // namespace
}  // namespace shardsim::runtime
