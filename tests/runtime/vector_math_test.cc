#include "runtime/vector_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace shardsim::runtime {
namespace {

TEST(FastExpTest, MatchesStdExpToTwoUlpOverTheRange) {
  double worst = 0.0;
  for (int i = 0; i <= 100000; ++i) {
    const float x = -87.0f + 175.0f * static_cast<float>(i) / 100000.0f;
    const double want = std::exp(double{x});
    worst = std::max(worst, std::abs(FastExp(x) - want) / want);
  }
  EXPECT_LT(worst, 2.5e-7);
}

TEST(FastExpTest, UnderflowAndMaskedScoresGiveZero) {
  EXPECT_EQ(FastExp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(FastExp(-100.0f), 0.0f);
  EXPECT_EQ(FastExp(0.0f), 1.0f);
  EXPECT_TRUE(std::isfinite(FastExp(1000.0f)));
}

TEST(RowReductionTest, MaxAndSumOfOddLengths) {
  for (int n : {0, 1, 15, 16, 17, 100}) {
    std::vector<float> x(n);
    for (int i = 0; i < n; ++i) x[i] = static_cast<float>((i * 37) % 101) - 50.0f;
    float want_max = -std::numeric_limits<float>::infinity();
    double want_sum = 0.0;
    for (float e : x) {
      want_max = std::max(want_max, e);
      want_sum += e;
    }
    EXPECT_EQ(RowMax(x.data(), n), want_max) << n;
    EXPECT_NEAR(RowSum(x.data(), n), want_sum, 1e-3) << n;
  }
}

}  // namespace
}  // namespace shardsim::runtime
