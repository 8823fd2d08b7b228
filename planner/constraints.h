// The plan fields a user fixes for the search (`plan --plan P --set key=value`): the search tries
// only plans that keep every fixed field and searches the rest.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/plan_spec.h"

namespace shardsim::planner {

struct PlanConstraints {
  PlanSpec values;                 // the fixed fields' values; the others are PlanSpec's defaults
  std::vector<std::string> fixed;  // their keys as --set names them: "mesh.tensor", "dtype", ...
  std::string source;              // where they come from (core/inputs.h PlanSource), for errors
  bool Fixes(std::string_view key) const;
  bool FixesAxis(MeshAxis axis) const;
  // Whether `plan` keeps every fixed field.
  bool Allows(const PlanSpec& plan) const;
};

// The keys a plan JSON (a --plan file with the --set overrides applied) names are fixed: a plan
// file's mesh fixes the axes it names, not the others. Throws InputError naming `where` and the
// field for a value the plan JSON reader refuses.
PlanConstraints ConstraintsFromJson(const nlohmann::json& plan, const std::string& where);

// {"dtype": "fp8", "mesh.tensor": 8}: each fixed key with its value, in key order.
nlohmann::json FixedJson(const PlanConstraints& constraints);
// "dtype=fp8, mesh.tensor=8" in key order, or "" when nothing is fixed.
std::string DescribeFixed(const PlanConstraints& constraints);

}  // namespace shardsim::planner
