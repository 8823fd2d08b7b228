#include "sim/estimate.h"

#include <algorithm>
#include <array>

#include "core/error.h"
#include "core/mesh.h"
#include "strategies/schedule.h"

namespace shardsim::sim {
namespace {

using strategies::ComputeKind;
using strategies::LayerProgram;
using strategies::Op;
using strategies::Phase;
using strategies::StepProgram;
using strategies::Stream;

std::string Key(const std::vector<std::string>& axes) {
  std::string key;
  for (const std::string& a : axes) key += (key.empty() ? "" : ",") + a;
  return key;
}

// Exposed seconds per (stream, collective), in a fixed array: costing runs per plan in the
// planner's inner loop, where string-keyed maps cost more than the arithmetic.
constexpr size_t kStreamCount = 6, kCollectiveCount = 6;
struct ExposedByKind {
  std::array<double, kStreamCount * kCollectiveCount> seconds{};
  static size_t Index(Stream stream, CollectiveOp op) { return static_cast<size_t>(stream) * kCollectiveCount + static_cast<size_t>(op); }
  double& operator[](const Op& op) { return seconds[Index(op.stream, op.collective)]; }
  void Add(const ExposedByKind& other, double times) {
    for (size_t i = 0; i < seconds.size(); ++i) seconds[i] += other.seconds[i] * times;
  }
  double Total() const {
    double total = 0;
    for (double s : seconds) total += s;
    return total;
  }
  // "tensor all-reduce" -> seconds, for the kinds with any time.
  std::map<std::string, double> Named() const {
    std::map<std::string, double> named;
    for (size_t i = 0; i < seconds.size(); ++i) {
      if (seconds[i] == 0) continue;
      named[strategies::ToString(static_cast<Stream>(i / kCollectiveCount)) + " " + ToString(static_cast<CollectiveOp>(i % kCollectiveCount))] = seconds[i];
    }
    return named;
  }
};

// The cost of one layer's work on one micro-batch in one phase.
struct PhaseCost {
  double compute_s = 0;
  double total_s = 0;
  double flops = 0;
  ExposedByKind exposed_s;  // by stream and collective
  // Each collective of the phase (layer costs only; Add does not carry them): the op, its
  // seconds alone and its exposed share.
  struct Collective {
    const Op* op;
    double seconds, exposed_s;
  };
  std::vector<Collective> collectives;
};

struct Roofline {
  double peak_flop_per_s;
  double matmul_efficiency;
  double hbm_bytes_per_s;  // x efficiency
  int64_t tile = 0, units = 0;
  double Quantization(int64_t m, int64_t n) const { return MatmulQuantization(tile, units, m, n); }
  double Seconds(const Op& op) const {
    const double memory = op.bytes / hbm_bytes_per_s;
    if (op.kind == ComputeKind::kMatmul) {
      return std::max(op.flops / (peak_flop_per_s * matmul_efficiency * Quantization(op.m, op.n)), memory);
    }
    if (op.kind == ComputeKind::kAttention) return std::max(op.flops / (peak_flop_per_s * matmul_efficiency), memory);
    return memory;
  }
};

PhaseCost CostPhase(const LayerProgram& layer, Phase phase, const Roofline& roofline, AxisCollectives& collectives) {
  PhaseCost cost;
  double overlapped = 0;
  ExposedByKind overlapped_by_kind;
  for (const Op& op : layer.ops) {
    if (op.phase != phase) continue;
    if (!op.is_comm()) {
      cost.compute_s += roofline.Seconds(op);
      cost.flops += op.flops;
      continue;
    }
    const double seconds = collectives.Seconds(op.collective, op.axes, op.comm_bytes);
    cost.collectives.push_back({&op, seconds, op.overlapped ? 0.0 : seconds});
    if (op.overlapped) {
      overlapped += seconds;
      overlapped_by_kind[op] += seconds;
    } else {
      cost.exposed_s[op] += seconds;
    }
  }
  // Overlapped collectives hide under the phase's compute; what sticks out is exposed, shared
  // among them in proportion.
  const double sticking_out = std::max(0.0, overlapped - cost.compute_s);
  if (overlapped > 0) cost.exposed_s.Add(overlapped_by_kind, sticking_out / overlapped);
  for (PhaseCost::Collective& c : cost.collectives) {
    if (c.op->overlapped) c.exposed_s = sticking_out * c.seconds / overlapped;
  }
  cost.total_s = cost.compute_s + cost.exposed_s.Total();
  return cost;
}

void Add(PhaseCost& into, const PhaseCost& cost, double times) {
  into.compute_s += cost.compute_s * times;
  into.total_s += cost.total_s * times;
  into.flops += cost.flops * times;
  into.exposed_s.Add(cost.exposed_s, times);
}

int PhaseIndex(Phase phase) { return phase == Phase::kForward ? 0 : phase == Phase::kBackwardInput ? 1 : 2; }

}  // namespace

double MatmulQuantization(int64_t tile, int64_t units, int64_t m, int64_t n) {
  if (tile <= 0 || units <= 0 || m <= 0 || n <= 0) return 1.0;
  const int64_t tm = (m + tile - 1) / tile, tn = (n + tile - 1) / tile, tiles = tm * tn;
  const double tile_use = static_cast<double>(m) * static_cast<double>(n) / (static_cast<double>(tm * tile) * static_cast<double>(tn * tile));
  const int64_t waves = (tiles + units - 1) / units;
  return tile_use * static_cast<double>(tiles) / static_cast<double>(waves * units);
}

AxisCollectives::AxisCollectives(const topologies::Cluster& cluster, const PlanSpec& plan, size_t max_modelled_groups)
    : cluster_(cluster), plan_(plan), max_modelled_groups_(max_modelled_groups) {}
AxisCollectives::~AxisCollectives() = default;

double AxisCollectives::Seconds(CollectiveOp op, const std::vector<std::string>& axes, double bytes) {
  int64_t size = 1;
  int mask = 0;
  for (const std::string& a : axes) {
    size *= plan_.mesh.Size(a);
    const auto& names = MeshAxisNames();
    mask |= 1 << (std::find(names.begin(), names.end(), a) - names.begin());
  }
  if (size == 1 || bytes <= 0) return 0;
  const int key = static_cast<int>(op) * 64 + mask;
  const auto known = seconds_.find({key, bytes});
  if (known != seconds_.end()) return known->second;
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    const LogicalMesh mesh(plan_.mesh, plan_.mesh_order);
    // Only the modelled groups are needed: those of ranks spread evenly from the first to the
    // last (listing every group of a 16k-device mesh costs more than the model).
    std::vector<DeviceGroup> groups;
    const int64_t n = mesh.size(), wanted = static_cast<int64_t>(std::max<size_t>(1, max_modelled_groups_));
    for (int64_t k = 0; k < wanted; ++k) {
      const int64_t rank = wanted == 1 ? 0 : k * (n - 1) / (wanted - 1);
      std::vector<int64_t> ranks = mesh.Group(rank, axes);
      if (std::none_of(groups.begin(), groups.end(), [&](const DeviceGroup& g) { return g.devices == ranks; })) groups.push_back({std::move(ranks)});
    }
    it = cache_.emplace(key, std::make_unique<GroupCollective>(cluster_, groups, op, Algorithm::kAuto, "collective over " + Key(axes), max_modelled_groups_,
                                                               /*every_group=*/false))
             .first;
  }
  const double seconds = it->second->Fastest(bytes).estimate.time_s;
  seconds_[{key, bytes}] = seconds;
  return seconds;
}

