#include "runtime/layernorm.h"

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

TEST(LayerNormTest, ForwardMatchesDefinition) {
  const auto x = RandomVector(kT * kD, 1, -2.0f, 3.0f);
  const auto w = RandomVector(kD, 2, 0.5f, 1.5f);
  const auto b = RandomVector(kD, 3);
  std::vector<float> y(kT * kD), mean(kT), rstd(kT);
  LayerNormForward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), kT, kD, kEps);
  std::vector<double> want_y(kT * kD), want_mean(kT), want_rstd(kT);
  for (int t = 0; t < kT; ++t) {
    double mu = 0.0, var = 0.0;
    for (int d = 0; d < kD; ++d) mu += double{x[t * kD + d]} / kD;
    for (int d = 0; d < kD; ++d) var += (x[t * kD + d] - mu) * (x[t * kD + d] - mu) / kD;
    want_mean[t] = mu;
    want_rstd[t] = 1.0 / std::sqrt(var + kEps);
    for (int d = 0; d < kD; ++d) want_y[t * kD + d] = (x[t * kD + d] - mu) * want_rstd[t] * w[d] + b[d];
  }
  ExpectAllNear(y, want_y, 1e-5, 1e-5, "y");
  ExpectAllNear(mean, want_mean, 1e-6, 1e-6, "mean");
  ExpectAllNear(rstd, want_rstd, 0.0, 1e-5, "rstd");
}

TEST(LayerNormTest, BackwardMatchesFiniteDifferencesAndAccumulates) {
  auto x = RandomVector(kT * kD, 4, -2.0f, 3.0f);
  auto w = RandomVector(kD, 5, 0.5f, 1.5f);
  auto b = RandomVector(kD, 6);
  const auto probe = RandomVector(kT * kD, 7);
  auto loss = [&] {
    std::vector<float> y(kT * kD), mean(kT), rstd(kT);
    LayerNormForward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), kT, kD, kEps);
    return Probe(y, probe);
  };
  std::vector<float> y(kT * kD), mean(kT), rstd(kT);
  LayerNormForward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), kT, kD, kEps);
  std::vector<float> dx(kT * kD, 0.5f), dw(kD, 0.5f), db(kD, 0.5f);
  LayerNormBackward(dx.data(), dw.data(), db.data(), probe.data(), x.data(), w.data(), mean.data(), rstd.data(), kT, kD);
  auto num_dx = NumericGradient(x, loss, 1e-3f);
  auto num_dw = NumericGradient(w, loss, 1e-3f);
  auto num_db = NumericGradient(b, loss, 1e-3f);
  for (auto* g : {&num_dx, &num_dw, &num_db}) {
    for (double& v : *g) v += 0.5;
  }
  ExpectAllNear(dx, num_dx, 2e-3, 1e-2, "dx");
  ExpectAllNear(dw, num_dw, 2e-3, 1e-2, "dw");
  ExpectAllNear(db, num_db, 2e-3, 1e-2, "db");
}

}  // namespace
}  // namespace shardsim::runtime
