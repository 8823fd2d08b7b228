#include "validation/least_squares.h"

#include <algorithm>
#include <cmath>

namespace shardsim::validation {
namespace {

double SumOfSquares(const std::vector<double>& r) {
  double s = 0;
  for (double v : r) s += v * v;
  return s;
}

// Solves a x = b for a small dense symmetric positive (damped) system by Gaussian elimination with
// partial pivoting; false if it is singular.
bool Solve(std::vector<std::vector<double>> a, std::vector<double> b, std::vector<double>& x) {
  const size_t n = b.size();
  for (size_t c = 0; c < n; ++c) {
    size_t pivot = c;
    for (size_t r = c + 1; r < n; ++r) {
      if (std::abs(a[r][c]) > std::abs(a[pivot][c])) pivot = r;
    }
    if (std::abs(a[pivot][c]) < 1e-300) return false;
    std::swap(a[c], a[pivot]);
    std::swap(b[c], b[pivot]);
    for (size_t r = c + 1; r < n; ++r) {
      const double f = a[r][c] / a[c][c];
      for (size_t k = c; k < n; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  x.assign(n, 0);
  for (size_t c = n; c-- > 0;) {
    double s = b[c];
    for (size_t k = c + 1; k < n; ++k) s -= a[c][k] * x[k];
    x[c] = s / a[c][c];
  }
  return true;
}

using Matrix = std::vector<std::vector<double>>;  // [parameter][residual] for the Jacobian

// The Jacobian at `x` (residuals `r`) by forward differences: backward ones at an upper bound or
// where the forward point has no finite residuals; a parameter with neither keeps a zero column.
Matrix Jacobian(const std::function<std::vector<double>(const std::vector<double>&)>& evaluate, const std::vector<double>& x,
                const std::vector<double>& r, const std::vector<double>& low, const std::vector<double>& high) {
  constexpr double kStep = 1e-6;  // relative
  Matrix jacobian(x.size(), std::vector<double>(r.size(), 0));
  for (size_t i = 0; i < x.size(); ++i) {
    const double size = kStep * std::max(1.0, std::abs(x[i]));
    const double first = x[i] + size <= high[i] ? size : -size;
    for (double h : {first, -first}) {
      std::vector<double> moved = x;
      moved[i] += h;
      if (moved[i] < low[i] || moved[i] > high[i]) continue;
      const std::vector<double> rh = evaluate(moved);
      if (!std::isfinite(SumOfSquares(rh))) continue;
      for (size_t j = 0; j < r.size(); ++j) jacobian[i][j] = (rh[j] - r[j]) / h;
      break;
    }
  }
  return jacobian;
}

// J'J over the `free` parameters.
Matrix NormalMatrix(const Matrix& jacobian, const std::vector<size_t>& free) {
  Matrix a(free.size(), std::vector<double>(free.size(), 0));
  for (size_t p = 0; p < free.size(); ++p) {
    for (size_t q = 0; q < free.size(); ++q) {
      for (size_t j = 0; j < jacobian[free[p]].size(); ++j) a[p][q] += jacobian[free[p]][j] * jacobian[free[q]][j];
    }
  }
  return a;
}

// The damped Gauss-Newton step of the `free` parameters: (J'J + lambda diag(J'J)) step = -gradient.
bool DampedStep(const Matrix& jacobian, const std::vector<double>& gradient, const std::vector<size_t>& free, double lambda,
                std::vector<double>& step) {
  Matrix a = NormalMatrix(jacobian, free);
  std::vector<double> b(free.size());
  for (size_t p = 0; p < free.size(); ++p) {
    a[p][p] += lambda * a[p][p] + 1e-12;
    b[p] = -gradient[free[p]];
  }
  return Solve(a, b, step);
}

// StdErrors: LeastSquaresFit::std_error at `x` (residuals `r`, their sum of squares `cost`).
std::vector<double> StdErrors(const std::function<std::vector<double>(const std::vector<double>&)>& evaluate, const std::vector<double>& x,
                              const std::vector<double>& r, double cost, const std::vector<double>& low, const std::vector<double>& high) {
  std::vector<double> errors(x.size(), std::nan(""));
  std::vector<size_t> free;
  for (size_t i = 0; i < x.size(); ++i) {
    const double margin = 1e-9 * std::max(1.0, std::abs(x[i]));
    if (x[i] > low[i] + margin && x[i] < high[i] - margin) free.push_back(i);
  }
  if (free.empty() || r.size() <= free.size()) return errors;
  const Matrix a = NormalMatrix(Jacobian(evaluate, x, r, low, high), free);
  // A parameter the residuals cannot tell apart from the others (its variance inflated past
  // kMaxInflation, (J'J)^-1_pp J'J_pp, as when runs repeat one configuration) leaves them all
  // undetermined: J'J is singular in all but rounding.
  constexpr double kMaxInflation = 1e6;
  const double variance = cost / static_cast<double>(r.size() - free.size());
  for (size_t p = 0; p < free.size(); ++p) {
    std::vector<double> unit(free.size(), 0), column;
    unit[p] = 1;
    if (!Solve(a, unit, column) || !(column[p] > 0) || column[p] * a[p][p] > kMaxInflation) return std::vector<double>(x.size(), std::nan(""));
    errors[free[p]] = std::sqrt(variance * column[p]);
  }
  return errors;
}

}  // namespace

LeastSquaresFit MinimiseSquares(const std::function<std::vector<double>(const std::vector<double>&)>& residuals, std::vector<double> x,
                                const std::vector<double>& low, const std::vector<double>& high, int max_iterations) {
  const size_t n = x.size();
  for (size_t i = 0; i < n; ++i) x[i] = std::clamp(x[i], low[i], high[i]);
  LeastSquaresFit fit;
  auto evaluate = [&](const std::vector<double>& at) {
    ++fit.evaluations;
    return residuals(at);
  };
  std::vector<double> r = evaluate(x);
  double cost = SumOfSquares(r), lambda = 1e-3;
  if (!std::isfinite(cost)) {  // nothing to descend from: not converged
    fit.std_error.assign(n, std::nan(""));
    fit.x = std::move(x);
    fit.cost = cost;
    return fit;
  }
  for (; fit.iterations < max_iterations;) {
    const Matrix jacobian = Jacobian(evaluate, x, r, low, high);
    std::vector<double> gradient(n, 0);
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < r.size(); ++j) gradient[i] += jacobian[i][j] * r[j];
    }
    // Free parameters: those not held at a bound the descent direction (-gradient) points past.
    std::vector<size_t> free;
    for (size_t i = 0; i < n; ++i) {
      const bool held = (x[i] <= low[i] && gradient[i] > 0) || (x[i] >= high[i] && gradient[i] < 0);
      if (!held) free.push_back(i);
    }
    if (free.empty()) {
      fit.converged = true;
      break;
    }
    bool accepted = false;
    std::vector<double> next;
    std::vector<double> r_next;
    double cost_next = cost;
    for (int attempt = 0; attempt < 12 && !accepted; ++attempt) {
      std::vector<double> step;
      if (!DampedStep(jacobian, gradient, free, lambda, step)) {
        lambda *= 4;
        continue;
      }
      next = x;
      for (size_t p = 0; p < free.size(); ++p) next[free[p]] = std::clamp(x[free[p]] + step[p], low[free[p]], high[free[p]]);
      r_next = evaluate(next);
      cost_next = SumOfSquares(r_next);
      if (cost_next < cost) {
        accepted = true;
        lambda = std::max(lambda / 3, 1e-9);
      } else {
        lambda *= 4;
      }
    }
    if (!accepted) {
      fit.converged = true;  // no step lowers the cost: a (bounded) minimum
      break;
    }
    ++fit.iterations;
    double moved = 0;  // the largest relative move
    for (size_t i = 0; i < n; ++i) moved = std::max(moved, std::abs(next[i] - x[i]) / std::max(1.0, std::abs(x[i])));
    const bool small = cost - cost_next <= 1e-9 * cost || moved <= 1e-7;
    x = std::move(next);
    r = std::move(r_next);
    cost = cost_next;
    if (small) {
      fit.converged = true;
      break;
    }
  }
  fit.std_error = fit.converged ? StdErrors(evaluate, x, r, cost, low, high) : std::vector<double>(n, std::nan(""));
  fit.x = std::move(x);
  fit.cost = cost;
  return fit;
}

}  // namespace shardsim::validation
