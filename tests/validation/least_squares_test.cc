// MinimiseSquares: known minima found, bounds held, a curved valley followed, and the iteration
// limit reported.
#include "validation/least_squares.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace shardsim::validation {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// y = 2 x - 1 at five points: the straight line's slope and intercept, exactly.
std::vector<double> LineResiduals(const std::vector<double>& p) {
  std::vector<double> r;
  for (double x : {0.0, 1.0, 2.0, 3.0, 4.0}) r.push_back(p[0] * x + p[1] - (2 * x - 1));
  return r;
}

TEST(LeastSquaresTest, FindsALinearFitsParameters) {
  const LeastSquaresFit fit = MinimiseSquares(LineResiduals, {0, 0}, {-kInf, -kInf}, {kInf, kInf});
  EXPECT_TRUE(fit.converged);
  EXPECT_NEAR(fit.x[0], 2, 1e-6);
  EXPECT_NEAR(fit.x[1], -1, 1e-6);
  EXPECT_NEAR(fit.cost, 0, 1e-10);
}

// The standard error of a mean: residuals x - d over d = 1, 2, 3, 4 give x = 2.5, a sum of squares
// of 5 over 4 - 1 degrees of freedom and J'J = 4, so sqrt(5 / 3 / 4). A parameter held at its bound
// has none, nor has an exact fit (as many residuals as parameters).
TEST(LeastSquaresTest, StandardErrorsFromTheScatterAndTheJacobian) {
  auto mean = [](const std::vector<double>& p) {
    std::vector<double> r;
    for (double d : {1.0, 2.0, 3.0, 4.0}) r.push_back(p[0] - d);
    return r;
  };
  const LeastSquaresFit fit = MinimiseSquares(mean, {0}, {-kInf}, {kInf});
  ASSERT_EQ(fit.std_error.size(), 1u);
  EXPECT_NEAR(fit.x[0], 2.5, 1e-6);
  EXPECT_NEAR(fit.std_error[0], std::sqrt(5.0 / 3.0 / 4.0), 1e-5);
  const LeastSquaresFit held = MinimiseSquares(LineResiduals, {0, 0}, {-10, -10}, {1.5, 10});
  EXPECT_TRUE(std::isnan(held.std_error[0]));
  EXPECT_TRUE(std::isfinite(held.std_error[1]));
  auto one = [](const std::vector<double>& p) { return std::vector<double>{p[0] - 3}; };
  EXPECT_TRUE(std::isnan(MinimiseSquares(one, {0}, {-kInf}, {kInf}).std_error[0]));
  // Two parameters the residuals cannot tell apart (only their near-sum matters): none for either.
  auto sum = [](const std::vector<double>& p) {
    std::vector<double> r;
    for (double d : {1.0, 2.0, 3.0, 4.0}) r.push_back(p[0] + (1 + 1e-9) * p[1] - d);
    return r;
  };
  const LeastSquaresFit alike = MinimiseSquares(sum, {0, 0}, {-kInf, -kInf}, {kInf, kInf});
  EXPECT_TRUE(std::isnan(alike.std_error[0]));
  EXPECT_TRUE(std::isnan(alike.std_error[1]));
}

// The unconstrained slope (2) lies above the bound 1.5: the fit stops on the bound, not past it,
// and the free intercept is the best for that slope.
TEST(LeastSquaresTest, HoldsAParameterAtTheBoundItIsPushedPast) {
  const LeastSquaresFit fit = MinimiseSquares(LineResiduals, {0, 0}, {-10, -10}, {1.5, 10});
  EXPECT_TRUE(fit.converged);
  EXPECT_DOUBLE_EQ(fit.x[0], 1.5);
  EXPECT_NEAR(fit.x[1], 0, 1e-5);  // mean of (2x - 1) - 1.5x over x = 0..4
}

// Mirrored: the best slope (2) lies below the bound 2.5, so the slope rests on its lower bound.
TEST(LeastSquaresTest, HoldsAParameterAtALowerBound) {
  const LeastSquaresFit fit = MinimiseSquares(LineResiduals, {3, 0}, {2.5, -10}, {10, 10});
  EXPECT_TRUE(fit.converged);
  EXPECT_DOUBLE_EQ(fit.x[0], 2.5);
  EXPECT_NEAR(fit.x[1], -2, 1e-5);  // mean of (2x - 1) - 2.5x over x = 0..4
}

// Residuals with no value past an upper bound (as clamped efficiencies give none beyond theirs):
// the Jacobian at the bound is taken from below, and the fit rests there.
TEST(LeastSquaresTest, DifferencesFromBelowAtAnUpperBound) {
  auto undefined_past_one = [](const std::vector<double>& p) {
    return std::vector<double>{p[0] > 1 ? std::nan("") : p[0] - 2, p[1] - 3};
  };
  const LeastSquaresFit fit = MinimiseSquares(undefined_past_one, {1, 0}, {-5, -5}, {1, 5});
  EXPECT_TRUE(fit.converged);
  EXPECT_DOUBLE_EQ(fit.x[0], 1);
  EXPECT_NEAR(fit.x[1], 3, 1e-6);
}

// No finite cost at the start: not converged, and the start is returned as it was.
TEST(LeastSquaresTest, AnUndefinedStartIsNotConverged) {
  const LeastSquaresFit fit = MinimiseSquares([](const std::vector<double>&) { return std::vector<double>{std::nan("")}; }, {0.5}, {0}, {1});
  EXPECT_FALSE(fit.converged);
  EXPECT_DOUBLE_EQ(fit.x[0], 0.5);
}

// Rosenbrock's valley as residuals (1 - x, 10 (y - x^2)): coordinate steps crawl along it; the
// fit reaches (1, 1) from (-1.2, 1).
std::vector<double> Rosenbrock(const std::vector<double>& p) { return {1 - p[0], 10 * (p[1] - p[0] * p[0])}; }

TEST(LeastSquaresTest, FollowsACurvedValleyToItsMinimum) {
  const LeastSquaresFit fit = MinimiseSquares(Rosenbrock, {-1.2, 1}, {-5, -5}, {5, 5});
  EXPECT_TRUE(fit.converged);
  EXPECT_NEAR(fit.x[0], 1, 1e-4);
  EXPECT_NEAR(fit.x[1], 1, 1e-4);
  EXPECT_LT(fit.iterations, 100);
}

TEST(LeastSquaresTest, SaysWhenItStopsAtTheIterationLimit) {
  const LeastSquaresFit fit = MinimiseSquares(Rosenbrock, {-1.2, 1}, {-5, -5}, {5, 5}, /*max_iterations=*/2);
  EXPECT_FALSE(fit.converged);
  EXPECT_EQ(fit.iterations, 2);
  EXPECT_GT(fit.cost, 1e-3);
}

}  // namespace
}  // namespace shardsim::validation
