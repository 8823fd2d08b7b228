#include "runtime/swiglu.h"

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

constexpr int kT = 3, kF = 40;  // F > 16 and not a multiple of a vector width

TEST(SwigluTest, ForwardIsSiluOfGateTimesUp) {
  const auto gate = RandomVector(kT * kF, 1, -6.0f, 6.0f);
  const auto up = RandomVector(kT * kF, 2, -2.0f, 2.0f);
  std::vector<float> h(kT * kF);
  SwigluForward(h.data(), gate.data(), up.data(), kT, kF);
  std::vector<double> want(kT * kF);
  for (int i = 0; i < kT * kF; ++i) want[i] = gate[i] / (1.0 + std::exp(-double{gate[i]})) * up[i];
  ExpectAllNear(h, want, 1e-6, 1e-6, "h");
}

TEST(SwigluTest, BackwardMatchesFiniteDifferences) {
  auto gate = RandomVector(kT * kF, 3, -4.0f, 4.0f);
  auto up = RandomVector(kT * kF, 4, -2.0f, 2.0f);
  const auto probe = RandomVector(kT * kF, 5);
  auto loss = [&] {
    std::vector<float> h(kT * kF);
    SwigluForward(h.data(), gate.data(), up.data(), kT, kF);
    return Probe(h, probe);
  };
  std::vector<float> d_gate(kT * kF, 9.0f), d_up(kT * kF, 9.0f);  // overwritten
  SwigluBackward(d_gate.data(), d_up.data(), probe.data(), gate.data(), up.data(), kT, kF);
  ExpectAllNear(d_gate, NumericGradient(gate, loss, 1e-3f), 1e-3, 1e-2, "d_gate");
  ExpectAllNear(d_up, NumericGradient(up, loss, 1e-3f), 1e-3, 1e-2, "d_up");
}

}  // namespace
}  // namespace shardsim::runtime
