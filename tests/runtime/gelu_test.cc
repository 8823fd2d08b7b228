#include "runtime/gelu.h"

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

constexpr int kN = 40;

// The tanh form stays within 1e-3 of the exact GELU x Phi(x) (Hendrycks & Gimpel 2016), and
// matches its own formula in double.
TEST(GeluTest, ForwardMatchesTheTanhFormAndTheErfForm) {
  const auto x = RandomVector(kN, 1, -4.0f, 4.0f);
  std::vector<float> y(kN);
  GeluForward(y.data(), x.data(), kN);
  std::vector<double> tanh_form(kN), erf_form(kN);
  for (int i = 0; i < kN; ++i) {
    const double v = x[i];
    tanh_form[i] = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    erf_form[i] = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
  }
  ExpectAllNear(y, tanh_form, 1e-6, 1e-5, "tanh form");
  ExpectAllNear(y, erf_form, 1e-3, 0.0, "erf form");
}

TEST(GeluTest, BackwardMatchesFiniteDifferences) {
  auto x = RandomVector(kN, 2, -4.0f, 4.0f);
  const auto probe = RandomVector(kN, 3);
  auto loss = [&] {
    std::vector<float> y(kN);
    GeluForward(y.data(), x.data(), kN);
    return Probe(y, probe);
  };
  std::vector<float> dx(kN);
  GeluBackward(dx.data(), probe.data(), x.data(), kN);
  ExpectAllNear(dx, NumericGradient(x, loss, 1e-3f), 2e-3, 1e-2, "dx");
}

}  // namespace
}  // namespace shardsim::runtime
