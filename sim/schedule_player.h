// The analytic schedule player: each stage runs its tasks in the schedule's order, each once its
// inputs have arrived (a task's cost is fixed; transfers take a fixed time), so bubbles come out
// of the schedule. And the steady-state rule both engines use to avoid playing every
// micro-batch: play a prefix long enough to settle, play a shorter one, extend at the rate
// between the two.
#pragma once

#include <cstdint>
#include <vector>

#include "strategies/schedule.h"
#include "strategies/step_program.h"

namespace shardsim::sim {

// Each (stage, chunk) slot's neighbours along its micro-batches' path (-1 at the ends); slots
// are stage x chunks + chunk.
struct PipelinePath {
  int64_t chunks = 1;
  std::vector<int64_t> before, after;
  int64_t StageOf(int64_t slot) const { return slot / chunks; }
};
PipelinePath PathOf(const strategies::StepProgram& program);

// The micro-batch counts to play: `scheduled` (all of them when the steady state is not worth
// extending), and `fewer` (0 when scheduled is all of them), a whole number of periods shorter.
// A step of several schedule rounds (PlanSpec::pipeline_rounds) plays whole rounds, at least two
// and one: every round after the first adds the same time to each stage (each round starts as the
// one before it did), so extending at the rate between the plays is exact.
struct SteadyStatePlays {
  int64_t microbatches = 0;  // all of them
  int64_t scheduled = 0;
  int64_t fewer = 0;
  bool extended() const { return fewer > 0; }
  // A quantity measured after `scheduled` (at) and after `fewer` (at_fewer) micro-batches,
  // extended to all of them at the steady rate.
  double Extend(double at, double at_fewer) const;
};
SteadyStatePlays PlaysFor(const strategies::StepProgram& program, bool play_every_microbatch);

struct PlayedSchedule {
  std::vector<double> clock;  // per stage: when its last task ends
  std::vector<double> busy;   // per stage: seconds it worked
};
// Plays the program's schedule with `seconds[3 x slot + PhaseIndex]` per task and `send_s` per
// transfer between stages, extended over the steady state (PlaysFor). `task_lists`, when given,
// keeps the task lists for the next plans of the same pipeline shape.
PlayedSchedule PlaySchedule(const strategies::StepProgram& program, const std::vector<double>& seconds, double send_s, bool play_every_microbatch,
                            strategies::TaskLists* task_lists);

}  // namespace shardsim::sim
