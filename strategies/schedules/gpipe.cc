// GPipe (Huang et al. 2019): every micro-batch's forward, then every backward; all m micro-batches
// are in flight at the peak. Bubble (p - 1) / (m + p - 1), as 1F1B, at m micro-batches of memory.
#include "strategies/schedules/task_list.h"

namespace shardsim::strategies::schedules {

class Gpipe final : public OneChunkSchedule {
 public:
  std::string_view name() const override { return "gpipe"; }
  std::string_view summary() const override {
    return "all forwards, then all backwards (Huang et al. 2019)";
  }
  bool SplitsBackward() const override { return false; }
  bool HoldsWholeRound() const override { return true; }
  std::vector<Task> Tasks(int64_t p, int64_t m, int64_t, int64_t) const override {
    if (p == 1) return OneFOneBTasks(1, m, 0);
    std::vector<Task> tasks;
    tasks.reserve(static_cast<size_t>(3 * m));
    for (int64_t mb = 0; mb < m; ++mb) AddForward(tasks, mb);
    for (int64_t mb = 0; mb < m; ++mb) AddBackward(tasks, mb);
    return tasks;
  }
  // GPipe has 1F1B's bubble at m micro-batches of activations instead of p: never the better
  // plan, so the planner does not try it.
  std::vector<int64_t> SearchedVirtualStages(int64_t) const override { return {}; }
  // MaxText's pipeline (layers/pipeline.py) runs every forward, then autodiff's backwards.
  FrameworkScheduleNames framework_names() const override {
    return {.megatron_core = "", .torchtitan = "GPipe", .maxtext = "circular pipeline, num_pipeline_repeats 1", .deepspeed = ""};
  }
};

const Schedule& GpipeSchedule() {
  static const Gpipe kSchedule;
  return kSchedule;
}

}  // namespace shardsim::strategies::schedules
