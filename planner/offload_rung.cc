#include "planner/offload_rung.h"

#include <algorithm>

#include "planner/framework_facts.h"
#include "strategies/stage_layout.h"

namespace shardsim::planner {

std::vector<OffloadStep> OffloadRung(const std::optional<Framework>& framework, const ModelSpec& m, const PlanSpec& plan) {
  const OffloadRule rule = framework ? FactsOf(*framework).offload : OffloadRule::kFirstLayers;
  if (rule == OffloadRule::kNone) return {};
  if (rule == OffloadRule::kEveryLayer) {
    const bool offloaded_policy = plan.recompute == Recompute::kMinimal || plan.recompute == Recompute::kSaveQkvProj;
    return offloaded_policy ? std::vector<OffloadStep>{{m.num_layers, 1.0}} : std::vector<OffloadStep>{};
  }
  if (plan.recompute != Recompute::kNone || (framework && plan.mesh.pipeline > 1)) return {};
  int64_t chunk_layers = 0;  // the largest chunk's
  for (const auto& stage : strategies::LayOut(m, plan).at) {
    for (const strategies::ChunkLayout& chunk : stage) chunk_layers = std::max(chunk_layers, chunk.layers);
  }
  if (chunk_layers == 0) return {};
  const int64_t most = framework ? std::min(chunk_layers, m.num_layers - 1) : chunk_layers;
  std::vector<OffloadStep> steps;
  for (int64_t quarters = 1; quarters <= 4; ++quarters) {
    const int64_t n = std::min(most, std::max<int64_t>(1, chunk_layers * quarters / 4));
    if (n > 0 && (steps.empty() || n > steps.back().layers)) {
      steps.push_back({n, static_cast<double>(n) / static_cast<double>(chunk_layers)});
    }
  }
  return steps;
}

}  // namespace shardsim::planner
