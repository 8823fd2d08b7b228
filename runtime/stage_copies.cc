#include "runtime/stage_copies.h"

#include <algorithm>
#include <map>
#include <string>

#include "core/error.h"
#include "strategies/op_keys.h"
#include "strategies/op_names.h"

namespace shardsim::runtime {

void UncountCopies(const StageModel& model, DataParallel& data_parallel) {
  for (size_t b = 0; b < model.buckets().size(); ++b) {
    if (model.buckets()[b].copy_stage >= 0 && !model.buckets()[b].copy_counted) data_parallel.Uncount(static_cast<int>(b));
  }
}

void SumCopiedGradients(const StageModel& model, const DataParallel& data_parallel, std::vector<float>& grads, MeshComms& comms, Tracer* tracer) {
  // Per neighbour stage, its copied buckets in the order both sides agree on: by copy name.
  std::map<int64_t, std::map<std::string, int>> by_stage;
  for (size_t b = 0; b < model.buckets().size(); ++b) {
    const ParamBucket& bucket = model.buckets()[b];
    if (bucket.copy_stage >= 0) by_stage[bucket.copy_stage][bucket.copy_of] = static_cast<int>(b);
  }
  if (by_stage.empty()) return;
  // The program's sync op of this stage names the key.
  const strategies::Stage& stage = model.program().stages[static_cast<size_t>(model.stage())];
  const strategies::Op* sync = nullptr;
  for (const strategies::Op& op : stage.step_ops) {
    if (op.name == strategies::ops::kDualPipeCopySync || op.name == strategies::ops::kTiedEmbeddingSync) sync = &op;
  }
  SHARDSIM_CHECK(sync != nullptr, "stage " + std::to_string(model.stage()) + " holds parameter copies but the step program has no copy sync op");
  const std::string key = strategies::OpKey(model.stage(), strategies::kStepLayer, sync->name, -1);
  const TraceSpan span(tracer, key, strategies::ToString(sync->stream));
  const std::vector<DataParallel::Range>& ranges = data_parallel.OptimizerRanges();
  for (const auto& [peer, buckets] : by_stage) {
    std::vector<float> mine;
    for (const auto& [name, b] : buckets) {
      const DataParallel::Range& r = ranges[static_cast<size_t>(b)];
      mine.insert(mine.end(), grads.begin() + r.begin, grads.begin() + r.end);
    }
    comms.ExchangeSumWithStage(mine.data(), static_cast<int64_t>(mine.size()), peer, key);
    size_t at = 0;
    for (const auto& [name, b] : buckets) {
      const DataParallel::Range& r = ranges[static_cast<size_t>(b)];
      std::copy(mine.begin() + static_cast<std::ptrdiff_t>(at), mine.begin() + static_cast<std::ptrdiff_t>(at + static_cast<size_t>(r.end - r.begin)),
                grads.begin() + r.begin);
      at += static_cast<size_t>(r.end - r.begin);
    }
  }
}

}  // namespace shardsim::runtime
