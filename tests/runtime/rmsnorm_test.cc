#include "runtime/rmsnorm.h"

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

constexpr int kT = 4, kD = 12;
constexpr float kEps = 1e-5f;

TEST(RmsNormTest, ForwardMatchesDefinition) {
  const auto x = RandomVector(kT * kD, 1);
  const auto w = RandomVector(kD, 2, 0.5f, 1.5f);
  std::vector<float> y(kT * kD), rstd(kT);
  RmsNormForward(y.data(), rstd.data(), x.data(), w.data(), kT, kD, kEps);
  std::vector<double> want_y(kT * kD), want_rstd(kT);
  for (int t = 0; t < kT; ++t) {
    double ms = 0.0;
    for (int d = 0; d < kD; ++d) ms += double{x[t * kD + d]} * x[t * kD + d] / kD;
    want_rstd[t] = 1.0 / std::sqrt(ms + kEps);
    for (int d = 0; d < kD; ++d) want_y[t * kD + d] = x[t * kD + d] * want_rstd[t] * w[d];
  }
  ExpectAllNear(y, want_y, 1e-6, 1e-6, "y");
  ExpectAllNear(rstd, want_rstd, 0.0, 1e-6, "rstd");
}

TEST(RmsNormTest, BackwardMatchesFiniteDifferencesAndAccumulates) {
  auto x = RandomVector(kT * kD, 3);
  auto w = RandomVector(kD, 4, 0.5f, 1.5f);
  const auto probe = RandomVector(kT * kD, 5);
  auto loss = [&] {
    std::vector<float> y(kT * kD), rstd(kT);
    RmsNormForward(y.data(), rstd.data(), x.data(), w.data(), kT, kD, kEps);
    return Probe(y, probe);
  };
  std::vector<float> y(kT * kD), rstd(kT);
  RmsNormForward(y.data(), rstd.data(), x.data(), w.data(), kT, kD, kEps);
  std::vector<float> dx(kT * kD, 0.5f), dw(kD, 0.5f);
  RmsNormBackward(dx.data(), dw.data(), probe.data(), x.data(), w.data(), rstd.data(), kT, kD);
  auto num_dx = NumericGradient(x, loss, 1e-3f);
  auto num_dw = NumericGradient(w, loss, 1e-3f);
  for (double& g : num_dx) g += 0.5;
  for (double& g : num_dw) g += 0.5;
  ExpectAllNear(dx, num_dx, 2e-3, 1e-2, "dx");
  ExpectAllNear(dw, num_dw, 2e-3, 1e-2, "dw");
}

}  // namespace
}  // namespace shardsim::runtime
