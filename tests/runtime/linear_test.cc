#include "runtime/linear.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/runtime/kernel_test_util.h"

namespace shardsim::runtime {
namespace {

using testing::ExpectAllNear;
using testing::NumericGradient;
using testing::Probe;
using testing::RandomVector;

constexpr int kT = 5, kIn = 6, kOut = 4;

TEST(LinearTest, ForwardIsXTimesW) {
  const auto x = RandomVector(kT * kIn, 1);
  const auto w = RandomVector(kIn * kOut, 2);
  std::vector<float> y(kT * kOut, -7.0f);
  LinearForward(y.data(), x.data(), w.data(), kT, kIn, kOut);
  std::vector<double> want(kT * kOut, 0.0);
  for (int t = 0; t < kT; ++t)
    for (int o = 0; o < kOut; ++o)
      for (int i = 0; i < kIn; ++i) want[t * kOut + o] += double{x[t * kIn + i]} * w[i * kOut + o];
  ExpectAllNear(y, want, 1e-6, 1e-6, "y");
}

TEST(LinearTest, BackwardMatchesFiniteDifferencesAndAccumulates) {
  auto x = RandomVector(kT * kIn, 3);
  auto w = RandomVector(kIn * kOut, 4);
  const auto probe = RandomVector(kT * kOut, 5);
  auto loss = [&] {
    std::vector<float> y(kT * kOut);
    LinearForward(y.data(), x.data(), w.data(), kT, kIn, kOut);
    return Probe(y, probe);
  };
  // Start the gradients at 1 to check they accumulate.
  std::vector<float> dx(kT * kIn, 1.0f), dw(kIn * kOut, 1.0f);
  LinearBackward(dx.data(), dw.data(), probe.data(), x.data(), w.data(), kT, kIn, kOut);
  auto num_dx = NumericGradient(x, loss, 1e-2f);
  auto num_dw = NumericGradient(w, loss, 1e-2f);
  for (double& g : num_dx) g += 1.0;
  for (double& g : num_dw) g += 1.0;
  ExpectAllNear(dx, num_dx, 1e-3, 1e-3, "dx");
  ExpectAllNear(dw, num_dw, 1e-3, 1e-3, "dw");
}

TEST(LinearTest, NullGradientsAreSkipped) {
  const auto x = RandomVector(kT * kIn, 6);
  const auto w = RandomVector(kIn * kOut, 7);
  const auto dy = RandomVector(kT * kOut, 8);
  std::vector<float> dx(kT * kIn, 0.0f), dw(kIn * kOut, 0.0f);
  LinearBackward(nullptr, dw.data(), dy.data(), x.data(), w.data(), kT, kIn, kOut);
  LinearBackward(dx.data(), nullptr, dy.data(), x.data(), w.data(), kT, kIn, kOut);
  std::vector<float> dx2(kT * kIn, 0.0f), dw2(kIn * kOut, 0.0f);
  LinearBackward(dx2.data(), dw2.data(), dy.data(), x.data(), w.data(), kT, kIn, kOut);
  EXPECT_EQ(dx, dx2);
  EXPECT_EQ(dw, dw2);
}

TEST(LinearTest, ColumnShardsConcatenateToTheFullOutput) {
  // Tensor parallel: W [in, out] split by columns into two shards gives y split by columns.
  const auto x = RandomVector(kT * kIn, 9);
  const auto w = RandomVector(kIn * kOut, 10);
  std::vector<float> y(kT * kOut);
  LinearForward(y.data(), x.data(), w.data(), kT, kIn, kOut);
  const int half = kOut / 2;
  for (int shard = 0; shard < 2; ++shard) {
    std::vector<float> ws(kIn * half), ys(kT * half);
    for (int i = 0; i < kIn; ++i)
      for (int o = 0; o < half; ++o) ws[i * half + o] = w[i * kOut + shard * half + o];
    LinearForward(ys.data(), x.data(), ws.data(), kT, kIn, half);
    for (int t = 0; t < kT; ++t)
      for (int o = 0; o < half; ++o)
        EXPECT_NEAR(ys[t * half + o], y[t * kOut + shard * half + o], 1e-6);
  }
}

}  // namespace
}  // namespace shardsim::runtime
