#include "strategies/pipeline_schedule.h"

#include <gtest/gtest.h>

namespace shardsim::strategies {
namespace {

int Count(const std::vector<Task>& tasks, Phase phase) {
  int n = 0;
  for (const Task& t : tasks) n += t.phase == phase ? 1 : 0;
  return n;
}

TEST(PipelineScheduleTest, OneFOneBWarmsUpByDepth) {
  const auto first = ScheduleStage(PipelineSchedule::kOneFOneB, 4, 8, 1, 0);
  // Stage 0 runs 3 forwards before its first backward; the last stage alternates from the start.
  EXPECT_EQ(first[0].phase, Phase::kForward);
  EXPECT_EQ(first[3].phase, Phase::kForward);
  EXPECT_EQ(first[4].phase, Phase::kBackwardInput);
  const auto last = ScheduleStage(PipelineSchedule::kOneFOneB, 4, 8, 1, 3);
  EXPECT_EQ(last[1].phase, Phase::kBackwardInput);
  EXPECT_EQ(Count(first, Phase::kForward), 8);
  EXPECT_EQ(Count(first, Phase::kBackwardWeight), 8);
}

TEST(PipelineScheduleTest, InterleavedVisitsEveryChunk) {
  const auto tasks = ScheduleStage(PipelineSchedule::kInterleavedOneFOneB, 4, 8, 2, 1);
  EXPECT_EQ(Count(tasks, Phase::kForward), 16);
  int chunk1 = 0;
  for (const Task& t : tasks) chunk1 += t.chunk == 1 && t.phase == Phase::kForward ? 1 : 0;
  EXPECT_EQ(chunk1, 8);
}

TEST(PipelineScheduleTest, ZeroBubbleDefersWeightGradients) {
  const auto tasks = ScheduleStage(PipelineSchedule::kZbH1, 4, 8, 1, 3);  // the last stage defers the most
  // Somewhere a B is followed by another micro-batch's work before its W.
  bool deferred = false;
  for (size_t i = 0; i + 1 < tasks.size(); ++i) {
    if (tasks[i].phase == Phase::kBackwardInput && !(tasks[i + 1].phase == Phase::kBackwardWeight && tasks[i + 1].microbatch == tasks[i].microbatch)) {
      deferred = true;
    }
  }
  EXPECT_TRUE(deferred);
  EXPECT_EQ(Count(tasks, Phase::kBackwardWeight), 8);
}

}  // namespace
}  // namespace shardsim::strategies
