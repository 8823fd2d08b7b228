// Helpers for the kernel tests: seeded random arrays, the probe loss L = sum(out * w) in double,
// central differences, and elementwise comparison with a tolerance.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace shardsim::runtime::testing {

inline std::vector<float> RandomVector(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> x(n);
  for (float& e : x) e = dist(rng);
  return x;
}

// The scalar whose gradient the tests check: L = sum(out * weights), accumulated in double.
inline double Probe(const std::vector<float>& out, const std::vector<float>& weights) {
  double sum = 0.0;
  for (size_t i = 0; i < out.size(); ++i) sum += double{out[i]} * weights[i];
  return sum;
}

// dL/dx by central differences (L(x + eps) - L(x - eps)) / 2 eps; x is restored afterwards.
inline std::vector<double> NumericGradient(std::vector<float>& x,
                                           const std::function<double()>& loss, float eps) {
  std::vector<double> grad(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float saved = x[i];
    x[i] = saved + eps;
    const double up = loss();
    x[i] = saved - eps;
    const double down = loss();
    x[i] = saved;
    grad[i] = (up - down) / (double{saved + eps} - double{saved - eps});
  }
  return grad;
}

// Expects |actual - expected| <= abs_tol + rel_tol * |expected| everywhere (equal infinities
// match); reports the first few mismatches and the largest error.
template <class A, class E>
void ExpectAllNear(const std::vector<A>& actual, const std::vector<E>& expected, double abs_tol,
                   double rel_tol, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int reported = 0;
  double worst = 0.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i];
    const double e = expected[i];
    const double err = a == e ? 0.0 : std::abs(a - e);
    worst = std::max(worst, err);
    if (!(err <= abs_tol + rel_tol * std::abs(e)) && reported < 5) {
      ADD_FAILURE() << what << "[" << i << "]: got " << a << ", want " << e;
      ++reported;
    }
  }
  if (reported > 0) ADD_FAILURE() << what << ": largest error " << worst;
}

template <class T>
std::vector<double> ToDouble(const std::vector<T>& x) {
  return std::vector<double>(x.begin(), x.end());
}

}  // namespace shardsim::runtime::testing
