#include "cli/plan_text.h"

#include <algorithm>

#include "strategies/data_parallel.h"

namespace shardsim::cli {

std::string MeshText(const PlanSpec& p) {
  std::string text;
  for (const std::string& axis : UsedMeshOrder(p)) {
    text += (text.empty() ? "" : " ") + std::string(AxisFacts(axis).letter) + std::to_string(p.mesh.Size(axis));
  }
  if (text.empty()) return "1";
  if (!UsesDefaultMeshOrder(p)) text += "*";
  // An expert fold: the letters of the axes the routed experts are split over, in the mesh's order.
  if (!p.expert_axes.empty()) {
    const std::vector<std::string> fold = ExpertAxes(p);
    text += " E:";
    for (const std::string& axis : UsedMeshOrder(p)) {
      if (std::find(fold.begin(), fold.end(), axis) != fold.end()) text += AxisFacts(axis).letter;
    }
  }
  return text;
}

std::string MeshLegend(bool folds) {
  std::string letters, order;
  for (const MeshAxisFacts& axis : kMeshAxes) letters += (letters.empty() ? "" : ", ") + std::string(axis.letter) + " " + std::string(axis.name);
  for (const std::string& axis : DefaultMeshOrder()) order += (order.empty() ? "" : " ") + std::string(AxisFacts(axis).letter);
  return "mesh: " + letters + ", outermost (slowest links) first; * a layout other than the default " + order +
         (folds ? "; E:ct the routed experts split over those axes (expert_axes, MoE parallel folding)" : "");
}

std::string ZeroText(const PlanSpec& p) {
  std::string axes;
  for (const std::string& axis : strategies::ReplicaAxes(p, strategies::ParamKind::kDense)) {
    if (p.mesh.Size(axis) > 1) axes += (axes.empty() ? "" : ",") + std::string(AxisFacts(axis).letter);
  }
  // Sharded parameters re-gathered for the backward ("rg") or kept gathered ("kg") where that is
  // not the default (docs/plan.md).
  std::string reshard;
  if (p.fsdp_reshard_after_forward && *p.fsdp_reshard_after_forward != (p.mesh.pipeline == 1) &&
      !strategies::ParamShardAxes(p, strategies::ParamKind::kDense).empty()) {
    reshard = *p.fsdp_reshard_after_forward ? " rg" : " kg";
  }
  if (axes.empty()) return "-" + reshard;
  return std::to_string(p.zero_stage) + " (" + axes + ")" + reshard;
}

std::string ScheduleInHeader(const PlanSpec& p) { return p.mesh.pipeline > 1 ? ", " + ScheduleName(p) : ""; }

std::string RecomputeText(const PlanSpec& plan) {
  return ToString(plan.recompute) + (plan.offload_layers > 0 ? " +offload " + std::to_string(plan.offload_layers) + " layers" : "");
}

std::string ScheduleName(const PlanSpec& p) {
  if (p.mesh.pipeline == 1) return "-";
  return p.pipeline_schedule + (p.virtual_stages > 1 ? " v=" + std::to_string(p.virtual_stages) : "") +
         (p.pipeline_rounds > 1 ? " rounds=" + std::to_string(p.pipeline_rounds) : "") + (p.pipeline_layout.empty() ? "" : " +split");
}

}  // namespace shardsim::cli
