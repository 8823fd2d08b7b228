// The report JSON of one predicted step (the CLI docs' format), shared by estimate and plan.
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

#include "core/cluster_spec.h"
#include "core/model_spec.h"
#include "core/plan_spec.h"
#include "sim/estimate.h"
#include "sim/routed_all_to_all.h"
#include "topologies/cluster.h"

namespace shardsim::cli {

// A deduplicating dispatcher's (ep_dispatcher deepep) rows per token over the network, for the
// plan's first expert group (a regular mesh's groups share its layout); nullopt for other plans
// and where the group has no nodes to forward in.
std::optional<sim::NetworkRows> DispatchRows(const topologies::Cluster& graph, const ModelSpec& model, const PlanSpec& plan);

// The report JSON; with an expert_dispatch object where DispatchRows has one.
nlohmann::json ReportJson(const ModelSpec& model, const ClusterSpec& cluster, const PlanSpec& plan, const sim::StepReport& report);

}  // namespace shardsim::cli
