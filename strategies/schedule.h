// A pipeline schedule: everything shardsim knows about one schedule lives in one file under
// strategies/schedules/ that implements this interface; AllSchedules() lists them. Plan checks,
// the planner's search, the step program, the estimator, the exports and the runtime ask the
// schedule, never its name.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "core/plan_spec.h"
#include "strategies/step_program.h"

namespace shardsim::strategies {

// Where a chunk sits: which micro-batches pass through it (DualPipe feeds two directions) and its
// place along their path through the model, 0 first.
struct ChunkPlace {
  int64_t direction = 0;
  int64_t position = 0;
};

// A schedule's name in each framework that runs it, "" where that framework has none like it.
// Sources: Megatron-core megatron/core/pipeline_parallel/schedules.py (its two pipelined
// forward_backward functions); torchtitan's parallelism.pipeline_parallel_schedule, PyTorch's
// torch/distributed/pipelining/schedules.py class names without "Schedule"; MaxText
// src/maxtext/layers/pipeline.py (one circular, GPipe-ordered pipeline); DeepSpeed
// deepspeed/runtime/pipe/schedule.py (TrainSchedule, 1F1B).
struct FrameworkScheduleNames {
  std::string_view megatron_core, torchtitan, maxtext, deepspeed;
};

class Schedule {
 public:
  virtual ~Schedule() = default;

  // The plan JSON value, e.g. "1f1b".
  virtual std::string_view name() const = 0;
  // One line: what it does and where it comes from.
  virtual std::string_view summary() const = 0;

  // Model chunks each stage holds on `stages` stages for the plan's `virtual_stages`. One stage
  // always holds one chunk (a single stage is plain gradient accumulation).
  virtual int64_t Chunks(int64_t stages, int64_t virtual_stages) const = 0;
  // Directions micro-batches flow in on `stages` stages (2 for DualPipe, which holds two copies of
  // the model).
  virtual int64_t Directions(int64_t /*stages*/) const { return 1; }
  // The direction of micro-batch `mb` of `microbatches` on `stages` stages.
  virtual int64_t DirectionOf(int64_t /*stages*/, int64_t /*mb*/, int64_t /*microbatches*/) const {
    return 0;
  }
  // How many of the first `count` micro-batches of `microbatches` take each direction (DirectionOf,
  // counted without visiting each).
  virtual std::vector<int64_t> DirectionCounts(int64_t /*stages*/, int64_t count, int64_t /*microbatches*/) const { return {count}; }
  // Where chunk `chunk` of `stage` sits. Default: Megatron's interleaving, chunk c of stage s at
  // position c x stages + s.
  virtual ChunkPlace Place(int64_t stages, int64_t /*chunks*/, int64_t stage, int64_t chunk) const {
    return {0, chunk * stages + stage};
  }
  // Whether the input gradient leaves a stage after its B task, the weight gradients (W) coming
  // later (zero-bubble schedules); otherwise after B and W together.
  virtual bool SplitsBackward() const = 0;
  // Whether a stage holds every micro-batch of a schedule at its peak (GPipe): the memory model
  // then walks the whole schedule, not a steady state's few periods (kMaxWalkedRound bounds it).
  virtual bool HoldsWholeRound() const { return false; }

  // Why this schedule cannot run `plan` with `microbatches` per replica on `layers` decoder
  // layers, or nothing. Only the schedule's own rules (stage counts, micro-batch counts, chunks).
  virtual std::optional<Infeasibility> Check(const PlanSpec& plan, int64_t layers,
                                             int64_t microbatches) const = 0;
  // The virtual_stages values the planner tries with `stages` stages (1 for one chunk per stage).
  virtual std::vector<int64_t> SearchedVirtualStages(int64_t /*stages*/) const { return {1}; }

  // The task order of `stage` (0-based, of `stages`) for `microbatches` micro-batches and
  // `chunks` chunks per stage. Backward appears as B then W; schedules that do not split the
  // backward put each W right after its B. REQUIRES: Check passed.
  virtual std::vector<Task> Tasks(int64_t stages, int64_t microbatches, int64_t chunks,
                                  int64_t stage) const = 0;

  // What each training framework calls this schedule where it runs it as this file describes it
  // (FrameworkScheduleNames). planner/framework_facts.cc adds each framework's own limits.
  virtual FrameworkScheduleNames framework_names() const = 0;
};

// Every schedule shardsim knows, in the order `presets` lists them.
const std::vector<const Schedule*>& AllSchedules();
std::vector<std::string> ScheduleNames();
// The schedule named `name`, or nullptr.
const Schedule* FindSchedule(std::string_view name);
// The plan's schedule. REQUIRES: a known name (CheckPlan checks it).
const Schedule& ScheduleOf(const PlanSpec& plan);
// The unknown-name infeasibility for `name`, with the closest known names.
Infeasibility UnknownSchedule(const std::string& name);

// The most micro-batches per schedule the estimate walks task by task where it cannot extend a
// steady state: a schedule that holds them all (HoldsWholeRound), or a step of several rounds,
// of which two are played whole (sim/schedule_player.h). Past it a plan is refused (plan_rules).
inline constexpr int64_t kMaxWalkedRound = int64_t{1} << 16;

// The task order of `stage` for `microbatches` micro-batches run as schedules of `round` each,
// one after another (PlanSpec::pipeline_rounds): the schedule's tasks for `round` micro-batches,
// then the same for the next `round`, and so on. REQUIRES: round divides microbatches.
std::vector<Task> RoundTasks(const Schedule& schedule, int64_t stages, int64_t microbatches, int64_t round, int64_t chunks, int64_t stage);

// Every stage's task list for (schedule, stages, micro-batches, schedule rounds of `round`
// micro-batches, chunks), made once and kept: the planner estimates many plans of one pipeline
// shape (ZeRO stages, recomputation, mesh orders).
class TaskLists {
 public:
  using Lists = std::vector<std::vector<Task>>;
  // The lists of stages 0 .. stages - 1 (RoundTasks); valid while this object lives.
  const Lists& Get(const Schedule& schedule, int64_t stages, int64_t microbatches, int64_t round, int64_t chunks);
  // The program's lists over its first `count` micro-batches, in its schedule rounds (ScheduleRound).
  const Lists& Get(const StepProgram& program, int64_t count);
  // Over stage `stage`'s task order, the counts of micro-batches in flight per chunk (stored by
  // an F, released by the chunk's task of phase `release`) that no other point of the walk
  // exceeds on every chunk: the peak of any non-negative weighting of the counts is at one of
  // them (the memory model's in-flight peaks, without walking the tasks again). Over one schedule:
  // rounds of it repeat its peaks.
  const std::vector<std::vector<int64_t>>& InFlightPeaks(const Schedule& schedule, int64_t stages, int64_t microbatches, int64_t chunks,
                                                         int64_t stage, Phase release);

 private:
  std::map<std::tuple<const Schedule*, int64_t, int64_t, int64_t, int64_t>, Lists> lists_;
  std::map<std::tuple<const Schedule*, int64_t, int64_t, int64_t, int64_t, int>, std::vector<std::vector<int64_t>>> peaks_;
};

// How many micro-batches a schedule needs to reach its steady state: its peak of micro-batches in
// flight and a period that repeats. Memory peaks and the estimator's steady-state rate are taken
// over this many (all of them when fewer): 8 p v, plus one period 2 p of slack.
int64_t SteadyStateMicrobatches(int64_t stages, int64_t chunks, int64_t microbatches);

}  // namespace shardsim::strategies
