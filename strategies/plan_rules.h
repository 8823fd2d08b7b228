// The plan's rules, one set, as values: whether a plan can run a model on a number of devices.
// The CLI prints an Infeasibility as its one-line error (ValidatePlan), the planner keeps it as a
// miss with its reason (CheckPlan), and the runtime adds only its own limits.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/error.h"
#include "core/model_spec.h"
#include "core/plan_spec.h"

namespace shardsim::strategies {

// The first rule `plan` breaks, or nothing: mesh_order a permutation of the axes; mesh product =
// `devices` (from `devices_source`, e.g. "dgx-h100:64"); tensor divides heads and K/V heads;
// expert divides experts (and needs an MoE model); context and sequence parallelism divide the
// sequence; the global batch splits into replicas and micro-batches; the schedule is known and
// accepts the plan (its own Check); the stage layout holds the model (CheckLayout).
std::optional<Infeasibility> CheckPlan(const PlanSpec& plan, const ModelSpec& model,
                                       int64_t devices, const std::string& devices_source);

// CheckPlan, throwing the InputError at `where` + "/" + field (e.g. "plan.json:/mesh/tensor").
void ValidatePlan(const PlanSpec& plan, const ModelSpec& model, int64_t devices,
                  const std::string& devices_source, const std::string& where);

// The mesh_order rule alone (a permutation of the axes), for a plan's fixed fields before any
// mesh is chosen (planner constraints), throwing as ValidatePlan does.
std::optional<Infeasibility> CheckMeshOrder(const PlanSpec& plan);
void ValidateMeshOrder(const PlanSpec& plan, const std::string& where);

}  // namespace shardsim::strategies
