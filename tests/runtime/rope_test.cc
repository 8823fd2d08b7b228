#include "runtime/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tests/runtime/kernel_test_util.h"

namespace shardsim::runtime {
namespace {

using testing::ExpectAllNear;
using testing::NumericGradient;
using testing::Probe;
using testing::RandomVector;

constexpr int kT = 5, kHeads = 3, kK = 8;
constexpr float kTheta = 10000.0f;

// Rotate-half, written plainly in double.
std::vector<double> NaiveRope(const std::vector<float>& x, const std::vector<int32_t>& pos) {
  std::vector<double> y(x.size());
  const int half = kK / 2;
  for (int t = 0; t < kT; ++t) {
    for (int h = 0; h < kHeads; ++h) {
      const float* xr = x.data() + (t * kHeads + h) * kK;
      double* yr = y.data() + (t * kHeads + h) * kK;
      for (int i = 0; i < half; ++i) {
        const double angle = pos[t] * std::pow(double{kTheta}, -2.0 * i / kK);
        yr[i] = xr[i] * std::cos(angle) - xr[i + half] * std::sin(angle);
        yr[i + half] = xr[i + half] * std::cos(angle) + xr[i] * std::sin(angle);
      }
    }
  }
  return y;
}

// Non-contiguous positions, as a context-parallel rank holds them.
const std::vector<int32_t> kPositions = {0, 1, 7, 300, 4095};

TEST(RopeTest, ForwardMatchesRotateHalfDefinition) {
  const auto x = RandomVector(kT * kHeads * kK, 1);
  std::vector<float> y(x.size());
  RopeForward(y.data(), x.data(), kPositions.data(), kT, kHeads, kK, kTheta);
  ExpectAllNear(y, NaiveRope(x, kPositions), 1e-5, 1e-5, "y");
  // Position 0 is the identity.
  for (int i = 0; i < kHeads * kK; ++i) EXPECT_EQ(y[i], x[i]);
}

TEST(RopeTest, InPlaceEqualsOutOfPlace) {
  auto x = RandomVector(kT * kHeads * kK, 2);
  std::vector<float> y(x.size());
  RopeForward(y.data(), x.data(), kPositions.data(), kT, kHeads, kK, kTheta);
  RopeForward(x.data(), x.data(), kPositions.data(), kT, kHeads, kK, kTheta);
  EXPECT_EQ(x, y);
}

TEST(RopeTest, ScoresDependOnlyOnRelativePosition) {
  // <rope(q, m), rope(k, n)> is the same for (m, n) = (3, 1) and (103, 101).
  const auto q = RandomVector(kK, 3);
  const auto k = RandomVector(kK, 4);
  auto score = [&](int32_t m, int32_t n) {
    std::vector<float> rq(kK), rk(kK);
    RopeForward(rq.data(), q.data(), &m, 1, 1, kK, kTheta);
    RopeForward(rk.data(), k.data(), &n, 1, 1, kK, kTheta);
    double s = 0.0;
    for (int i = 0; i < kK; ++i) s += double{rq[i]} * rk[i];
    return s;
  };
  EXPECT_NEAR(score(3, 1), score(103, 101), 1e-5);
}

TEST(RopeTest, BackwardMatchesFiniteDifferences) {
  auto x = RandomVector(kT * kHeads * kK, 5);
  const auto probe = RandomVector(x.size(), 6);
  auto loss = [&] {
    std::vector<float> y(x.size());
    RopeForward(y.data(), x.data(), kPositions.data(), kT, kHeads, kK, kTheta);
    return Probe(y, probe);
  };
  std::vector<float> dx(x.size());
  RopeBackward(dx.data(), probe.data(), kPositions.data(), kT, kHeads, kK, kTheta);
  ExpectAllNear(dx, NumericGradient(x, loss, 1e-2f), 1e-3, 1e-3, "dx");
  // Backward inverts forward.
  std::vector<float> y(x.size()), back(x.size());
  RopeForward(y.data(), x.data(), kPositions.data(), kT, kHeads, kK, kTheta);
  RopeBackward(back.data(), y.data(), kPositions.data(), kT, kHeads, kK, kTheta);
  ExpectAllNear(back, testing::ToDouble(x), 1e-6, 1e-6, "x");
}

}  // namespace
}  // namespace shardsim::runtime
