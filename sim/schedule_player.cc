#include "sim/schedule_player.h"

#include <algorithm>

#include "core/error.h"
#include "sim/op_cost.h"

namespace shardsim::sim {

PipelinePath PathOf(const strategies::StepProgram& program) {
  PipelinePath path;
  const int64_t p = static_cast<int64_t>(program.stages.size());
  const int64_t v = static_cast<int64_t>(program.stages.front().chunks.size());
  path.chunks = v;
  path.before.assign(static_cast<size_t>(p * v), -1);
  path.after.assign(static_cast<size_t>(p * v), -1);
  for (int64_t s = 0; s < p; ++s) {
    for (int64_t c = 0; c < v; ++c) {
      const strategies::ChunkLayout& chunk = program.layout.Chunk(s, c);
      const auto& order = program.layout.paths[static_cast<size_t>(chunk.direction)];
      if (chunk.position > 0) {
        const auto& [ps, pc] = order[static_cast<size_t>(chunk.position - 1)];
        path.before[static_cast<size_t>(s * v + c)] = ps * v + pc;
      }
      if (chunk.position + 1 < static_cast<int64_t>(order.size())) {
        const auto& [ns, nc] = order[static_cast<size_t>(chunk.position + 1)];
        path.after[static_cast<size_t>(s * v + c)] = ns * v + nc;
      }
    }
  }
  return path;
}

double SteadyStatePlays::Extend(double at, double at_fewer) const {
  if (!extended()) return at;
  return at + static_cast<double>(microbatches - scheduled) / static_cast<double>(scheduled - fewer) * (at - at_fewer);
}

SteadyStatePlays PlaysFor(const strategies::StepProgram& program, bool play_every_microbatch) {
  SteadyStatePlays plays;
  const int64_t p = static_cast<int64_t>(program.stages.size());
  const int64_t v = static_cast<int64_t>(program.stages.front().chunks.size());
  plays.microbatches = program.microbatches;
  plays.scheduled = play_every_microbatch ? program.microbatches : strategies::SteadyStateMicrobatches(p, v, program.microbatches);
  const int64_t round = strategies::ScheduleRound(program);
  if (plays.scheduled < plays.microbatches && round < plays.microbatches) {
    const int64_t rounds = std::max<int64_t>(2, plays.scheduled / round);
    plays.scheduled = rounds * round;
    plays.fewer = rounds / 2 * round;
    if (plays.scheduled >= plays.microbatches) plays.scheduled = plays.microbatches, plays.fewer = 0;  // two rounds: play them
  } else if (plays.scheduled < plays.microbatches) {
    // Stages of unequal times repeat over several periods: the shorter play is a whole number of
    // periods (2p micro-batches) shorter, about half as long.
    const int64_t period = 2 * p;
    plays.fewer = plays.scheduled / 2 / period * period;
    SHARDSIM_CHECK(plays.fewer > 0 && plays.fewer < plays.scheduled, "the scheduled micro-batches must exceed one period");
  }
  return plays;
}

namespace {

// Plays `count` micro-batches of each stage's task list.
PlayedSchedule Play(const strategies::TaskLists::Lists& stage_tasks, int64_t count, const PipelinePath& path, const std::vector<double>& duration,
                    double send_s, int sent_after) {
  const int64_t stages = static_cast<int64_t>(stage_tasks.size()), chunks = path.chunks, all_slots = stages * chunks;
  std::vector<double> finish(static_cast<size_t>(3 * all_slots * count), -1);
  // Locals, not references into the enclosing scope: the stores below cannot alias them.
  double* const done = finish.data();
  const int64_t* const before_of = path.before.data();
  const int64_t* const after_of = path.after.data();
  const double* const seconds_of = duration.data();
  auto at = [&](int ph, int64_t at_slot, int64_t mb) -> double& { return done[(ph * all_slots + at_slot) * count + mb]; };
  std::vector<size_t> next(static_cast<size_t>(stages), 0);
  PlayedSchedule played;
  played.clock.assign(static_cast<size_t>(stages), 0);
  played.busy.assign(static_cast<size_t>(stages), 0);
  size_t remaining = 0;
  for (const auto& tasks : stage_tasks) remaining += tasks.size();
  // Sweeps alternate in direction: forwards flow from stage 0 up and backwards down, so each
  // carries its chain through every stage in one sweep (one direction only moved the backwards a
  // stage a sweep: an estimate of 1F1B on 2,048 stages over 32,768 micro-batches 18 s -> 13 s).
  for (bool upwards = true; remaining > 0; upwards = !upwards) {
    bool progressed = false;
    for (int64_t k = 0; k < stages; ++k) {
      const int64_t s = upwards ? k : stages - 1 - k;
      const strategies::Task* const tasks = stage_tasks[static_cast<size_t>(s)].data();
      const size_t size = stage_tasks[static_cast<size_t>(s)].size();
      size_t i = next[static_cast<size_t>(s)];
      double now = played.clock[static_cast<size_t>(s)], worked = played.busy[static_cast<size_t>(s)];
      for (; i < size; ++i) {
        const strategies::Task& task = tasks[i];
        SHARDSIM_CHECK(task.microbatch >= 0 && task.microbatch < count && task.chunk >= 0 && task.chunk < chunks, "schedule task out of range");
        const int64_t here = s * chunks + task.chunk;
        const int ph = PhaseIndex(task.phase);
        double ready = 0;
        // A neighbour on the same stage (ZB-V's turn) hands over without a transfer.
        if (ph == 0 && before_of[here] >= 0) {
          const double dep = at(0, before_of[here], task.microbatch);
          if (dep < 0) break;
          ready = dep + (before_of[here] / chunks == s ? 0.0 : send_s);
        } else if (ph == 1 && after_of[here] >= 0) {
          const double dep = at(sent_after, after_of[here], task.microbatch);
          if (dep < 0) break;
          ready = dep + (after_of[here] / chunks == s ? 0.0 : send_s);
        }
        const double seconds = seconds_of[3 * here + ph];
        now = std::max(now, ready) + seconds;
        worked += seconds;
        at(ph, here, task.microbatch) = now;
      }
      if (i != next[static_cast<size_t>(s)]) {
        remaining -= i - next[static_cast<size_t>(s)];
        next[static_cast<size_t>(s)] = i;
        played.clock[static_cast<size_t>(s)] = now;
        played.busy[static_cast<size_t>(s)] = worked;
        progressed = true;
      }
    }
    SHARDSIM_CHECK(progressed, "the pipeline schedule deadlocks");
  }
  return played;
}

}  // namespace

PlayedSchedule PlaySchedule(const strategies::StepProgram& program, const std::vector<double>& seconds, double send_s, bool play_every_microbatch,
                            strategies::TaskLists* task_lists) {
  const PipelinePath path = PathOf(program);
  // The input gradient leaves a stage when its whole backward is done, except in zero-bubble
  // schedules, which send it after B and run W later.
  const int sent_after = program.schedule->SplitsBackward() ? 1 : 2;
  const SteadyStatePlays plays = PlaysFor(program, play_every_microbatch);
  strategies::TaskLists own_lists;
  strategies::TaskLists& lists = task_lists ? *task_lists : own_lists;
  PlayedSchedule played = Play(lists.Get(program, plays.scheduled), plays.scheduled, path, seconds, send_s, sent_after);
  if (plays.extended()) {
    const PlayedSchedule shorter = Play(lists.Get(program, plays.fewer), plays.fewer, path, seconds, send_s, sent_after);
    for (size_t s = 0; s < played.clock.size(); ++s) {
      played.clock[s] = plays.Extend(played.clock[s], shorter.clock[s]);
      played.busy[s] = plays.Extend(played.busy[s], shorter.busy[s]);
    }
  }
  return played;
}

}  // namespace shardsim::sim
