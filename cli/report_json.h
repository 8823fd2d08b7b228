// The report JSON of one predicted step (the CLI docs' format), shared by estimate and plan.
#pragma once

#include <nlohmann/json.hpp>

#include "core/cluster_spec.h"
#include "core/model_spec.h"
#include "core/plan_spec.h"
#include "sim/estimate.h"

namespace shardsim::cli {

nlohmann::json ReportJson(const ModelSpec& model, const ClusterSpec& cluster, const PlanSpec& plan, const sim::StepReport& report);

}  // namespace shardsim::cli
