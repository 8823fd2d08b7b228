// The meshes a plan search tries on a cluster's devices, and the one-line error where there are
// none (naming the fixed fields that leave none).
#pragma once

#include <cstdint>
#include <vector>

#include "core/cluster_spec.h"
#include "core/mesh.h"
#include "core/model_spec.h"
#include "planner/constraints.h"

namespace shardsim::planner {

// Every mesh of the cluster's devices: each axis takes the degrees the table's search rule gives
// (core/mesh_axes.h: every divisor of the devices left, data what is left), within the limits the
// model and cluster set, or the degree the constraints fix. Tensor parallelism stays inside the
// fastest domain unless fixed: an NVSwitch node, or up to 16 chips of a torus (one axis).
std::vector<MeshShape> Meshes(const ModelSpec& m, const ClusterSpec& c, const PlanConstraints& fixed, int64_t sequences, int64_t seq_len);

// Throws the InputError for a search with no mesh: a fixed schedule that asks for pipeline stages
// the fixed axes leave no room for, the fixed axes, or else the batch (--global-batch-tokens).
[[noreturn]] void ThrowNoMesh(const ModelSpec& m, const ClusterSpec& c, const PlanConstraints& fixed, int64_t sequences, int64_t seq_len);

}  // namespace shardsim::planner
