// A pipeline layout whose positions take equal time: the search's last rung for its leading
// pipelined plans (search.cc). The default split (strategies::DefaultPartLayers) gives every
// position as many decoder layers as it can, the ends one fewer where the layers do not divide;
// but the first position also runs the embedding and the last the final norm, the output head,
// the loss and any multi-token-prediction modules, and a model's layers need not cost the same
// (dense and MoE layers, local and global attention, a hybrid model's Mamba-2, attention and
// expert blocks). Megatron-core users
// balance with `--pipeline-model-parallel-layout` (or `--account-for-embedding-in-pipeline-split`
// and `--account-for-loss-in-pipeline-split`, which count each as one layer); torchtitan's with
// `module_fqns_per_model_part`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/cluster_spec.h"
#include "core/model_spec.h"
#include "core/plan_spec.h"
#include "sim/op_cost.h"
#include "strategies/step_program.h"

namespace shardsim::planner {

// The layout (Megatron-core's syntax, strategies/stage_layout.h) whose positions along the
// micro-batches' path hold consecutive decoder layers (at least one each: the head and its
// modules never get a stage of their own) so that the costliest position's work per micro-batch (forward and backward, as the estimate costs each layer kind,
// the embedding, the head and its modules on this cluster) is least; "" where the plan sets a
// layout, its schedule runs two directions (DualPipe), or the balanced layout is the default one.
// Also "" for a model of more than kMaxBalancedLayers decoder layers: the partition costs
// positions x layers^2 (2,500 layers took 4.7 s a call).
std::string BalancedLayout(const ModelSpec& model, const PlanSpec& plan, const ClusterSpec& cluster, sim::AxisCollectives& collectives);
inline constexpr int64_t kMaxBalancedLayers = 512;
// The same from the plan's program on the default split, already built (the search estimates it too).
std::string BalancedLayout(const ModelSpec& model, const strategies::StepProgram& default_split, const ClusterSpec& cluster,
                           sim::AxisCollectives& collectives);

// The partition behind it: `costs[l]` decoder layer l's, `first` and `last` the ends' own work;
// the layers per position (each at least one) that make the costliest position's total as small
// as it can be, and of those the evenest (least sum of squared totals), the later positions taking the extra layers on
// ties (under 1F1B they hold fewer micro-batches). REQUIRES: 1 <= positions <= costs.size().
std::vector<int64_t> BalancedPartLayers(const std::vector<double>& costs, int64_t positions, double first, double last);

}  // namespace shardsim::planner
