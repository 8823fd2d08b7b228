// The mesh axes as one table of facts: each axis's name, what it does, its part in the batch and
// in parameter replication, its communication stream, its default overlap, its place in the
// default mesh order and the degrees the planner's search tries. Loops over the axes and rules
// of the form "which axes are X" read this table instead of naming axes.
//
// A new axis is a row here and an enumerator in MeshAxis, a field in MeshShape and in
// OverlapSpec (core/plan_spec.h) with its case in their Size / Overlaps switches
// (core/plan_spec.cc), and the strategy that communicates over it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace shardsim {

// In the table's order (also MeshAxisNames()'s and the plan JSON's).
enum class MeshAxis { kData, kFsdp, kTensor, kContext, kPipeline, kExpert };

// What an axis does with the parameters (strategies/data_parallel.h). The replicated ones keep a
// full copy on every rank along the axis (before ZeRO shards it): gradients are reduced over them.
enum class ParamRole {
  kSplit,            // each rank holds its own part of the model (its layers, its columns)
  kSharded,          // each rank holds a shard of every parameter, gathered per layer (FSDP)
  kReplicated,       // every parameter replicated
  kReplicatedDense,  // dense parameters replicated; the routed experts split over the axis
};

// The degrees the planner's search tries along an axis (planner/search.cc).
enum class SearchDegrees {
  kDivisors,   // every divisor of the devices the other axes leave, up to search_max and the
               // model's and cluster's bound (the plan rules then reject what does not divide)
  kRemainder,  // whatever devices the other axes leave
};

struct MeshAxisFacts {
  MeshAxis axis;
  std::string_view name;  // the word in plans, --mesh and the JSON keys mesh.<name>, overlap.<name>
  std::string_view letter;  // the compact mesh notation's letter: "d8 t2 c2 p2"
  std::string_view role;  // what it does, in a line
  // Each rank along the axis reads its own sequences: the batch splits over these axes.
  bool batch_replica;
  ParamRole params;
  // The communication stream its collectives run on (strategies::Stream's name).
  std::string_view stream;
  // OverlapSpec's default for the axis, and what overlap.<name> hides under compute.
  bool default_overlap;
  std::string_view overlaps;
  // Position in DefaultMeshOrder(), 0 outermost (slowest links).
  int default_order;
  SearchDegrees search_degrees;
  int64_t search_max;              // largest degree the search tries; 0: only the limits below
  std::string_view search_limits;  // what else bounds the degrees (model, cluster, sequence)
  // Whether the search tries the axis at other positions of the mesh order than the default.
  bool search_reorders;
};

inline constexpr size_t kMeshAxisCount = 6;

inline constexpr std::array<MeshAxisFacts, kMeshAxisCount> kMeshAxes = {{
    {MeshAxis::kData, "data", "d",
     "data parallelism: whole replicas of the model, gradients reduced once per step", true,
     ParamRole::kReplicated, "data", true,
     "bucketed gradient all-reduce / reduce-scatter under backward", 1, SearchDegrees::kRemainder,
     0,
     "the devices left by the other axes; with fsdp and expert it must divide the sequences per "
     "step",
     true},
    {MeshAxis::kFsdp, "fsdp", "f",
     "fully sharded data parallelism (ZeRO-3): parameters sharded and gathered per layer", true,
     ParamRole::kSharded, "data", true, "prefetch parameter all-gathers", 2,
     SearchDegrees::kDivisors, 0, "divides what tensor, pipeline, context and expert leave",
     true},
    {MeshAxis::kTensor, "tensor", "t",
     "tensor parallelism (Megatron), with sequence parallelism inside it", false, ParamRole::kSplit,
     "tensor", false, "async tensor parallelism (decomposed collectives)", 5,
     SearchDegrees::kDivisors, 0,
     "the fastest domain (an NVSwitch node, or 16 chips of a torus); divides the query and K/V "
     "heads",
     true},
    {MeshAxis::kContext, "context", "c",
     "context parallelism: ring attention over chunks of each sequence", false,
     ParamRole::kReplicated, "context", true,
     "ring attention's K/V transfers under blockwise attention", 4, SearchDegrees::kDivisors, 32,
     "2 x context divides seq_len, and at least 1024 tokens per rank", true},
    {MeshAxis::kPipeline, "pipeline", "p", "pipeline parallelism: consecutive layers on each stage",
     false, ParamRole::kSplit, "pipeline", true, "point-to-point sends under compute", 0,
     SearchDegrees::kDivisors, 128, "at most the decoder layers (stages may differ by a layer)", false},
    {MeshAxis::kExpert, "expert", "e",
     "expert parallelism: the routed experts of MoE layers split; data parallel for the rest", true,
     ParamRole::kReplicatedDense, "expert", false, "all-to-all under shared-expert compute", 3,
     SearchDegrees::kDivisors, 0, "divides the routed experts (1 for dense models)", true},
}};

constexpr const MeshAxisFacts& AxisFacts(MeshAxis axis) {
  return kMeshAxes[static_cast<size_t>(axis)];
}
// The row named `name`, or nullptr.
const MeshAxisFacts* FindMeshAxis(std::string_view name);
// REQUIRES: `name` is an axis (SHARDSIM_CHECK).
const MeshAxisFacts& AxisFacts(std::string_view name);

// Whether parameters of dense layers (or routed experts) keep a copy on every rank along the axis.
bool ReplicatesParams(const MeshAxisFacts& axis, bool routed_experts);

// The degrees the search tries along `axis`, ascending: for kDivisors every divisor of `left`
// (the devices the other axes leave) up to the axis's search_max and `bound` (what the model or
// cluster allows: the decoder layers, the fastest domain, ...; 0: no bound); for kRemainder
// `left` itself.
std::vector<int64_t> SearchedDegrees(MeshAxis axis, int64_t left, int64_t bound = 0);

}  // namespace shardsim
