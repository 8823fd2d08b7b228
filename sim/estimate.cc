#include "sim/estimate.h"

#include <algorithm>
#include <array>

#include "core/error.h"
#include "core/units.h"
#include "sim/schedule_player.h"
#include "strategies/schedule.h"

namespace shardsim::sim {

using strategies::Op;
using strategies::StepProgram;

std::string ExposedLabel(const StepReport& report, const std::string& kind) {
  std::vector<bool> used(kMeshAxisCount, false);
  bool any = false, mamba = true;  // whether the kind's collectives are all the Mamba-2 mixers' (context parallelism's all-to-alls)
  for (const CollectiveCost& c : report.collectives) {
    if (KindName(c.stream, c.collective) != kind) continue;
    for (const std::string& axis : c.axes) used[static_cast<size_t>(AxisFacts(axis).axis)] = true;
    any = true;
    mamba = mamba && c.layer == strategies::ToString(strategies::LayerKind::kMamba);
  }
  mamba = mamba && any;
  std::string axes;
  for (const MeshAxisFacts& axis : kMeshAxes) {
    if (used[static_cast<size_t>(axis.axis)]) axes += (axes.empty() ? "" : "/") + std::string(axis.name);
  }
  const size_t space = kind.find(' ');
  if (axes.empty() || space == std::string::npos) return kind;
  // The expert stream's collectives over other axes (experts folded over context, the router's
  // counts reduced over tensor) keep the stream's name, so that they are not read as that axis's
  // own (the tensor all-reduces of the layers).
  const MeshAxisFacts* stream = FindMeshAxis(kind.substr(0, space));
  if (stream && stream->axis == MeshAxis::kExpert) return axes == stream->name ? kind : kind + " over " + axes;
  // The context stream carries the attention's K/V (and dK/dV), not parameters gathered over the
  // context ranks (those are the data stream's, over "context" too), and the Mamba-2 mixers'
  // all-to-alls between tokens and heads, named as the expert stream's are.
  if (stream && stream->axis == MeshAxis::kContext) return mamba ? "Mamba" + kind.substr(space) + " over " + axes : axes + " K/V" + kind.substr(space);
  return axes + kind.substr(space);
}

StepPart LargestPart(const StepReport& report) {
  StepPart part{"compute", report.compute_s};
  for (const auto& [key, seconds] : report.exposed_comm_s) {
    if (seconds > part.seconds) part = {"exposed " + ExposedLabel(report, key) + " communication", seconds};
  }
  if (report.bubble_s > part.seconds) part = {"pipeline bubble", report.bubble_s};
  return part;
}

size_t NameHeaviestStage(StepReport& report, const std::vector<double>& work_s) {
  const size_t critical = static_cast<size_t>(report.critical_stage);
  if (work_s.empty() || critical >= work_s.size()) return critical;
  const size_t heaviest = static_cast<size_t>(std::max_element(work_s.begin(), work_s.end()) - work_s.begin());
  if (heaviest == critical || work_s[heaviest] - work_s[critical] <= 0.01 * report.step_time_s) return critical;
  report.heaviest_stage = static_cast<int64_t>(heaviest);
  for (size_t s = 0; s < work_s.size(); ++s) {
    if (s != heaviest && work_s[s] >= work_s[heaviest] - 0.001 * report.step_time_s) ++report.heaviest_ties;
  }
  return heaviest;
}

std::string WhatLimits(const StepReport& report, bool with_share) {
  const StepPart part = LargestPart(report);
  const std::string share = with_share && report.step_time_s > 0
                                ? " (the step's largest part: " + FormatPercent(part.seconds / report.step_time_s) + " of it)"
                                : "";
  return part.what + share +
         (report.fits ? "" : report.host_fits ? "; does not fit in memory" : "; does not fit in host memory (offloaded activations)");
}

const StepProgram& ProgramOnCluster(const StepProgram& program, const ClusterSpec& cluster, std::optional<StepProgram>& copy) {
  // Simulate hands Estimate a program already made blocking: no second copy.
  if (CollectivesOverlapCompute(cluster.calibration) || !strategies::OverlapsCollectives(program)) return program;
  copy = strategies::WithBlockingCollectives(program);
  return *copy;
}

StepReport Estimate(const StepProgram& given, const ClusterSpec& cluster, AxisCollectives& collectives, bool play_every_microbatch,
                    strategies::TaskLists* task_lists, const strategies::MemoryReport* memory) {
  std::optional<StepProgram> blocking;
  const StepProgram& program = ProgramOnCluster(given, cluster, blocking);
  const PlanSpec& plan = program.plan;
  StepReport report;
  const Roofline roofline = RooflineOf(cluster, plan.dtype, static_cast<double>(program.tokens_per_microbatch), Fp8RecipeOf(plan),
                                        AttentionKernelOf(plan));
  report.peak_flop_per_s = roofline.peak_flop_per_s;

  const ProgramCosts costs = CostProgram(program, roofline, collectives);
  const auto& layer_costs = costs.layers;
  const auto& part_costs = costs.slots;
  const int64_t p = plan.mesh.pipeline, m = program.microbatches;
  const int64_t v = costs.chunks, slots = p * v;
  auto slot = [&costs](int64_t s, int64_t c) { return costs.Slot(s, c); };
  std::vector<double> duration(static_cast<size_t>(3 * slots));
  for (int64_t i = 0; i < slots; ++i) {
    for (int ph = 0; ph < 3; ++ph) duration[static_cast<size_t>(3 * i + ph)] = part_costs[static_cast<size_t>(i)][static_cast<size_t>(ph)].total_s;
  }
  const double p2p = p > 1 ? collectives.Seconds(CollectiveOp::kPermute, {"pipeline"}, program.pipeline_send.comm_bytes) : 0;
  auto [clock, busy] = PlaySchedule(program, duration, p2p, play_every_microbatch, task_lists);

  // Step-level work per stage: gradient reduction (hidden under the last micro-batch's backward
  // when overlapped, except its last bucket), parameter gathers, the optimizer.
  const int64_t devices = plan.mesh.Product();
  std::vector<ExposedByKind> stage_exposed(static_cast<size_t>(p));
  // Micro-batches per direction (DualPipe splits them over two).
  const std::vector<int64_t> per_direction = strategies::MicrobatchesPerDirection(program, m);
  std::vector<double> stage_compute(static_cast<size_t>(p), 0), stage_borrowed(static_cast<size_t>(p), 0);
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
      const auto& cost = part_costs[slot(s, c)];
      last_backward += cost[1].total_s + cost[2].total_s;
      for (const auto& [kind, count, sixteen_bit] : stage.chunks[static_cast<size_t>(c)].layers) layers += count;
    }
    // Every stage runs each (chunk, phase) once per micro-batch of the chunk's direction.
    for (int64_t c = 0; c < v; ++c) {
      const int64_t direction = stage.chunks[static_cast<size_t>(c)].layout.direction;
      const int64_t times = per_direction[static_cast<size_t>(direction)];
      for (const PhaseCost& cost : part_costs[slot(s, c)]) {
        stage_compute[static_cast<size_t>(s)] += cost.compute_s * static_cast<double>(times);
        stage_borrowed[static_cast<size_t>(s)] += cost.borrowed_s * static_cast<double>(times);
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
      const double seconds = collectives.Seconds(op);
      // Hidden under the last backward, its kernel's units slow that backward (OverlappedStepReduction).
      const StepReduction reduction = op.overlapped ? OverlappedStepReduction(seconds, layers, last_backward, collectives.Units(op), roofline.units)
                                                    : StepReduction{.exposed_s = seconds};
      const double exposed = reduction.exposed_s;
      step_collectives[static_cast<size_t>(s)].push_back({&op, seconds, exposed, op.overlapped ? last_backward : 0.0});
      stage_compute[static_cast<size_t>(s)] += reduction.extra_s;
      stage_borrowed[static_cast<size_t>(s)] += reduction.extra_s;
      tail += exposed + reduction.extra_s;
      stage_exposed[static_cast<size_t>(s)][op] += exposed;
    }
    report.stage_time_s.push_back(clock[static_cast<size_t>(s)] + tail);
  }
  report.critical_stage = std::max_element(report.stage_time_s.begin(), report.stage_time_s.end()) - report.stage_time_s.begin();
  const size_t cs = static_cast<size_t>(report.critical_stage);
  report.step_time_s = report.stage_time_s[cs];
  report.compute_s = stage_compute[cs];
  report.compute_borrowed_s = stage_borrowed[cs];
  report.exposed_comm_s = stage_exposed[cs].Named();
  // The critical stage's collectives one by one: per layer program and phase, each occurrence's
  // cost times how often the stage runs it; then the step-level ones.
  {
    const strategies::Stage& stage = program.stages[cs];
    // Layer-program runs per step, and of them the offloaded layers' (their host copies, the
    // other collectives costing the same in either).
    std::array<double, strategies::kLayerPrograms> runs{}, offloaded_runs{};
    for (const strategies::Chunk& chunk : stage.chunks) {
      const double times = static_cast<double>(per_direction[static_cast<size_t>(chunk.layout.direction)]);
      const std::vector<int64_t> offloaded = strategies::OffloadedPerRun(plan, chunk);
      for (size_t run = 0; run < chunk.layers.size(); ++run) {
        const strategies::LayerRun& r = chunk.layers[run];
        const int64_t off = offloaded[run];
        runs[r.program()] += static_cast<double>(r.count) * times;
        offloaded_runs[r.program()] += static_cast<double>(off) * times;
      }
    }
    auto list = [&](const std::vector<std::array<PhaseCost, 3>>& kind_costs, bool host, const std::array<double, strategies::kLayerPrograms>& kind_runs) {
      for (size_t i = 0; i < kind_costs.size(); ++i) {
        if (kind_runs[i] == 0) continue;
        for (const PhaseCost& cost : kind_costs[i]) {
          for (const PhaseCost::Collective& c : cost.collectives) {
            if ((c.op->stream == strategies::Stream::kHost) != host) continue;
            report.collectives.push_back({c.op->name, strategies::ToString(program.layer_programs[i].kind), c.op->phase, c.op->stream, c.op->collective,
                                          c.op->axes, c.op->comm_bytes, c.seconds, c.exposed_s, c.hide_under_s, kind_runs[i],
                                          c.op->overlapped,
                                          c.partner >= 0 ? program.layer_programs[i].ops[static_cast<size_t>(c.partner)].name : std::string(),
                                          program.layer_programs[i].sixteen_bit});
          }
        }
      }
    };
    list(layer_costs, false, runs);
    if (!costs.offloaded_layers.empty()) list(costs.offloaded_layers, true, offloaded_runs);
    for (const StepCollective& c : step_collectives[cs]) {
      report.collectives.push_back({c.op->name, "step", c.op->phase, c.op->stream, c.op->collective, c.op->axes, c.op->comm_bytes, c.seconds, c.exposed_s,
                                    c.hide_under_s, 1.0, c.op->overlapped, std::string()});
    }
  }
  report.bubble_s = std::max(0.0, clock[cs] - busy[cs]);
  report.pipeline_s = clock[cs];
  {
    std::vector<double> work(static_cast<size_t>(p));
    for (size_t s = 0; s < work.size(); ++s) work[s] = stage_compute[s] + stage_exposed[s].Total();
    const size_t heaviest = NameHeaviestStage(report, work);
    if (report.heaviest_stage >= 0) {
      report.heaviest_compute_s = stage_compute[heaviest];
      report.heaviest_exposed_comm_s = stage_exposed[heaviest].Named();
    }
  }

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

  report.memory = memory ? *memory : strategies::EstimateMemory(program, task_lists, cluster.chip.fp8_any_layout);
  report.hbm_bytes = static_cast<double>(cluster.chip.hbm_bytes);
  report.host_bytes = static_cast<double>(cluster.topology.host_bytes_per_device);
  double host = 0;
  for (const strategies::MemoryBreakdown& b : report.memory.stages) host = std::max(host, b.host);
  report.host_fits = report.host_bytes <= 0 || host <= report.host_bytes;
  report.hbm_fits = report.memory.peak.total() <= report.hbm_bytes;
  report.fits = report.hbm_fits && report.host_fits;

  report.why = WhatLimits(report);
  return report;
}

}  // namespace shardsim::sim
