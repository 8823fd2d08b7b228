// The model, cluster and checked plan of one step, as `estimate` and `simulate` read them from
// --model, --cluster, --plan and --set.
#pragma once

#include <string>

#include "cli/commands.h"
#include "core/cluster_spec.h"
#include "core/model_spec.h"
#include "core/plan_spec.h"

namespace shardsim::cli {

struct StepInputs {
  ModelSpec model;
  ClusterSpec cluster;
  PlanSpec plan;        // as it runs: what the plan leaves unset filled in by its framework
  PlanSpec as_written;  // as the plan file and --set gave it
};

// Loads and validates them; throws InputError naming `command` and the field when one is missing
// or wrong (no peak for the plan's dtype, a plan the model or cluster cannot run).
StepInputs LoadStepInputs(const Inputs& inputs, const std::string& command);

}  // namespace shardsim::cli
