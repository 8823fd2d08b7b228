// What `shardsim plan` found, and its two ways of saying it: readable text (120 columns unless
// --wide) and one JSON object.
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "cli/commands.h"
#include "cli/plan_refine.h"
#include "core/cluster_spec.h"
#include "core/model_spec.h"
#include "planner/constraints.h"
#include "planner/export.h"
#include "planner/frameworks.h"
#include "planner/min_devices.h"
#include "planner/search.h"

namespace shardsim::cli {

// The text output's width unless --wide.
inline constexpr size_t kTextWidth = 120;

struct PlanFindings {
  PlanFindings(const ModelSpec& m, const ClusterSpec& c, const PlanOptions& o) : model(m), cluster(c), options(o) {}
  const ModelSpec& model;
  const ClusterSpec& cluster;
  const PlanOptions& options;
  int64_t tokens_per_step = 0, seq_len = 0;
  planner::PlanConstraints constraints;
  std::optional<planner::Framework> framework;
  std::optional<planner::ExportTarget> target;  // --export, else the framework's own
  std::string export_name;                      // as the user named it
  planner::SearchResult result;
  std::optional<planner::SmallestFit> smallest;  // searched when nothing fits
  Refinement refinement;
};

void PrintPlanText(const PlanFindings& findings, std::ostream& out);
nlohmann::json PlanFindingsJson(const PlanFindings& findings);

}  // namespace shardsim::cli
