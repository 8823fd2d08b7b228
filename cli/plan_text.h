// A plan's short text in `shardsim plan`'s tables: its mesh in the compact notation, its ZeRO
// stage with the axes it shards over, and its pipeline schedule.
#pragma once

#include <string>

#include "core/plan_spec.h"

namespace shardsim::cli {

// "p2 d2 f8 t2": each axis of size > 1 as its letter and degree (core/mesh_axes.h), outermost
// first, with "*" after it when the layout is not the default order, and " E:ct" when the
// routed experts are folded over those axes (expert_axes); "1" on one device.
std::string MeshText(const PlanSpec& plan);
// What the letters, the "*" and (where `folds`: a fold is shown) "E:" mean, in a line.
std::string MeshLegend(bool folds);

// "1 (d,c)": the ZeRO stage and the axes it shards over (the replica axes of the dense
// parameters); "-" when the plan has no such axis (fsdp shards by itself); " rg" / " kg" added
// when sharded parameters are re-gathered for the backward / kept gathered against the default.
std::string ZeroText(const PlanSpec& plan);

// The plan's recomputation, and its activation offloading where it has any: "full",
// "none +offload 95 layers" (PlanSpec::offload_layers).
std::string RecomputeText(const PlanSpec& plan);

// "1f1b", "interleaved-1f1b v=2", "1f1b +split" (stages split otherwise than the default: the
// plan's pipeline_layout), or "-" without pipeline parallelism.
std::string ScheduleName(const PlanSpec& plan);
// What a header line names after the mesh: ", 1f1b", ", interleaved-1f1b v=2", nothing without
// pipeline parallelism.
std::string ScheduleInHeader(const PlanSpec& plan);

}  // namespace shardsim::cli
