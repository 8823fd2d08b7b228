// ZB-H1 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism"): 1F1B's order of F and B, with B's
// input gradient sent on at once and W deferred: stage s holds back up to s weight-gradient
// tasks (its 1F1B peak is p - s micro-batches in flight, so no stage exceeds the first stage's p)
// and runs them in the cooldown while it waits. Bubble about a third of 1F1B's.
#include <algorithm>
#include <deque>

#include "strategies/schedules/task_list.h"

namespace shardsim::strategies::schedules {

class ZbH1 final : public OneChunkSchedule {
 public:
  std::string_view name() const override { return "zb-h1"; }
  std::string_view summary() const override {
    return "1F1B with weight gradients deferred into the bubble (ZB-H1, Qi et al. 2023)";
  }
  bool SplitsBackward() const override { return true; }
  std::vector<Task> Tasks(int64_t p, int64_t m, int64_t, int64_t s) const override {
    if (p == 1) return OneFOneBTasks(1, m, 0);
    std::vector<Task> tasks;
    tasks.reserve(static_cast<size_t>(3 * m));
    const int64_t warmup = std::min(p - s - 1, m);
    const int64_t held = s;
    std::deque<int64_t> pending;
    auto weight = [&] {
      tasks.push_back(MakeTask(pending.front(), 0, Phase::kBackwardWeight));
      pending.pop_front();
    };
    // Runs B of `mb`; returns whether a held W had to follow it.
    auto backward = [&](int64_t mb) {
      tasks.push_back(MakeTask(mb, 0, Phase::kBackwardInput));
      pending.push_back(mb);
      const bool released = static_cast<int64_t>(pending.size()) > held;
      while (static_cast<int64_t>(pending.size()) > held) weight();
      return released;
    };
    for (int64_t mb = 0; mb < warmup; ++mb) AddForward(tasks, mb);
    for (int64_t i = 0; i < m - warmup; ++i) {
      AddForward(tasks, warmup + i);
      backward(i);
    }
    for (int64_t mb = m - warmup; mb < m; ++mb) {
      // In the cooldown each B waits on the next stage's B, which runs one W later: one deferred
      // W fills that wait (a second one would delay the next B and every stage before).
      if (!backward(mb) && !pending.empty() && mb + 1 < m) weight();
    }
    while (!pending.empty()) weight();
    return tasks;
  }
  // No framework runs ZB-H1 on one stage per rank: PyTorch's ScheduleInterleavedZeroBubble is a
  // PipelineScheduleMulti (torchtitan rejects fewer than 2 stages per rank for it,
  // torchtitan/distributed/pipeline_parallel.py), and Megatron-core has no zero-bubble schedule.
  FrameworkScheduleNames framework_names() const override { return {}; }
};

const Schedule& ZbH1Schedule() {
  static const ZbH1 kSchedule;
  return kSchedule;
}

}  // namespace shardsim::strategies::schedules
