// `shardsim plan --refine K`: the search's top K plans simulated on SimGrid (sim::Simulate),
// ranked again by the simulated step time, and where the two predictions disagree, why.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/cluster_spec.h"
#include "core/model_spec.h"
#include "planner/search.h"
#include "sim/simulate.h"

namespace shardsim::cli {

// Predictions further apart than this (relative) get a reason.
inline constexpr double kRefineTolerance = 0.02;

struct RefinedPlan {
  planner::RankedPlan estimated;  // the search's plan with its estimate
  size_t rank_by_estimate = 0;    // 1-based place in the search's ranking
  sim::SimReport simulated;
  double difference = 0;          // simulated / estimated step time - 1
  std::string why;                // empty when |difference| <= kRefineTolerance
};

// A plan whose simulation failed: it is left out of the ranking.
struct RefineFailure {
  planner::RankedPlan estimated;
  size_t rank_by_estimate = 0;
  std::string error;
};

struct Refinement {
  size_t asked = 0;                  // --refine K
  std::vector<RefinedPlan> plans;    // best by simulated step time first
  std::vector<RefineFailure> failed;
  double wall_s = 0;                 // wall time of building and simulating them all
};

// Simulates the first min(k, best.size()) plans of `best` (the search's ranking) with folding
// on, and sorts them by simulated step time (ties: the estimate's order). A plan whose
// simulation throws std::runtime_error goes to `failed`. `progress`: a line on stderr per plan.
Refinement Refine(const ModelSpec& model, const ClusterSpec& cluster, const std::vector<planner::RankedPlan>& best, size_t k, bool progress,
                  const sim::DesLimits& limits = {});

// The "Refined by simulation (SimGrid)" section: a table, a reason per plan whose predictions
// differ by more than kRefineTolerance, whether the best changed, and the wall time.
void PrintRefinement(const Refinement& refinement, std::ostream& out);

// The `refined` array of plan --json, best by simulation first.
nlohmann::json RefinedJson(const Refinement& refinement);
// The `refine_failed` array: [{plan, rank_by_estimate, error}].
nlohmann::json RefineFailedJson(const Refinement& refinement);

}  // namespace shardsim::cli
