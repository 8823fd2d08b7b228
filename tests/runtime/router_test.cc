#include "runtime/router.h"

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

TEST(RouterTest, TopKIsOrderedAndTiesGoToTheLowerExpert) {
  const int e = 5, k = 3;
  const std::vector<float> logits = {
      1.0f,  3.0f, 3.0f, 0.0f, 3.0f,  // a three-way tie: experts 1, 2, 4 in index order
      0.5f,  0.5f, 0.5f, 0.5f, 0.5f,  // all equal: 0, 1, 2
      -1.0f, 2.0f, 0.0f, 5.0f, 1.0f,
  };
  const int t = 3;
  std::vector<float> probs(t * e), gates(t * k);
  std::vector<int32_t> top(t * k);
  RouterForward(probs.data(), top.data(), gates.data(), logits.data(), t, e, k);
  EXPECT_EQ(top, (std::vector<int32_t>{1, 2, 4, 0, 1, 2, 3, 1, 4}));
  for (int i = 0; i < t; ++i) {
    double p_sum = 0.0, g_sum = 0.0;
    for (int j = 0; j < e; ++j) p_sum += probs[i * e + j];
    for (int s = 0; s < k; ++s) g_sum += gates[i * k + s];
    EXPECT_NEAR(p_sum, 1.0, 1e-6);
    EXPECT_NEAR(g_sum, 1.0, 1e-6);
    for (int s = 0; s < k; ++s) {
      // Renormalised: gate = p / sum of the chosen p.
      double chosen = 0.0;
      for (int u = 0; u < k; ++u) chosen += probs[i * e + top[i * k + u]];
      EXPECT_NEAR(gates[i * k + s], probs[i * e + top[i * k + s]] / chosen, 1e-6);
    }
  }
  for (int s = 0; s < k; ++s) EXPECT_FLOAT_EQ(gates[3 + s], 1.0f / 3.0f);
}

TEST(RouterTest, AuxLossIsTheCoefficientForUniformRouting) {
  // Token i prefers expert i: every expert gets one token and the same mean probability.
  const int e = 4, t = 4, k = 1;
  std::vector<float> logits(t * e, 0.0f);
  for (int i = 0; i < t; ++i) logits[i * e + i] = 2.0f;
  std::vector<float> probs(t * e), gates(t * k);
  std::vector<int32_t> top(t * k);
  RouterForward(probs.data(), top.data(), gates.data(), logits.data(), t, e, k);
  std::vector<int64_t> counts(e);
  RouterExpertCounts(counts.data(), top.data(), t, e, k);
  EXPECT_EQ(counts, (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_NEAR(RouterAuxLoss(probs.data(), counts.data(), t, e, k, t, 0.01f), 0.01, 1e-8);
  // Everything on one expert with confident routing approaches E * coeff.
  std::vector<float> skewed(t * e, -20.0f);
  for (int i = 0; i < t; ++i) skewed[i * e] = 20.0f;
  RouterForward(probs.data(), top.data(), gates.data(), skewed.data(), t, e, k);
  RouterExpertCounts(counts.data(), top.data(), t, e, k);
  EXPECT_NEAR(RouterAuxLoss(probs.data(), counts.data(), t, e, k, t, 1.0f), e, 1e-6);
}

TEST(RouterTest, AuxLossOfTokenShardsSumsToTheWhole) {
  const int e = 6, t = 10, k = 2;
  const auto logits = RandomVector(t * e, 1, -2.0f, 2.0f);
  std::vector<float> probs(t * e), gates(t * k);
  std::vector<int32_t> top(t * k);
  RouterForward(probs.data(), top.data(), gates.data(), logits.data(), t, e, k);
  std::vector<int64_t> counts(e);
  RouterExpertCounts(counts.data(), top.data(), t, e, k);
  const double whole = RouterAuxLoss(probs.data(), counts.data(), t, e, k, t, 0.1f);
  const double first = RouterAuxLoss(probs.data(), counts.data(), 4, e, k, t, 0.1f);
  const double second = RouterAuxLoss(probs.data() + 4 * e, counts.data(), 6, e, k, t, 0.1f);
  EXPECT_NEAR(first + second, whole, 1e-12);
}

TEST(RouterTest, GateAndAuxGradientsMatchFiniteDifferences) {
  const int e = 6, t = 5, k = 2;
  auto logits = RandomVector(t * e, 2, -2.0f, 2.0f);
  const auto probe = RandomVector(t * k, 3);
  const float coeff = 0.5f;
  // Loss = sum(gates * probe) + aux; the selection (and so f_e) does not move under small steps.
  auto loss = [&] {
    std::vector<float> probs(t * e), gates(t * k);
    std::vector<int32_t> top(t * k);
    RouterForward(probs.data(), top.data(), gates.data(), logits.data(), t, e, k);
    std::vector<int64_t> counts(e);
    RouterExpertCounts(counts.data(), top.data(), t, e, k);
    return Probe(gates, probe) + RouterAuxLoss(probs.data(), counts.data(), t, e, k, t, coeff);
  };
  std::vector<float> probs(t * e), gates(t * k);
  std::vector<int32_t> top(t * k);
  RouterForward(probs.data(), top.data(), gates.data(), logits.data(), t, e, k);
  std::vector<int64_t> counts(e);
  RouterExpertCounts(counts.data(), top.data(), t, e, k);
  std::vector<float> d_logits(t * e, 0.0f);
  RouterGatesBackward(d_logits.data(), probe.data(), top.data(), gates.data(), t, e, k);
  RouterAuxLossBackward(d_logits.data(), probs.data(), counts.data(), t, e, k, t, coeff);
  ExpectAllNear(d_logits, NumericGradient(logits, loss, 1e-3f), 1e-4, 1e-2, "d_logits");
}

}  // namespace
}  // namespace shardsim::runtime
