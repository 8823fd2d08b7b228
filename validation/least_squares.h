// Bounded nonlinear least squares for a few parameters: Levenberg-Marquardt with a
// forward-difference Jacobian, each step projected onto the bounds (a parameter at a bound that
// the gradient pushes outward stays there). What `calibrate --from-runs` fits efficiencies with.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace shardsim::validation {

struct LeastSquaresFit {
  std::vector<double> x;     // the parameters at the least sum of squares found
  double cost = 0;           // that sum of squared residuals
  int iterations = 0;        // accepted steps
  int64_t evaluations = 0;   // calls of the residual function
  bool converged = false;    // false: stopped at the iteration limit, or no finite cost to start from
  // Per parameter, its standard error (1 sigma, in x's units) at the solution: sigma^2 (J'J)^-1
  // over the parameters off their bounds, sigma^2 the residuals' sum of squares over their count
  // less those parameters'. NaN where not determined: at a bound, not converged, no more residuals
  // than free parameters, or J'J singular (a parameter's variance inflated a million-fold).
  std::vector<double> std_error;
};

// Minimises the sum of squares of residuals(x) over low <= x <= high from `x` (clamped into the
// bounds). Converged when a step lowers the cost by less than a part in 10^9 or moves no parameter
// by more than 10^-7 of max(1, |value|), or no step lowers it at all; not converged after
// max_iterations steps or when the start's cost is not finite.
LeastSquaresFit MinimiseSquares(const std::function<std::vector<double>(const std::vector<double>&)>& residuals, std::vector<double> x,
                                const std::vector<double>& low, const std::vector<double>& high, int max_iterations = 200);

}  // namespace shardsim::validation
