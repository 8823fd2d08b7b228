// What `shardsim calibrate` prints: the measured figures with their units and how much repeated
// measurements of each disagreed (the spread: (max - min) / median over the repeats).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/cluster_spec.h"

namespace shardsim::validation {

// Spreads of each measured figure, by section.
struct SpreadSummary {
  std::vector<double> gemm, kernels, p2p, collectives;
  double triad = 0;
  double Largest() const;
  // The sections whose repeats disagree, by their JSON key (gemm, kernels, p2p, collectives,
  // triad), each with its median spread (the triad's own): above kNoisySpread; empty when none is.
  std::map<std::string, double> Noisy() const;
};
// A section's median spread over repeats above which calibrate warns: the machine was likely busy
// (its figures are medians still, but skewed).
inline constexpr double kNoisySpread = 0.2;

std::string CalibrationSummaryText(const ClusterSpec& cluster, const SpreadSummary& spread, const std::string& out, double seconds);
nlohmann::json CalibrationSummaryJson(const ClusterSpec& cluster, const SpreadSummary& spread, const std::string& out, double seconds);

}  // namespace shardsim::validation
