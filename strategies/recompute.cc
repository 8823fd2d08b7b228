#include "strategies/recompute.h"

#include <algorithm>
#include <cmath>

#include "strategies/op_names.h"
#include "strategies/saved_tensors.h"

namespace shardsim::strategies {

void ApplyRecompute(LayerProgram& layer, const ModelSpec& model, const PlanSpec& plan) {
  if (plan.recompute == Recompute::kNone) return;
  std::vector<Op> redo;
  for (const Op& op : layer.ops) {
    const Rerun rerun = RerunOf(plan.recompute, op, model, plan);
    if (rerun.share <= 0) continue;
    Op again = op;
    again.name = ops::Recomputed(op.name);
    again.phase = Phase::kRecompute;
    again.flops *= rerun.share;
    again.bytes *= rerun.share;
    again.comm_bytes *= rerun.share;
    // A slice of a fused matmul's columns is a narrower matmul (its efficiency by its own shape).
    if (rerun.narrower && again.n > 0) again.n = std::max<int64_t>(1, std::llround(static_cast<double>(again.n) * rerun.share));
    redo.push_back(again);
  }
  layer.ops.insert(layer.ops.end(), redo.begin(), redo.end());
}

}  // namespace shardsim::strategies
