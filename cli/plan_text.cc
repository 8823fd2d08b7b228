#include "cli/plan_text.h"

namespace shardsim::cli {

std::string MeshText(const PlanSpec& p) {
  std::string text = DescribeMesh(p.mesh);
  if (UsesDefaultMeshOrder(p)) return text;
  std::string order;
  for (const std::string& a : UsedMeshOrder(p)) order += (order.empty() ? "" : ">") + a;
  return text + " [outer>inner: " + order + "]";
}

std::string ScheduleName(const PlanSpec& p) {
  if (p.mesh.pipeline == 1) return "-";
  return p.pipeline_schedule + (p.virtual_stages > 1 ? " v=" + std::to_string(p.virtual_stages) : "");
}

}  // namespace shardsim::cli
