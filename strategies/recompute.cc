#include "strategies/recompute.h"

#include "strategies/op_names.h"

namespace shardsim::strategies {

void ApplyRecompute(LayerProgram& layer, Recompute mode) {
  if (mode == Recompute::kNone) return;
  std::vector<Op> redo;
  for (const Op& op : layer.ops) {
    if (op.phase != Phase::kForward) continue;
    // Data-parallel parameter gathers are not redone: the gathered weights serve the backward.
    if (op.stream == Stream::kData) continue;
    // Selective recomputation redoes the attention core (Korthikanti et al. 2022), with ring
    // attention's K/V passes when the sequence is split over context.
    const bool attention_core =
        (op.stream == Stream::kCompute && (op.kind == ComputeKind::kAttention || op.name == ops::kAttentionScores)) || op.stream == Stream::kContext;
    if (mode == Recompute::kSelective && !attention_core) continue;
    Op again = op;
    again.name = ops::Recomputed(op.name);
    again.phase = Phase::kRecompute;
    redo.push_back(again);
  }
  layer.ops.insert(layer.ops.end(), redo.begin(), redo.end());
}

}  // namespace shardsim::strategies
