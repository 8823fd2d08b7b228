// The pipeline schedules (strategies/schedules/): task orders and their validity.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/model_presets.h"
#include "strategies/build_step.h"
#include "strategies/schedule.h"

namespace shardsim::strategies {
namespace {

int Count(const std::vector<Task>& tasks, Phase phase) {
  int n = 0;
  for (const Task& t : tasks) n += t.phase == phase ? 1 : 0;
  return n;
}

std::vector<Task> Tasks(const std::string& name, int64_t p, int64_t m, int64_t v, int64_t s) { return FindSchedule(name)->Tasks(p, m, v, s); }

TEST(PipelineScheduleTest, OneFOneBWarmsUpByDepth) {
  const auto first = Tasks("1f1b", 4, 8, 1, 0);
  // Stage 0 runs 3 forwards before its first backward; the last stage alternates from the start.
  EXPECT_EQ(first[0].phase, Phase::kForward);
  EXPECT_EQ(first[3].phase, Phase::kForward);
  EXPECT_EQ(first[4].phase, Phase::kBackwardInput);
  const auto last = Tasks("1f1b", 4, 8, 1, 3);
  EXPECT_EQ(last[1].phase, Phase::kBackwardInput);
  EXPECT_EQ(Count(first, Phase::kForward), 8);
  EXPECT_EQ(Count(first, Phase::kBackwardWeight), 8);
}

TEST(PipelineScheduleTest, InterleavedVisitsEveryChunk) {
  const auto tasks = Tasks("interleaved-1f1b", 4, 8, 2, 1);
  EXPECT_EQ(Count(tasks, Phase::kForward), 16);
  int chunk1 = 0;
  for (const Task& t : tasks) chunk1 += t.chunk == 1 && t.phase == Phase::kForward ? 1 : 0;
  EXPECT_EQ(chunk1, 8);
}

// Megatron-LM's interleaved order in closed form: the k-th forward of a stage is micro-batch
// (k / (p v)) p + k % p of chunk (k / p) % v; backwards walk the chunks in reverse, after
// (p - s - 1) 2 + (v - 1) p warm-up forwards.
TEST(PipelineScheduleTest, InterleavedFollowsMegatronsFormula) {
  for (int64_t p : {2, 3, 4, 7, 14}) {
    for (int64_t v : {2, 3, 4}) {
      for (int64_t m : {p, 2 * p, 5 * p, 9 * p}) {
        for (int64_t s = 0; s < p; ++s) {
          const int64_t total = m * v, warmup = std::min((p - s - 1) * 2 + (v - 1) * p, total);
          auto forward = [&](int64_t k) { return Task{static_cast<int32_t>((k / (p * v)) * p + k % p), static_cast<int16_t>((k / p) % v), Phase::kForward}; };
          auto backward = [&](int64_t k, Phase phase) {
            return Task{static_cast<int32_t>((k / (p * v)) * p + k % p), static_cast<int16_t>(v - 1 - (k / p) % v), phase};
          };
          std::vector<Task> expected;
          for (int64_t k = 0; k < warmup; ++k) expected.push_back(forward(k));
          for (int64_t i = 0; i < total; ++i) {
            if (warmup + i < total) expected.push_back(forward(warmup + i));
            expected.push_back(backward(i, Phase::kBackwardInput));
            expected.push_back(backward(i, Phase::kBackwardWeight));
          }
          const std::vector<Task> tasks = Tasks("interleaved-1f1b", p, m, v, s);
          const std::string where = "p=" + std::to_string(p) + " v=" + std::to_string(v) + " m=" + std::to_string(m) + " s=" + std::to_string(s);
          ASSERT_EQ(tasks.size(), expected.size()) << where;
          for (size_t i = 0; i < tasks.size(); ++i) {
            ASSERT_TRUE(tasks[i].microbatch == expected[i].microbatch && tasks[i].chunk == expected[i].chunk && tasks[i].phase == expected[i].phase)
                << where << " task " << i;
          }
        }
      }
    }
  }
}

TEST(PipelineScheduleTest, ZeroBubbleDefersWeightGradients) {
  for (const char* name : {"zb-h1", "zbv"}) {
    const auto tasks = Tasks(name, 4, 8, 2, 3);  // the last stage defers the most
    // Somewhere a B is followed by another micro-batch's work before its W.
    bool deferred = false;
    for (size_t i = 0; i + 1 < tasks.size(); ++i) {
      if (tasks[i].phase == Phase::kBackwardInput && !(tasks[i + 1].phase == Phase::kBackwardWeight && tasks[i + 1].microbatch == tasks[i].microbatch)) {
        deferred = true;
      }
    }
    EXPECT_TRUE(deferred) << name;
    EXPECT_TRUE(FindSchedule(name)->SplitsBackward()) << name;
  }
}

// ZB-V: every task once, F before B before W, on 2 to 8 stages with 2p to 5p micro-batches.
TEST(PipelineScheduleTest, ZeroBubbleVIsValidForEveryShape) {
  const ModelSpec m = FindModelPreset("llama3-8b")->spec;
  for (int64_t p : {2, 4, 8}) {
    for (int64_t mult : {2, 3, 5}) {
      PlanSpec plan;
      plan.mesh.pipeline = p;
      plan.seq_len = 2048;
      plan.global_batch_size = p * mult;
      plan.pipeline_schedule = "zbv";
      const StepProgram program = BuildStep(m, plan);
      EXPECT_EQ(program.layout.chunks, 2);
      EXPECT_EQ(ValidateSchedule(program), "") << "p=" << p << " m=" << p * mult;
      EXPECT_EQ(Count(StageTasks(program, 0), Phase::kForward), 2 * p * mult);
    }
  }
}

// TaskLists::InFlightPeaks keeps only the ends of runs of forwards, each once: its peaks must be
// the frontier of every point of the walk (the counts after each task that no other point exceeds
// on every chunk), for every schedule, stage and releasing phase.
TEST(PipelineScheduleTest, InFlightPeaksAreTheFrontierOfTheWholeWalk) {
  auto dominates = [](const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
    for (size_t c = 0; c < a.size(); ++c) {
      if (a[c] < b[c]) return false;
    }
    return true;
  };
  TaskLists lists;
  for (const Schedule* schedule : AllSchedules()) {
    for (int64_t p : {2, 4}) {
      for (int64_t v : {1, 2}) {
        for (int64_t m : {2 * p, 4 * p}) {
          const int64_t chunks = schedule->Chunks(p, v);
          for (Phase release : {Phase::kBackwardInput, Phase::kBackwardWeight}) {
            for (int64_t stage = 0; stage < p; ++stage) {
              std::vector<std::vector<int64_t>> points;
              std::vector<int64_t> live(static_cast<size_t>(chunks), 0);
              for (const Task& task : schedule->Tasks(p, m, chunks, stage)) {
                if (task.phase == Phase::kForward) ++live[static_cast<size_t>(task.chunk)];
                if (task.phase == release) --live[static_cast<size_t>(task.chunk)];
                points.push_back(live);
              }
              std::vector<std::vector<int64_t>> frontier;
              for (const auto& a : points) {
                const bool beaten = std::any_of(points.begin(), points.end(), [&](const auto& b) { return b != a && dominates(b, a); });
                if (!beaten && std::find(frontier.begin(), frontier.end(), a) == frontier.end()) frontier.push_back(a);
              }
              std::vector<std::vector<int64_t>> peaks = lists.InFlightPeaks(*schedule, p, m, chunks, stage, release);
              std::sort(frontier.begin(), frontier.end());
              std::sort(peaks.begin(), peaks.end());
              EXPECT_EQ(peaks, frontier) << schedule->name() << " p=" << p << " v=" << v << " m=" << m << " stage " << stage;
            }
          }
        }
      }
    }
  }
}

TEST(PipelineScheduleTest, EveryScheduleIsListedOnceByName) {
  const std::vector<std::string> names = ScheduleNames();
  EXPECT_EQ(names, (std::vector<std::string>{"gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zbv", "dualpipe"}));
  for (const std::string& name : names) EXPECT_EQ(FindSchedule(name)->name(), name);
  EXPECT_EQ(FindSchedule("zb-v"), nullptr);
  EXPECT_NE(UnknownSchedule("zb-v").what.find("did you mean"), std::string::npos);
}

}  // namespace
}  // namespace shardsim::strategies
