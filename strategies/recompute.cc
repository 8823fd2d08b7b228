#include "strategies/recompute.h"

#include "strategies/op_names.h"
#include "strategies/saved_tensors.h"

namespace shardsim::strategies {

void ApplyRecompute(LayerProgram& layer, const ModelSpec& model, const PlanSpec& plan) {
  if (plan.recompute == Recompute::kNone) return;
  std::vector<Op> redo;
  for (const Op& op : layer.ops) {
    const double share = RerunShare(plan.recompute, op, model);
    if (share <= 0) continue;
    Op again = op;
    again.name = ops::Recomputed(op.name);
    again.phase = Phase::kRecompute;
    again.flops *= share;
    again.bytes *= share;
    again.comm_bytes *= share;
    redo.push_back(again);
  }
  layer.ops.insert(layer.ops.end(), redo.begin(), redo.end());
}

}  // namespace shardsim::strategies
