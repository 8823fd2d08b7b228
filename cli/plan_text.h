// A plan's short text in `shardsim plan`'s tables: its mesh (with the layout when not the
// default) and its pipeline schedule.
#pragma once

#include <string>

#include "core/plan_spec.h"

namespace shardsim::cli {

// "data=2 x tensor=8", with " [outer>inner: data>context>tensor]" when the mesh_order is not the default.
std::string MeshText(const PlanSpec& plan);

// "1f1b", "interleaved-1f1b v=2", or "-" without pipeline parallelism.
std::string ScheduleName(const PlanSpec& plan);

}  // namespace shardsim::cli
