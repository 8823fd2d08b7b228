// Helpers the schedule files share to write task lists and their common checks.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "strategies/schedule.h"

namespace shardsim::strategies::schedules {

inline Task MakeTask(int64_t microbatch, int64_t chunk, Phase phase) {
  return Task{static_cast<int32_t>(microbatch), static_cast<int16_t>(chunk), phase};
}
inline void AddForward(std::vector<Task>& tasks, int64_t mb, int64_t chunk = 0) {
  tasks.push_back(MakeTask(mb, chunk, Phase::kForward));
}
// B then its W at once (schedules that do not split the backward).
inline void AddBackward(std::vector<Task>& tasks, int64_t mb, int64_t chunk = 0) {
  tasks.push_back(MakeTask(mb, chunk, Phase::kBackwardInput));
  tasks.push_back(MakeTask(mb, chunk, Phase::kBackwardWeight));
}

// 1F1B (PipeDream-Flush): p - s - 1 warm-up forwards, then one forward and one backward at a
// time, then the remaining backwards. Also what every schedule runs on a single stage.
std::vector<Task> OneFOneBTasks(int64_t stages, int64_t microbatches, int64_t stage);

// The check of a schedule that holds one chunk per stage: virtual_stages must be 1.
std::optional<Infeasibility> OneChunkPerStage(const Schedule& schedule, const PlanSpec& plan);

// A schedule with one model chunk per stage (virtual_stages must be 1).
class OneChunkSchedule : public Schedule {
 public:
  int64_t Chunks(int64_t, int64_t) const override { return 1; }
  std::optional<Infeasibility> Check(const PlanSpec& plan, int64_t, int64_t) const override {
    return OneChunkPerStage(*this, plan);
  }
};

}  // namespace shardsim::strategies::schedules
