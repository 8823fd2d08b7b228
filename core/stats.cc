#include "core/stats.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace shardsim {

double Median(std::vector<double> values) {
  const size_t n = values.size();
  if (n == 0) return 0;
  std::sort(values.begin(), values.end());
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

double UpperMedian(std::vector<double> values) {
  if (values.empty()) return 0;
  const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
}

double NearestRankQuantile(std::vector<double> values, double q) {
  const size_t n = values.size();
  if (n == 0) return 0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(n)));
  return values[std::clamp<size_t>(rank, 1, n) - 1];
}

}  // namespace shardsim
