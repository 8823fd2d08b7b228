// The planner's search: every sharding of a model on a cluster (mesh factorisation, ZeRO stage,
// micro-batch size, pipeline schedule and virtual stages, recomputation), pruned by divisibility
// and a memory bound before the full estimate, ranked by predicted tokens/s among plans that fit.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/cluster_spec.h"
#include "core/model_spec.h"
#include "core/plan_spec.h"
#include "planner/constraints.h"
#include "planner/rule_refusals.h"
#include "planner/frameworks.h"
#include "sim/estimate.h"

namespace shardsim::planner {

// The memory a plan may use by default: HBM less a tenth for the caching allocator's
// fragmentation and the communication libraries' buffers, which the memory model leaves out
// (docs/cli.md, `plan --max-memory`).
inline constexpr double kDefaultMemoryFraction = 0.9;

struct SearchOptions {
  int64_t global_batch_tokens = 0;  // tokens per step
  int64_t seq_len = 0;
  size_t top = 5;                   // plans to keep, best first
  int threads = 0;                  // 0: all hardware threads
  bool flash_attention = true;      // the attention kernel plans assume (false: unfused, 2021-22)
  PlanConstraints constraints;      // fields fixed by --plan / --set: only plans that keep them
  std::optional<Framework> framework;  // only plans this framework runs (FrameworkGaps empty)
  double max_memory_bytes = 0;      // a plan fits when its peak is at most this; 0: the
                                    // default fraction of HBM
  // Called now and then with (meshes done, meshes in all) from the searching threads' owner.
  std::function<void(int64_t, int64_t)> progress;
};

struct RankedPlan {
  PlanSpec plan;
  sim::StepReport report;
  std::string family;  // the axes used, "data x tensor x pipeline"
  std::string why_lost;  // for the other families' best: why it lost to the best plan (WhyLost)
  // For the other families' best: families whose best plan predicts exactly the same step.
  std::vector<std::string> same_as;
};

struct Miss {
  PlanSpec plan;
  std::string reason;  // why it was rejected (memory over the limit, ...)
  double needed_bytes = 0;  // memory per device it needs (or a lower bound, when pruned unestimated)
  double overshoot = 0;  // how far from fitting: needed_bytes / the memory limit (> 1)
  bool estimated = true;  // false: pruned by the state bound (micro-batch, schedule and recompute not chosen)
  // A miss on host memory (offloaded activations, PlanSpec::offload_layers): the host memory per
  // device it exceeds; needed_bytes is then the host bytes it needs. 0: a miss on device memory.
  double host_limit_bytes = 0;
};

struct SearchResult {
  std::vector<RankedPlan> best;         // up to `top`, best first
  std::vector<RankedPlan> family_best;  // the best plan of up to 8 other families, best first
  std::vector<Miss> nearest_misses;     // when nothing (or little) fits: closest to fitting first
  // Plans no other plan beats on both tokens/s and memory per device, least memory first.
  std::vector<RankedPlan> pareto;
  int64_t meshes = 0;                   // mesh factorisations considered (in the default mesh_order)
  int64_t layouts = 0;                  // other mesh_orders tried for the leading meshes
  int64_t balanced = 0;                 // leading pipelined meshes tried again with balanced stages (BalancedLayout)
  int64_t candidates = 0;               // plans enumerated
  int64_t pruned = 0;                   // rejected before estimating (divisibility; a memory bound prunes a
                                        // mesh and ZeRO stage at once, counted as one)
  int64_t dominated = 0;                // dropped unestimated: a lighter rung (recomputation, re-gathering) fits
  int64_t evaluated = 0;                // plans whose program was built and its memory judged
  int64_t over_limit = 0;               // of those, over the memory limit (near misses: time not estimated)
  int64_t unsupported = 0;              // dropped unestimated: the framework cannot run them
  std::vector<std::pair<std::string, int64_t>> framework_gaps;  // the commonest reasons, with counts
  std::vector<RuleRefusal> rule_refusals;  // the plan rules' refusals by field, commonest first
  double max_memory_bytes = 0;          // the memory limit a plan had to fit
  // The least micro-batch (sequences) the search's cap of kMaxSearchedMicrobatches a replica made
  // the smallest tried, over the meshes it bound (0: it bound none, or the plan fixes micro_batch_size).
  int64_t capped_microbatch = 0;
  double wall_s = 0;
};

// The most micro-batches a replica runs in a step in the plans the search builds (the schedule's
// event simulation grows with them): micro-batches grow past 8 sequences to stay under it.
inline constexpr int64_t kMaxSearchedMicrobatches = 4096;

// Searches the plans of `model` on `cluster` that keep the constraints (and that the framework
// runs): every mesh in the default mesh_order, then other layouts (OtherOrders) of the meshes of
// the leading plans and of each family's best, then the leading pipelined plans' meshes with
// their stages balanced (BalancedLayout) where the layout is free. Throws InputError when the batch does not split
// into sequences of seq_len, seq_len is out of range for the model, or no mesh keeps the
// constraints. An empty `best` means nothing fits: see nearest_misses.
SearchResult Search(const ModelSpec& model, const ClusterSpec& cluster, const SearchOptions& options);

// Where no plan was judged on memory because the plan rules refused every one the memory bound let
// through, the refusals of the commonest field the constraints fix (the input to change); else
// none.
const RuleRefusal* FixedFieldRefusal(const SearchResult& result, const PlanConstraints& constraints);

// "data x tensor x pipeline" (the axes of size > 1), or "single device", with the plan's expert
// fold where it sets one (ExpertAxesNote).
std::string Family(const PlanSpec& plan);

}  // namespace shardsim::planner