namespace {
Roofline RooflineOf(const ClusterSpec& cluster, const std::string& dtype) {
  const auto peak = cluster.chip.peak_flop_per_s.find(dtype);
  SHARDSIM_CHECK(peak != cluster.chip.peak_flop_per_s.end(), "dtype without a peak: " + dtype);
  return Roofline{peak->second, cluster.efficiency.matmul, cluster.chip.hbm_bandwidth_bytes_per_s * cluster.efficiency.hbm, cluster.chip.matmul_tile,
                  cluster.chip.compute_units};
}
}  // namespace

PhaseParts CostPhaseParts(const LayerProgram& layer, Phase phase, const ClusterSpec& cluster, const std::string& dtype, AxisCollectives& collectives) {
  const Roofline roofline = RooflineOf(cluster, dtype);
  PhaseParts parts;
  for (const Op& op : layer.ops) {
    if (op.phase != phase) continue;
    if (op.is_comm()) {
      parts.collectives.push_back({&op, collectives.Seconds(op.collective, op.axes, op.comm_bytes)});
    } else {
      parts.compute_s += roofline.Seconds(op);
    }
  }
  return parts;
}

StepReport Estimate(const StepProgram& program, const ClusterSpec& cluster, AxisCollectives& collectives, bool play_every_microbatch,
                    strategies::TaskLists* task_lists) {
  const PlanSpec& plan = program.plan;
  StepReport report;
  const auto peak = cluster.chip.peak_flop_per_s.find(plan.dtype);
  SHARDSIM_CHECK(peak != cluster.chip.peak_flop_per_s.end(), "dtype without a peak: " + plan.dtype);
  report.peak_flop_per_s = peak->second;
  const Roofline roofline{peak->second, cluster.efficiency.matmul, cluster.chip.hbm_bandwidth_bytes_per_s * cluster.efficiency.hbm,
                          cluster.chip.matmul_tile, cluster.chip.compute_units};

  // Per layer program and phase (F, B with recomputation, W).
  std::vector<std::array<PhaseCost, 3>> layer_costs(program.layer_programs.size());
  for (size_t i = 0; i < program.layer_programs.size(); ++i) {
    if (program.layer_programs[i].ops.empty()) continue;
    const LayerProgram& layer = program.layer_programs[i];
    layer_costs[i][0] = CostPhase(layer, Phase::kForward, roofline, collectives);
    layer_costs[i][1] = CostPhase(layer, Phase::kBackwardInput, roofline, collectives);
    const PhaseCost recompute = CostPhase(layer, Phase::kRecompute, roofline, collectives);
    Add(layer_costs[i][1], recompute, 1);
    layer_costs[i][1].collectives.insert(layer_costs[i][1].collectives.end(), recompute.collectives.begin(), recompute.collectives.end());
    layer_costs[i][2] = CostPhase(layer, Phase::kBackwardWeight, roofline, collectives);
  }
  // Per (stage, chunk) slot and phase: the task's cost.
  const int64_t p = plan.mesh.pipeline, m = program.microbatches;
  const int64_t v = static_cast<int64_t>(program.stages.front().chunks.size()), slots = p * v;
  auto slot = [v](int64_t s, int64_t c) { return s * v + c; };
  std::vector<std::array<PhaseCost, 3>> part_costs(static_cast<size_t>(slots));
  for (int64_t s = 0; s < p; ++s) {
    for (int64_t c = 0; c < v; ++c) {
      auto& cost = part_costs[static_cast<size_t>(slot(s, c))];
      for (const auto& [kind, count] : program.stages[static_cast<size_t>(s)].chunks[static_cast<size_t>(c)].layers) {
        for (int ph = 0; ph < 3; ++ph) Add(cost[static_cast<size_t>(ph)], layer_costs[static_cast<size_t>(kind)][static_cast<size_t>(ph)], static_cast<double>(count));
      }
    }
  }
  std::vector<double> duration(static_cast<size_t>(3 * slots));
  for (int64_t i = 0; i < slots; ++i) {
    for (int ph = 0; ph < 3; ++ph) duration[static_cast<size_t>(3 * i + ph)] = part_costs[static_cast<size_t>(i)][static_cast<size_t>(ph)].total_s;
  }
  const double p2p = p > 1 ? collectives.Seconds(CollectiveOp::kPermute, {"pipeline"}, program.pipeline_send.comm_bytes) : 0;

  // Play the schedule: a stage runs its tasks in order, each once its inputs have arrived. The
  // input gradient leaves a stage when its whole backward is done, except in zero-bubble
  // schedules, which send it after B and run W later.
  const strategies::Schedule& schedule = *program.schedule;
  const int gradient_sent_after = schedule.SplitsBackward() ? 1 : 2;
  // Each slot's neighbours along its micro-batches' path (-1 at the ends).
  std::vector<int64_t> before(static_cast<size_t>(slots), -1), after(static_cast<size_t>(slots), -1);
  for (int64_t s = 0; s < p; ++s) {
    for (int64_t c = 0; c < v; ++c) {
      const strategies::ChunkLayout& chunk = program.layout.Chunk(s, c);
      const auto& path = program.layout.paths[static_cast<size_t>(chunk.direction)];
      if (chunk.position > 0) {
        const auto& [ps, pc] = path[static_cast<size_t>(chunk.position - 1)];
        before[static_cast<size_t>(slot(s, c))] = slot(ps, pc);
      }
      if (chunk.position + 1 < static_cast<int64_t>(path.size())) {
        const auto& [ns, nc] = path[static_cast<size_t>(chunk.position + 1)];
        after[static_cast<size_t>(slot(s, c))] = slot(ns, nc);
      }
    }
  }
  // Plays `count` micro-batches of each stage's task list; returns when each stage's last task
  // ends and how long each stage was busy.
  auto play = [&](const std::vector<const std::vector<strategies::Task>*>& stage_tasks, int64_t count) {
    std::vector<double> finish(static_cast<size_t>(3 * slots * count), -1);
    // Locals, not references into the enclosing scope: the stores below cannot alias them.
    const int64_t stages = p, chunks = v, all_slots = slots;
    const double send_s = p2p;
    const int sent_after = gradient_sent_after;
    double* const done = finish.data();
    const int64_t* const before_of = before.data();
    const int64_t* const after_of = after.data();
    const double* const seconds_of = duration.data();
    auto at = [&](int ph, int64_t at_slot, int64_t mb) -> double& { return done[(ph * all_slots + at_slot) * count + mb]; };
    std::vector<size_t> next(static_cast<size_t>(stages), 0);
    std::vector<double> clock(static_cast<size_t>(stages), 0), busy(static_cast<size_t>(stages), 0);
    size_t remaining = 0;
    for (const auto* tasks : stage_tasks) remaining += tasks->size();
    while (remaining > 0) {
      bool progressed = false;
      for (int64_t s = 0; s < stages; ++s) {
        const strategies::Task* const tasks = stage_tasks[static_cast<size_t>(s)]->data();
        const size_t size = stage_tasks[static_cast<size_t>(s)]->size();
        size_t i = next[static_cast<size_t>(s)];
        double now = clock[static_cast<size_t>(s)], worked = busy[static_cast<size_t>(s)];
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
          clock[static_cast<size_t>(s)] = now;
          busy[static_cast<size_t>(s)] = worked;
          progressed = true;
        }
      }
      SHARDSIM_CHECK(progressed, "the pipeline schedule deadlocks");
    }
    return std::make_pair(clock, busy);
  };
  // The estimator plays the schedule over at most SteadyStateMicrobatches micro-batches; past
  // the warm-up it settles into a steady state, extended at the mean rate between two plays far
  // apart (stages of unequal times repeat over several periods).
  const int64_t scheduled = play_every_microbatch ? m : strategies::SteadyStateMicrobatches(p, v, m);
  strategies::TaskLists own_lists;
  strategies::TaskLists& lists = task_lists ? *task_lists : own_lists;
  auto tasks_of = [&](int64_t count) -> const strategies::TaskLists::Lists& { return lists.Get(schedule, p, count, v); };
  const strategies::TaskLists::Lists& played_tasks = tasks_of(scheduled);
  std::vector<const std::vector<strategies::Task>*> program_tasks;
  for (const auto& tasks : played_tasks) program_tasks.push_back(&tasks);
  auto [clock, busy] = play(program_tasks, scheduled);
  if (scheduled < m) {
    const int64_t period = 2 * p, fewer = scheduled / 2 / period * period;
    SHARDSIM_CHECK(fewer > 0 && fewer < scheduled, "the scheduled micro-batches must exceed one period");
    const strategies::TaskLists::Lists& shorter = tasks_of(fewer);
    std::vector<const std::vector<strategies::Task>*> shorter_tasks;
    for (const auto& tasks : shorter) shorter_tasks.push_back(&tasks);
    const auto [clock_fewer, busy_fewer] = play(shorter_tasks, fewer);
    const double periods = static_cast<double>(m - scheduled) / static_cast<double>(scheduled - fewer);
    for (size_t s = 0; s < clock.size(); ++s) {
      clock[s] += periods * (clock[s] - clock_fewer[s]);
      busy[s] += periods * (busy[s] - busy_fewer[s]);
    }
  }

  // Step-level work per stage: gradient reduction (hidden under the last micro-batch's backward
  // when overlapped, except its last bucket), parameter gathers, the optimizer.
  const int64_t devices = plan.mesh.Product();
  std::vector<ExposedByKind> stage_exposed(static_cast<size_t>(p));
  // Micro-batches per direction (DualPipe splits them over two).
  std::vector<int64_t> per_direction(program.layout.paths.size(), 0);
  if (per_direction.size() == 1) {
    per_direction[0] = m;
  } else {
    for (int64_t mb = 0; mb < m; ++mb) ++per_direction[static_cast<size_t>(schedule.DirectionOf(p, mb, m))];
  }
  std::vector<double> stage_compute(static_cast<size_t>(p), 0);
  struct StepCollective {
    const Op* op;
    double seconds, exposed_s, hide_under_s;
  };
  std::vector<std::vector<StepCollective>> step_collectives(static_cast<size_t>(p));
  double executed = 0;
  for (int64_t s = 0; s < p; ++s) {
    const auto& stage = program.stages[static_cast<size_t>(s)];
    double last_backward = 0;
    int64_t layers = 0;
    for (int64_t c = 0; c < v; ++c) {
      const auto& cost = part_costs[static_cast<size_t>(slot(s, c))];
      last_backward += cost[1].total_s + cost[2].total_s;
      for (const auto& [kind, count] : stage.chunks[static_cast<size_t>(c)].layers) layers += count;
    }
    // Every stage runs each (chunk, phase) once per micro-batch of the chunk's direction.
    for (int64_t c = 0; c < v; ++c) {
      const int64_t direction = stage.chunks[static_cast<size_t>(c)].layout.direction;
      const int64_t times = per_direction[static_cast<size_t>(direction)];
      for (const PhaseCost& cost : part_costs[static_cast<size_t>(slot(s, c))]) {
        stage_compute[static_cast<size_t>(s)] += cost.compute_s * static_cast<double>(times);
        executed += cost.flops * static_cast<double>(times);
        stage_exposed[static_cast<size_t>(s)].Add(cost.exposed_s, static_cast<double>(times));
      }
    }
    double tail = 0;
    for (const Op& op : stage.step_ops) {
      if (!op.is_comm()) {
        const double seconds = roofline.Seconds(op);
        tail += seconds;
        stage_compute[static_cast<size_t>(s)] += seconds;
        continue;
      }
      const double seconds = collectives.Seconds(op.collective, op.axes, op.comm_bytes);
      const double exposed = op.overlapped ? std::max(seconds / static_cast<double>(std::max<int64_t>(1, layers)), seconds - last_backward) : seconds;
      step_collectives[static_cast<size_t>(s)].push_back({&op, seconds, exposed, op.overlapped ? last_backward : 0.0});
      tail += exposed;
      stage_exposed[static_cast<size_t>(s)][op] += exposed;
    }
    report.stage_time_s.push_back(clock[static_cast<size_t>(s)] + tail);
  }
  report.critical_stage = std::max_element(report.stage_time_s.begin(), report.stage_time_s.end()) - report.stage_time_s.begin();
  const size_t cs = static_cast<size_t>(report.critical_stage);
  report.step_time_s = report.stage_time_s[cs];
  report.compute_s = stage_compute[cs];
  report.exposed_comm_s = stage_exposed[cs].Named();
  // The critical stage's collectives one by one: per layer program and phase, each occurrence's
  // cost times how often the stage runs it; then the step-level ones.
  {
    const strategies::Stage& stage = program.stages[cs];
    std::array<double, strategies::kLayerKinds> runs{};  // layer-program runs per step
    for (const strategies::Chunk& chunk : stage.chunks) {
      for (const auto& [kind, count] : chunk.layers) {
        runs[static_cast<size_t>(kind)] += static_cast<double>(count) * static_cast<double>(per_direction[static_cast<size_t>(chunk.layout.direction)]);
      }
    }
    for (size_t i = 0; i < layer_costs.size(); ++i) {
      if (runs[i] == 0) continue;
      for (const PhaseCost& cost : layer_costs[i]) {
        for (const PhaseCost::Collective& c : cost.collectives) {
          report.collectives.push_back({c.op->name, strategies::ToString(program.layer_programs[i].kind), c.op->phase, c.op->stream, c.op->collective,
                                        c.op->axes, c.op->comm_bytes, c.seconds, c.exposed_s, c.op->overlapped ? cost.compute_s : 0.0, runs[i],
                                        c.op->overlapped});
        }
      }
    }
    for (const StepCollective& c : step_collectives[cs]) {
      report.collectives.push_back({c.op->name, "step", c.op->phase, c.op->stream, c.op->collective, c.op->axes, c.op->comm_bytes, c.seconds, c.exposed_s,
                                    c.hide_under_s, 1.0, c.op->overlapped});
    }
  }
  report.bubble_s = std::max(0.0, clock[cs] - busy[cs]);
  report.pipeline_s = clock[cs];

  // Hardware FLOPs: what the program executes on every device (recomputation, masked attention
  // blocks of an unfused kernel and redundant work included).
  report.model_flops_per_step = program.model_flops_per_step;
  report.palm_flops_per_step = program.palm_flops_per_step;
  report.hardware_flops_per_step = executed * static_cast<double>(devices / p);
  const double capacity = report.step_time_s * static_cast<double>(devices) * report.peak_flop_per_s;
  report.mfu = report.model_flops_per_step / capacity;
  report.mfu_palm = report.palm_flops_per_step / capacity;
  report.hfu = report.hardware_flops_per_step / capacity;
  report.tokens_per_s = static_cast<double>(plan.global_batch_size * plan.seq_len) / report.step_time_s;

  report.memory = strategies::EstimateMemory(program);
  report.hbm_bytes = static_cast<double>(cluster.chip.hbm_bytes);
  report.fits = report.memory.peak.total() <= report.hbm_bytes;

  // What limits the step: the largest of compute, each exposed collective, and the bubble.
  std::string limit = "compute";
  double largest = report.compute_s;
  for (const auto& [key, seconds] : report.exposed_comm_s) {
    if (seconds > largest) largest = seconds, limit = "exposed " + key + " communication";
  }
  if (report.bubble_s > largest) limit = "pipeline bubble";
  report.why = limit + (report.fits ? "" : "; does not fit in memory");
  return report;
}

}  // namespace shardsim::sim
