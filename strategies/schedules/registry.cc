// The list of pipeline schedules: one line per schedule file in this folder.
#include <algorithm>
#include <limits>
#include <string>
#include <unordered_set>

#include "core/suggest.h"
#include "strategies/schedule.h"

namespace shardsim::strategies {
namespace schedules {
const Schedule& GpipeSchedule();
const Schedule& OneFOneBSchedule();
const Schedule& InterleavedSchedule();
const Schedule& ZbH1Schedule();
const Schedule& ZeroBubbleVSchedule();
const Schedule& DualPipeSchedule();
}  // namespace schedules

const std::vector<const Schedule*>& AllSchedules() {
  static const std::vector<const Schedule*> kSchedules = {
      &schedules::GpipeSchedule(),       &schedules::OneFOneBSchedule(),
      &schedules::InterleavedSchedule(), &schedules::ZbH1Schedule(),
      &schedules::ZeroBubbleVSchedule(), &schedules::DualPipeSchedule()};
  return kSchedules;
}

std::vector<std::string> ScheduleNames() {
  std::vector<std::string> names;
  for (const Schedule* s : AllSchedules()) names.emplace_back(s->name());
  return names;
}

const Schedule* FindSchedule(std::string_view name) {
  for (const Schedule* s : AllSchedules()) {
    if (s->name() == name) return s;
  }
  return nullptr;
}

const Schedule& ScheduleOf(const PlanSpec& plan) {
  const Schedule* s = FindSchedule(plan.pipeline_schedule);
  SHARDSIM_CHECK(s != nullptr, "unknown pipeline schedule " + plan.pipeline_schedule);
  return *s;
}

Infeasibility UnknownSchedule(const std::string& name) {
  const std::string s = DidYouMean(name, ScheduleNames());
  return Infeasibility{"pipeline_schedule",
                       "unknown pipeline schedule '" + name + "'" + (s.empty() ? "" : "; " + s),
                       JoinNames(ScheduleNames()), "shardsim presets lists the schedules"};
}

std::vector<Task> RoundTasks(const Schedule& schedule, int64_t stages, int64_t microbatches, int64_t round, int64_t chunks, int64_t stage) {
  SHARDSIM_CHECK(round > 0 && microbatches % round == 0, "schedule rounds must split the micro-batches evenly");
  // Task holds the micro-batch in 32 bits and the chunk in 16: the walks are bounded far below
  // (SteadyStateMicrobatches, kMaxWalkedRound; virtual_stages <= 1024), and this says so if not.
  SHARDSIM_CHECK(microbatches <= std::numeric_limits<int32_t>::max() && chunks <= std::numeric_limits<int16_t>::max(),
                 "a task list of " + std::to_string(microbatches) + " micro-batches x " + std::to_string(chunks) + " chunks exceeds a Task's fields");
  std::vector<Task> tasks = schedule.Tasks(stages, round, chunks, stage);
  const size_t one = tasks.size();
  tasks.reserve(one * static_cast<size_t>(microbatches / round));
  for (int64_t first = round; first < microbatches; first += round) {
    for (size_t i = 0; i < one; ++i) {
      Task task = tasks[i];
      task.microbatch = static_cast<int32_t>(task.microbatch + first);
      tasks.push_back(task);
    }
  }
  return tasks;
}

const TaskLists::Lists& TaskLists::Get(const Schedule& schedule, int64_t stages, int64_t microbatches, int64_t round, int64_t chunks) {
  const auto key = std::make_tuple(&schedule, stages, microbatches, round, chunks);
  auto it = lists_.find(key);
  if (it != lists_.end()) return it->second;
  Lists lists(static_cast<size_t>(stages));
  for (int64_t s = 0; s < stages; ++s) lists[static_cast<size_t>(s)] = RoundTasks(schedule, stages, microbatches, round, chunks, s);
  return lists_.emplace(key, std::move(lists)).first->second;
}

const TaskLists::Lists& TaskLists::Get(const StepProgram& program, int64_t count) {
  return Get(*program.schedule, program.layout.stages, count, ScheduleRound(program, count), program.layout.chunks);
}

const std::vector<std::vector<int64_t>>& TaskLists::InFlightPeaks(const Schedule& schedule, int64_t stages, int64_t microbatches, int64_t chunks,
                                                                  int64_t stage, Phase release) {
  const auto key = std::make_tuple(&schedule, stages, microbatches, chunks, stage, static_cast<int>(release));
  auto it = peaks_.find(key);
  if (it != peaks_.end()) return it->second;
  std::vector<std::vector<int64_t>> peaks;
  std::vector<int64_t> live(static_cast<size_t>(chunks), 0);
  auto dominates = [](const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
    for (size_t c = 0; c < a.size(); ++c) {
      if (a[c] < b[c]) return false;
    }
    return true;
  };
  // Only the end of a run of forwards can be a peak: a release lowers a count, any other task
  // changes none, and a further forward raises one. A steady state repeats the same counts, so
  // each is compared with the peaks once (an estimate of interleaved p = 256, v = 8 over 32,768
  // micro-batches: 83 s -> 7.9 s; bench/plan_targets.sh).
  struct CountsHash {
    size_t operator()(const std::vector<int64_t>& counts) const {
      size_t h = counts.size();
      for (int64_t n : counts) h = h * 1000003u ^ std::hash<int64_t>{}(n);
      return h;
    }
  };
  std::unordered_set<std::vector<int64_t>, CountsHash> seen;
  const std::vector<Task>& tasks = Get(schedule, stages, microbatches, microbatches, chunks)[static_cast<size_t>(stage)];
  for (size_t i = 0; i < tasks.size(); ++i) {
    const Task& task = tasks[i];
    if (task.phase == Phase::kForward) ++live[static_cast<size_t>(task.chunk)];
    if (task.phase == release) --live[static_cast<size_t>(task.chunk)];
    const bool run_ends = task.phase == Phase::kForward && (i + 1 == tasks.size() || tasks[i + 1].phase != Phase::kForward);
    if (!run_ends || !seen.insert(live).second) continue;
    if (std::any_of(peaks.begin(), peaks.end(), [&](const std::vector<int64_t>& p) { return dominates(p, live); })) continue;
    peaks.erase(std::remove_if(peaks.begin(), peaks.end(), [&](const std::vector<int64_t>& p) { return dominates(live, p); }), peaks.end());
    peaks.push_back(live);
  }
  return peaks_.emplace(key, std::move(peaks)).first->second;
}

int64_t SteadyStateMicrobatches(int64_t stages, int64_t chunks, int64_t microbatches) {
  const int64_t played = 8 * stages * chunks;
  return microbatches <= played + 2 * stages ? microbatches : played;
}

}  // namespace shardsim::strategies
