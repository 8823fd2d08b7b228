// Interleaved 1F1B (Narayanan et al. 2021, Megatron-LM's order): each stage holds v model chunks,
// chunk c of stage s at position c p + s; the k-th forward of a stage is micro-batch
// (k / (p v)) p + k % p of chunk (k / p) % v, and backwards walk the chunks in reverse. Bubble
// (p - 1) / v of 1F1B's, for v times the pipeline sends.
#include <algorithm>

#include "strategies/schedules/task_list.h"

namespace shardsim::strategies::schedules {

namespace {

// The k-th forward (or backward) of a stage, k = 0, 1, ...: micro-batch (k / (p v)) p + k % p of
// chunk (k / p) % v, walked one step at a time (a division per task costs more than the rest of
// the schedule, which the estimator builds for every plan).
struct Walk {
  int64_t p, v;
  int64_t group = 0, chunk = 0, within = 0;  // k = (group v + chunk) p + within
  Walk(int64_t stages, int64_t chunks) : p(stages), v(chunks) {}
  int64_t microbatch() const { return group * p + within; }
  void Next() {
    if (++within < p) return;
    within = 0;
    if (++chunk < v) return;
    chunk = 0;
    ++group;
  }
};

}  // namespace

class Interleaved final : public Schedule {
 public:
  std::string_view name() const override { return "interleaved-1f1b"; }
  std::string_view summary() const override {
    return "1F1B over v model chunks per stage (Narayanan et al. 2021)";
  }
  int64_t Chunks(int64_t stages, int64_t virtual_stages) const override {
    return stages > 1 ? virtual_stages : 1;
  }
  bool SplitsBackward() const override { return false; }
  std::optional<Infeasibility> Check(const PlanSpec& plan, int64_t,
                                     int64_t microbatches) const override {
    const int64_t p = plan.mesh.pipeline;
    if (p > 1 && plan.virtual_stages < 2) {
      return Infeasibility{
          "virtual_stages",
          "interleaved-1f1b needs virtual_stages >= 2, got " + std::to_string(plan.virtual_stages),
          "2 or more", "or use pipeline_schedule 1f1b"};
    }
    if (p > 1 && microbatches % p != 0) {
      return Infeasibility{
          "global_batch_size",
          "interleaved-1f1b needs the " + std::to_string(microbatches) +
              " micro-batches per schedule to be a multiple of pipeline=" + std::to_string(p),
          "micro-batches a multiple of " + std::to_string(p),
          "change global_batch_size or micro_batch_size"};
    }
    return std::nullopt;
  }
  std::vector<int64_t> SearchedVirtualStages(int64_t stages) const override {
    if (stages == 1) return {};
    return {2, 4};
  }
  std::vector<Task> Tasks(int64_t p, int64_t m, int64_t v, int64_t s) const override {
    if (p == 1 || v == 1) return OneFOneBTasks(p, m, s);
    const int64_t total = m * v;
    const int64_t warmup = std::min((p - s - 1) * 2 + (v - 1) * p, total);
    std::vector<Task> tasks;
    tasks.reserve(static_cast<size_t>(3 * total));
    Walk forward(p, v), backward(p, v);
    for (int64_t k = 0; k < warmup; ++k, forward.Next())
      AddForward(tasks, forward.microbatch(), forward.chunk);
    for (int64_t i = 0; i < total - warmup; ++i, forward.Next(), backward.Next()) {
      AddForward(tasks, forward.microbatch(), forward.chunk);
      AddBackward(tasks, backward.microbatch(), v - 1 - backward.chunk);
    }
    for (int64_t i = total - warmup; i < total; ++i, backward.Next())
      AddBackward(tasks, backward.microbatch(), v - 1 - backward.chunk);
    return tasks;
  }
  FrameworkScheduleNames framework_names() const override {
    return {.megatron_core = "forward_backward_pipelining_with_interleaving", .torchtitan = "Interleaved1F1B", .maxtext = "", .deepspeed = ""};
  }
};

const Schedule& InterleavedSchedule() {
  static const Interleaved kSchedule;
  return kSchedule;
}

}  // namespace shardsim::strategies::schedules
