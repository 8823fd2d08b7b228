// DualPipe (DeepSeek-V3 technical report, section 3.2.1, and its public reference schedule):
// micro-batches enter from both ends; stage s holds model part s for those flowing down (chunk 0,
// the first half of the micro-batches) and a second copy of part p - 1 - s for those flowing up
// (chunk 1). Ranks in the second half mirror the first half with the directions swapped. The
// eight phases: forwards to fill, paired forwards, zero-bubble B/W/F, the steady F-B pairs, then
// draining backwards with deferred weight gradients. (The reference overlaps each F-B pair's
// compute with the other's communication; here they run back to back.)
#include <algorithm>
#include <deque>

#include "strategies/schedules/task_list.h"

namespace shardsim::strategies::schedules {

class DualPipe final : public Schedule {
 public:
  std::string_view name() const override { return "dualpipe"; }
  std::string_view summary() const override {
    return "bidirectional, two model copies per stage (DeepSeek-V3, 2024)";
  }
  int64_t Chunks(int64_t stages, int64_t) const override { return stages > 1 ? 2 : 1; }
  int64_t Directions(int64_t stages) const override { return stages > 1 ? 2 : 1; }
  int64_t DirectionOf(int64_t stages, int64_t mb, int64_t m) const override {
    return stages > 1 && mb >= m / 2 ? 1 : 0;
  }
  std::vector<int64_t> DirectionCounts(int64_t stages, int64_t count, int64_t m) const override {
    if (stages <= 1) return {count};
    const int64_t first = std::min(count, m / 2);
    return {first, count - first};
  }
  ChunkPlace Place(int64_t stages, int64_t, int64_t stage, int64_t chunk) const override {
    return chunk == 0 ? ChunkPlace{0, stage} : ChunkPlace{1, stages - 1 - stage};
  }
  bool SplitsBackward() const override { return true; }
  std::optional<Infeasibility> Check(const PlanSpec& plan, int64_t, int64_t m) const override {
    const int64_t p = plan.mesh.pipeline;
    if (plan.virtual_stages != 1) {
      return Infeasibility{"virtual_stages",
                           "dualpipe holds two model copies per stage by construction, got virtual_stages=" +
                               std::to_string(plan.virtual_stages),
                           "1", "leave virtual_stages out"};
    }
    if (p > 1 && p % 2 != 0) {
      return Infeasibility{"mesh/pipeline", "dualpipe needs an even pipeline, got " + std::to_string(p),
                           "an even number of stages", "DualPipe pairs stage s with stage p - 1 - s"};
    }
    if (p > 1 && (m % 2 != 0 || m < 2 * p)) {
      return Infeasibility{"global_batch_size",
                           "dualpipe needs an even number of micro-batches per schedule, at least 2 x pipeline = " +
                               std::to_string(2 * p) + ", got " + std::to_string(m),
                           "an even count >= " + std::to_string(2 * p),
                           "DualPipe feeds half the micro-batches from each end of the pipeline"};
    }
    return std::nullopt;
  }
  std::vector<Task> Tasks(int64_t p, int64_t m, int64_t, int64_t rank) const override {
    if (p == 1) return OneFOneBTasks(1, m, 0);
    const int64_t half = m / 2, half_ranks = p / 2;
    const int64_t hr = std::min(rank, p - 1 - rank);
    const bool mirrored = rank >= half_ranks;
    std::vector<Task> tasks;
    tasks.reserve(static_cast<size_t>(3 * m));
    int64_t next_forward[2] = {0, 0}, next_backward[2] = {0, 0};
    std::deque<std::pair<int64_t, int64_t>> weights;  // deferred (micro-batch, chunk)
    auto chunk_of = [&](int local) { return static_cast<int64_t>(mirrored ? 1 - local : local); };
    auto mb_of = [&](int64_t chunk, int64_t i) { return chunk == 0 ? i : half + i; };
    auto forward = [&](int local) {
      const int64_t c = chunk_of(local);
      tasks.push_back(MakeTask(mb_of(c, next_forward[c]++), c, Phase::kForward));
    };
    auto backward = [&](int local, bool zero_bubble) {
      const int64_t c = chunk_of(local), mb = mb_of(c, next_backward[c]++);
      tasks.push_back(MakeTask(mb, c, Phase::kBackwardInput));
      if (zero_bubble) {
        weights.push_back({mb, c});
      } else {
        tasks.push_back(MakeTask(mb, c, Phase::kBackwardWeight));
      }
    };
    auto weight = [&] {
      if (weights.empty()) return;
      tasks.push_back(
          MakeTask(weights.front().first, weights.front().second, Phase::kBackwardWeight));
      weights.pop_front();
    };
    for (int64_t i = 0; i < (half_ranks - hr - 1) * 2; ++i) forward(0);
    for (int64_t i = 0; i < hr + 1; ++i) {
      forward(0);
      forward(1);
    }
    for (int64_t i = 0; i < half_ranks - hr - 1; ++i) {
      backward(1, true);
      weight();
      forward(1);
    }
    for (int64_t i = 0; i < half - p + hr + 1; ++i) {
      forward(0);
      backward(1, false);
      forward(1);
      backward(0, false);
    }
    for (int64_t i = 0; i < half_ranks - hr - 1; ++i) {
      backward(1, false);
      forward(1);
      backward(0, false);
    }
    bool zero_bubble = false;
    for (int64_t i = 0; i < hr + 1; ++i) {
      if (i == (hr + 1) / 2 && hr % 2 == 1) zero_bubble = true;
      backward(1, zero_bubble);
      if (i == (hr + 1) / 2 && hr % 2 == 0) zero_bubble = true;
      backward(0, zero_bubble);
    }
    for (int64_t i = 0; i < half_ranks - hr - 1; ++i) {
      weight();
      backward(0, true);
    }
    while (!weights.empty()) weight();
    return tasks;
  }
  // DeepSeek's own DualPipe runs outside these frameworks; torchtitan's DualPipeV is DualPipe's
  // V-shaped variant (one model copy, two chunks per rank), another schedule.
  FrameworkScheduleNames framework_names() const override { return {}; }
};

const Schedule& DualPipeSchedule() {
  static const DualPipe kSchedule;
  return kSchedule;
}

}  // namespace shardsim::strategies::schedules
