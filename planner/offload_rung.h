// The planner's activation-offloading rung (PlanSpec::offload_layers): which values the search
// tries for a plan that does not fit, as the framework runs them (OffloadRule).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/model_spec.h"
#include "core/plan_spec.h"
#include "planner/frameworks.h"

namespace shardsim::planner {

// One value to try: offload_layers, and the share of the largest chunk's decoder layers it
// offloads (a bound: offloading that share of each chunk frees at most that share of the peak
// stage's activations).
struct OffloadStep {
  int64_t layers = 0;
  double share = 0;
};

// Fewest first: a quarter, a half, three quarters and all of the largest chunk's decoder layers
// where `plan` recomputes nothing; under a framework only what it runs: Megatron-core fewer than
// all layers, without pipeline stages or recomputation; MaxText every layer, with its offloaded
// policies' sets (minimal, save-qkv-proj); none for the others.
std::vector<OffloadStep> OffloadRung(const std::optional<Framework>& framework, const ModelSpec& m, const PlanSpec& plan);

}  // namespace shardsim::planner
