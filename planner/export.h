// Exports of a plan to the frameworks people run: Megatron-LM command-line flags, a MaxText
// config fragment, a torchtitan [parallelism] TOML section, a JAX Mesh. Each says what the
// target cannot express.
#pragma once

#include <string>
#include <vector>

#include "core/cluster_spec.h"
#include "core/model_spec.h"
#include "core/plan_spec.h"

namespace shardsim::planner {

enum class ExportTarget { kMegatron, kMaxText, kTorchtitan, kJax };

std::vector<std::string> ExportTargetNames();  // "megatron", "maxtext", "torchtitan", "jax"
// Throws InputError naming `where` for an unknown name (with the closest).
ExportTarget ParseExportTarget(const std::string& name, const std::string& where);

struct Export {
  std::string text;                      // flags, YAML, TOML or Python, ready to paste
  std::vector<std::string> not_expressed;  // parts of the plan the target cannot express
};

// The layers of each pipeline stage with runs collapsed, first stage first: "7, 8 x14, 7"
// (llama3-405b on 16 stages; see LayersPerPart).
std::string StageLayers(const ModelSpec& model, const PlanSpec& plan);

Export ExportPlan(const ModelSpec& model, const ClusterSpec& cluster, const PlanSpec& plan, ExportTarget target);

}  // namespace shardsim::planner
