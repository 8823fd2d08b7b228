#include "strategies/pipeline_schedule.h"

#include <algorithm>
#include <deque>

namespace shardsim::strategies {
namespace {

Task T(int64_t microbatch, int64_t chunk, Phase phase) {
  return Task{static_cast<int32_t>(microbatch), static_cast<int16_t>(chunk), phase};
}

void Forward(std::vector<Task>& tasks, int64_t mb, int64_t chunk = 0) { tasks.push_back(T(mb, chunk, Phase::kForward)); }
void Backward(std::vector<Task>& tasks, int64_t mb, int64_t chunk = 0) {
  tasks.push_back(T(mb, chunk, Phase::kBackwardInput));
  tasks.push_back(T(mb, chunk, Phase::kBackwardWeight));
}

std::vector<Task> Gpipe(int64_t m) {
  std::vector<Task> tasks;
  tasks.reserve(static_cast<size_t>(3 * m));
  for (int64_t mb = 0; mb < m; ++mb) Forward(tasks, mb);
  for (int64_t mb = 0; mb < m; ++mb) Backward(tasks, mb);
  return tasks;
}

std::vector<Task> OneFOneB(int64_t p, int64_t m, int64_t s) {
  std::vector<Task> tasks;
  tasks.reserve(static_cast<size_t>(3 * m));
  const int64_t warmup = std::min(p - s - 1, m);
  for (int64_t mb = 0; mb < warmup; ++mb) Forward(tasks, mb);
  for (int64_t i = 0; i < m - warmup; ++i) {
    Forward(tasks, warmup + i);
    Backward(tasks, i);
  }
  for (int64_t mb = m - warmup; mb < m; ++mb) Backward(tasks, mb);
  return tasks;
}

// Megatron's interleaved order: the k-th forward of a stage is micro-batch
// (k / (p v)) p + k % p of chunk (k / p) % v; backwards walk the chunks in reverse.
std::vector<Task> Interleaved(int64_t p, int64_t m, int64_t v, int64_t s) {
  const int64_t total = m * v;
  auto forward_task = [&](int64_t k) { return T((k / (p * v)) * p + k % p, (k / p) % v, Phase::kForward); };
  auto backward_chunk = [&](int64_t k) { return v - 1 - (k / p) % v; };
  const int64_t warmup = std::min((p - s - 1) * 2 + (v - 1) * p, total);
  std::vector<Task> tasks;
  tasks.reserve(static_cast<size_t>(3 * total));
  for (int64_t k = 0; k < warmup; ++k) tasks.push_back(forward_task(k));
  for (int64_t i = 0; i < total - warmup; ++i) {
    tasks.push_back(forward_task(warmup + i));
    Backward(tasks, (i / (p * v)) * p + i % p, backward_chunk(i));
  }
  for (int64_t i = total - warmup; i < total; ++i) Backward(tasks, (i / (p * v)) * p + i % p, backward_chunk(i));
  return tasks;
}

// ZB-H1: 1F1B's order of F and B, with B sent on as soon as it is done and W deferred: stage s
// holds back up to s weight-gradient tasks (its 1F1B peak is p - s micro-batches in flight, so
// no stage exceeds the first stage's p), running them in the cooldown while it waits.
std::vector<Task> ZeroBubbleH1(int64_t p, int64_t m, int64_t s) {
  std::vector<Task> tasks;
  tasks.reserve(static_cast<size_t>(3 * m));
  const int64_t warmup = std::min(p - s - 1, m);
  const int64_t held = s;
  std::deque<int64_t> pending;
  auto backward = [&](int64_t mb) {
    tasks.push_back(T(mb, 0, Phase::kBackwardInput));
    pending.push_back(mb);
    while (static_cast<int64_t>(pending.size()) > held) {
      tasks.push_back(T(pending.front(), 0, Phase::kBackwardWeight));
      pending.pop_front();
    }
  };
  for (int64_t mb = 0; mb < warmup; ++mb) Forward(tasks, mb);
  for (int64_t i = 0; i < m - warmup; ++i) {
    Forward(tasks, warmup + i);
    backward(i);
  }
  for (int64_t mb = m - warmup; mb < m; ++mb) {
    backward(mb);
    // In the cooldown each B waits on the next stage: one deferred W fills that wait.
    if (!pending.empty() && mb + 1 < m) {
      tasks.push_back(T(pending.front(), 0, Phase::kBackwardWeight));
      pending.pop_front();
    }
  }
  while (!pending.empty()) {
    tasks.push_back(T(pending.front(), 0, Phase::kBackwardWeight));
    pending.pop_front();
  }
  return tasks;
}

// DualPipe (DeepSeek-V3, section 3.2.1, and its public reference schedule): micro-batches enter
// from both ends; stage `rank` runs the down-flowing ones on its chunk 0 and the up-flowing ones
// on its chunk 1. Ranks in the second half mirror the first half with the directions swapped.
// The eight phases: forwards to fill, paired forwards, zero-bubble B/W/F, the steady F-B pairs,
// then draining backwards with deferred weight gradients. (The reference overlaps each F-B
// pair's compute with the other's communication; here they run back to back.)
std::vector<Task> DualPipe(int64_t p, int64_t m, int64_t rank) {
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
    tasks.push_back(T(mb_of(c, next_forward[c]++), c, Phase::kForward));
  };
  auto backward = [&](int local, bool zero_bubble) {
    const int64_t c = chunk_of(local), mb = mb_of(c, next_backward[c]++);
    tasks.push_back(T(mb, c, Phase::kBackwardInput));
    if (zero_bubble) {
      weights.push_back({mb, c});
    } else {
      tasks.push_back(T(mb, c, Phase::kBackwardWeight));
    }
  };
  auto weight = [&] {
    if (weights.empty()) return;
    tasks.push_back(T(weights.front().first, weights.front().second, Phase::kBackwardWeight));
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

}  // namespace

std::vector<Task> ScheduleStage(PipelineSchedule schedule, int64_t p, int64_t m, int64_t v, int64_t s) {
  if (p == 1) return OneFOneB(1, m, 0);  // one stage: gradient accumulation, one micro-batch at a time
  switch (schedule) {
    case PipelineSchedule::kGpipe: return Gpipe(m);
    case PipelineSchedule::kOneFOneB: return OneFOneB(p, m, s);
    case PipelineSchedule::kInterleavedOneFOneB: return v > 1 ? Interleaved(p, m, v, s) : OneFOneB(p, m, s);
    case PipelineSchedule::kZbH1: return ZeroBubbleH1(p, m, s);
    case PipelineSchedule::kDualPipe: return DualPipe(p, m, s);
  }
  return {};
}

}  // namespace shardsim::strategies
