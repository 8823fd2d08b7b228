// 1F1B (PipeDream-Flush, Narayanan et al. 2019): after p - s - 1 warm-up forwards each stage
// alternates one forward with one backward, so at most p - s micro-batches are in flight.
// Bubble (p - 1) / (m + p - 1) of the step.
#include <algorithm>

#include "strategies/schedules/task_list.h"

namespace shardsim::strategies::schedules {

std::vector<Task> OneFOneBTasks(int64_t p, int64_t m, int64_t s) {
  std::vector<Task> tasks;
  tasks.reserve(static_cast<size_t>(3 * m));
  const int64_t warmup = std::min(p - s - 1, m);
  for (int64_t mb = 0; mb < warmup; ++mb) AddForward(tasks, mb);
  for (int64_t i = 0; i < m - warmup; ++i) {
    AddForward(tasks, warmup + i);
    AddBackward(tasks, i);
  }
  for (int64_t mb = m - warmup; mb < m; ++mb) AddBackward(tasks, mb);
  return tasks;
}

std::optional<Infeasibility> OneChunkPerStage(const Schedule& schedule, const PlanSpec& plan) {
  if (plan.virtual_stages == 1) return std::nullopt;
  return Infeasibility{
      "virtual_stages",
      std::string(schedule.name()) + " runs one model chunk per stage, got virtual_stages=" +
          std::to_string(plan.virtual_stages),
      "1", "use pipeline_schedule interleaved-1f1b or zbv for several chunks per stage"};
}

class OneFOneB final : public OneChunkSchedule {
 public:
  std::string_view name() const override { return "1f1b"; }
  std::string_view summary() const override {
    return "one forward, one backward (PipeDream-Flush, Narayanan et al. 2019)";
  }
  bool SplitsBackward() const override { return false; }
  std::vector<Task> Tasks(int64_t p, int64_t m, int64_t, int64_t s) const override {
    return OneFOneBTasks(p, m, s);
  }
  FrameworkScheduleNames framework_names() const override {
    return {.megatron_core = "forward_backward_pipelining_without_interleaving", .torchtitan = "1F1B", .maxtext = "",
            .deepspeed = "TrainSchedule"};
  }
};

const Schedule& OneFOneBSchedule() {
  static const OneFOneB kSchedule;
  return kSchedule;
}

}  // namespace shardsim::strategies::schedules
