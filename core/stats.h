// Order statistics every layer shares: medians of measured repeats and of errors, and the p90
// of the accuracy reports.
#pragma once

#include <vector>

namespace shardsim {

// The median: the middle value, or the mean of the two middle ones for an even count; 0 for none.
double Median(std::vector<double> values);
// The upper median: the middle value, or the higher of the two middle ones, so always a value
// that was measured (what the timing loops keep); 0 for none.
double UpperMedian(std::vector<double> values);
// The nearest-rank quantile: the smallest value that at least a share `q` (0 < q <= 1) of
// `values` do not exceed (p90: q = 0.9); 0 for none.
double NearestRankQuantile(std::vector<double> values, double q);

}  // namespace shardsim
