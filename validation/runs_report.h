// The accuracy of fitted (or catalogue) efficiencies on measured runs: error statistics of the
// step time per source, per group and over all runs, for the fit and the test runs apart, and
// the memory model against published peaks; as JSON for `calibrate --from-runs --json`.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "validation/runs_fit.h"

namespace shardsim::validation {

// predicted / measured - 1 over a set of runs: the median and 90th percentile (nearest rank) of
// its absolute value, its median with its sign (a model too fast or too slow overall shows
// there), how many runs are predicted below their measured figure, and how many within 10%.
struct ErrorStats {
  int64_t runs = 0;
  double median = 0, p90 = 0;
  double median_signed = 0;
  int64_t below = 0, within_tenth = 0;
};
ErrorStats StatsOf(const std::vector<double>& errors);

struct AccuracySummary {
  ErrorStats fit, test;  // all runs of each split
  std::map<std::string, ErrorStats> test_by_source, test_by_group, fit_by_source, fit_by_group;
  ErrorStats memory;     // runs with a published peak, |predicted / published - 1| (both splits)
  int64_t above_hbm = 0;  // runs predicted above their device's HBM (RunResult::above_hbm)
};
AccuracySummary Summarize(const std::vector<GroupFit>& fits);

nlohmann::json RunsReportJson(const std::vector<GroupFit>& fits, const AccuracySummary& summary);

}  // namespace shardsim::validation
