// The planner's other layouts of a mesh's axes (mesh_order), tried for the leading meshes.
#pragma once

#include <string>
#include <vector>

#include "core/mesh.h"

namespace shardsim::planner {

// Other layouts of a mesh's axes worth trying: which axes take the fastest links (NVLink, the
// first torus dimensions) and which cross nodes or slices. Pipeline stays outermost; the axes of
// size one do not matter (the table's search_reorders says which move). Every permutation of up
// to three axes; beyond, each axis moved innermost and each moved outermost.
std::vector<std::vector<std::string>> OtherOrders(const MeshShape& mesh);

}  // namespace shardsim::planner
