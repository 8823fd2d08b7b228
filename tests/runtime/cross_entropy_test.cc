#include "runtime/cross_entropy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "tests/runtime/kernel_test_util.h"

namespace shardsim::runtime {
namespace {

using testing::ExpectAllNear;
using testing::NumericGradient;
using testing::RandomVector;

constexpr int kT = 4, kV = 37;

TEST(CrossEntropyTest, UniformLogitsGiveLogV) {
  const std::vector<float> logits(kT * kV, 3.0f);
  const std::vector<int32_t> targets = {0, 5, 36, 12};
  EXPECT_NEAR(CrossEntropyForwardBackward(nullptr, logits.data(), targets.data(), kT, kV, kT),
              std::log(double{kV}), 1e-6);
}

TEST(CrossEntropyTest, MatchesNaiveLossAndGradientRowsSumToZero) {
  const auto logits = RandomVector(kT * kV, 1, -8.0f, 8.0f);
  const std::vector<int32_t> targets = {3, 0, 36, 20};
  const double normaliser = 10.0;
  std::vector<float> dlogits(kT * kV);
  const double loss = CrossEntropyForwardBackward(dlogits.data(), logits.data(), targets.data(), kT,
                                                  kV, normaliser);
  double want = 0.0;
  std::vector<double> want_grad(kT * kV);
  for (int t = 0; t < kT; ++t) {
    double m = -INFINITY, sum = 0.0;
    for (int v = 0; v < kV; ++v) m = std::max(m, double{logits[t * kV + v]});
    for (int v = 0; v < kV; ++v) sum += std::exp(logits[t * kV + v] - m);
    want += std::log(sum) + m - logits[t * kV + targets[t]];
    for (int v = 0; v < kV; ++v) {
      want_grad[t * kV + v] =
          (std::exp(logits[t * kV + v] - m) / sum - (v == targets[t] ? 1.0 : 0.0)) / normaliser;
    }
  }
  EXPECT_NEAR(loss, want / normaliser, 1e-6);
  ExpectAllNear(dlogits, want_grad, 1e-7, 1e-5, "dlogits");
  for (int t = 0; t < kT; ++t) {
    double row = 0.0;
    for (int v = 0; v < kV; ++v) row += dlogits[t * kV + v];
    EXPECT_NEAR(row, 0.0, 1e-7);
  }
}

TEST(CrossEntropyTest, GradientMatchesFiniteDifferences) {
  auto logits = RandomVector(kT * kV, 2, -3.0f, 3.0f);
  const std::vector<int32_t> targets = {1, 2, 3, 4};
  auto loss = [&] {
    return CrossEntropyForwardBackward(nullptr, logits.data(), targets.data(), kT, kV, kT);
  };
  std::vector<float> dlogits(kT * kV);
  CrossEntropyForwardBackward(dlogits.data(), logits.data(), targets.data(), kT, kV, kT);
  ExpectAllNear(dlogits, NumericGradient(logits, loss, 1e-2f), 1e-4, 1e-2, "dlogits");
}

TEST(CrossEntropyTest, InPlaceIgnoredTokensAndShardedNormaliser) {
  const auto logits = RandomVector(kT * kV, 3, -3.0f, 3.0f);
  const std::vector<int32_t> targets = {7, -1, 8, 9};
  std::vector<float> grad(kT * kV);
  const double loss =
      CrossEntropyForwardBackward(grad.data(), logits.data(), targets.data(), kT, kV, 3.0);
  auto in_place = logits;
  EXPECT_EQ(
      CrossEntropyForwardBackward(in_place.data(), in_place.data(), targets.data(), kT, kV, 3.0),
      loss);
  EXPECT_EQ(in_place, grad);
  for (int v = 0; v < kV; ++v) EXPECT_EQ(grad[1 * kV + v], 0.0f);  // the ignored token
  // Two token shards with the global normaliser sum to the whole.
  const double first =
      CrossEntropyForwardBackward(nullptr, logits.data(), targets.data(), 2, kV, 3.0);
  const double second =
      CrossEntropyForwardBackward(nullptr, logits.data() + 2 * kV, targets.data() + 2, 2, kV, 3.0);
  EXPECT_NEAR(first + second, loss, 1e-12);
}

TEST(CrossEntropyTest, HugeLogitsStayFinite) {
  std::vector<float> logits = {1e4f, -1e4f, 0.0f, 1e4f};
  const std::vector<int32_t> targets = {1};
  std::vector<float> grad(4);
  const double loss =
      CrossEntropyForwardBackward(grad.data(), logits.data(), targets.data(), 1, 4, 1.0);
  EXPECT_NEAR(loss, 2e4 + std::log(2.0), 1e-3);
  for (float g : grad) EXPECT_TRUE(std::isfinite(g));
}

// The vocabulary split over shards of 15 and 22 columns, each shard's partial results combined
// as the tensor group's reductions would: the same loss and gradient as the whole vocabulary.
TEST(CrossEntropyTest, VocabularyShardsMatchTheWholeVocabulary) {
  const auto logits = RandomVector(kT * kV, 7, -8.0f, 8.0f);
  const std::vector<int32_t> targets = {3, -1, 36, 20};
  const double normaliser = 6.0;
  std::vector<float> want_grad(kT * kV);
  const double want = CrossEntropyForwardBackward(want_grad.data(), logits.data(), targets.data(), kT, kV, normaliser);
  const int cuts[3] = {0, 15, kV};
  std::vector<std::vector<float>> shard(2), probs(2), maxes(2, std::vector<float>(kT)), sums(2, std::vector<float>(2 * kT));
  for (int k = 0; k < 2; ++k) {
    const int vl = cuts[k + 1] - cuts[k];
    for (int t = 0; t < kT; ++t) shard[k].insert(shard[k].end(), logits.begin() + t * kV + cuts[k], logits.begin() + t * kV + cuts[k + 1]);
    VocabShardRowMax(maxes[k].data(), shard[k].data(), kT, vl);
  }
  std::vector<float> row_max(kT), total(2 * kT, 0.0f);
  for (int t = 0; t < kT; ++t) row_max[t] = std::max(maxes[0][t], maxes[1][t]);  // all-reduce max
  for (int k = 0; k < 2; ++k) {
    probs[k].resize(shard[k].size());
    VocabShardExp(probs[k].data(), sums[k].data(), shard[k].data(), row_max.data(), targets.data(), kT, cuts[k + 1] - cuts[k], cuts[k]);
    for (int i = 0; i < 2 * kT; ++i) total[i] += sums[k][i];  // all-reduce sum
  }
  EXPECT_NEAR(VocabShardLoss(total.data(), row_max.data(), targets.data(), kT, normaliser), want, 1e-5);
  for (int k = 0; k < 2; ++k) {
    const int vl = cuts[k + 1] - cuts[k];
    std::vector<float> grad(probs[k].size());
    VocabShardLossBackward(grad.data(), probs[k].data(), total.data(), targets.data(), kT, vl, cuts[k], normaliser);
    for (int t = 0; t < kT; ++t) {
      for (int j = 0; j < vl; ++j) EXPECT_NEAR(grad[t * vl + j], want_grad[t * kV + cuts[k] + j], 1e-6) << "shard " << k << " row " << t;
    }
  }
}

}  // namespace
}  // namespace shardsim::runtime
