// ZB-V (Qi et al. 2024, "Pipeline Parallelism with Controllable Memory"; torchtitan's
// ZBVZeroBubble): two chunks per stage in a V, chunk 0 of stage s at position s going down and
// chunk 1 at position 2p - 1 - s coming back, so the last stage hands its chunk 0's output to its
// own chunk 1 and the first stage holds both the embedding and the loss. Backward is split into B
// and W, and W fills what would be bubbles: with equal F, B and W times the bubble vanishes at
// 1F1B's peak activation memory (p micro-batches of a whole stage's layers).
// Order on stage r: 2(p - r) - 1 forwards of chunk 0; r pairs of (F chunk 1, F chunk 0); p - r
// triples (F, B, W) of chunk 1; then the steady (F0, B0, W0, F1, B1, W1) until every forward is
// done; then r pairs (B0, B1), p - r pairs (B0, W0), and the remaining W of chunk 1, then chunk 0.
#include <algorithm>

#include "strategies/schedules/task_list.h"

namespace shardsim::strategies::schedules {

class ZeroBubbleV final : public Schedule {
 public:
  std::string_view name() const override { return "zbv"; }
  std::string_view summary() const override {
    return "V-shaped zero bubble, two chunks per stage (ZB-V, Qi et al. 2024)";
  }
  int64_t Chunks(int64_t stages, int64_t) const override { return stages > 1 ? 2 : 1; }
  ChunkPlace Place(int64_t stages, int64_t, int64_t stage, int64_t chunk) const override {
    return {0, chunk == 0 ? stage : 2 * stages - 1 - stage};
  }
  bool SplitsBackward() const override { return true; }
  std::optional<Infeasibility> Check(const PlanSpec& plan, int64_t, int64_t m) const override {
    const int64_t p = plan.mesh.pipeline;
    if (plan.virtual_stages != 1 && plan.virtual_stages != 2) {
      return Infeasibility{"virtual_stages",
                           "zbv holds two chunks per stage by construction, got virtual_stages=" +
                               std::to_string(plan.virtual_stages),
                           "1 or 2 (both mean the V's two chunks)", "leave virtual_stages out"};
    }
    if (p > 1 && m < 2 * p) {
      return Infeasibility{"global_batch_size",
                           "zbv needs at least 2 x pipeline = " + std::to_string(2 * p) +
                               " micro-batches per schedule, got " + std::to_string(m),
                           "micro-batches >= " + std::to_string(2 * p),
                           "raise global_batch_size or lower micro_batch_size"};
    }
    return std::nullopt;
  }
  std::vector<Task> Tasks(int64_t p, int64_t m, int64_t, int64_t r) const override {
    if (p == 1) return OneFOneBTasks(1, m, 0);
    std::vector<Task> tasks;
    tasks.reserve(static_cast<size_t>(6 * m));
    int64_t forwards[2] = {0, 0}, backwards[2] = {0, 0}, weights[2] = {0, 0};
    auto f = [&](int c) { tasks.push_back(MakeTask(forwards[c]++, c, Phase::kForward)); };
    auto b = [&](int c) { tasks.push_back(MakeTask(backwards[c]++, c, Phase::kBackwardInput)); };
    auto w = [&](int c) { tasks.push_back(MakeTask(weights[c]++, c, Phase::kBackwardWeight)); };
    for (int64_t i = 0; i < 2 * (p - r) - 1; ++i) f(0);
    for (int64_t i = 0; i < r; ++i) f(1), f(0);
    for (int64_t i = 0; i < p - r; ++i) f(1), b(1), w(1);
    while (forwards[1] < forwards[0] || forwards[0] < m) {
      if (forwards[0] < m) f(0);
      b(0), w(0), f(1), b(1), w(1);
    }
    for (int64_t i = 0; i < r; ++i) b(0), b(1);
    for (int64_t i = 0; i < p - r; ++i) b(0), w(0);
    while (weights[1] < backwards[1]) w(1);
    while (weights[0] < backwards[0]) w(0);
    return tasks;
  }
  FrameworkScheduleNames framework_names() const override {
    return {.megatron_core = "", .torchtitan = "ZBVZeroBubble", .maxtext = "", .deepspeed = ""};
  }
};

const Schedule& ZeroBubbleVSchedule() {
  static const ZeroBubbleV kSchedule;
  return kSchedule;
}

}  // namespace shardsim::strategies::schedules
