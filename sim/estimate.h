// sim::Estimate: the analytic prediction of one training step from its StepProgram: each op
// costed alone (sim/op_cost.h: roofline compute, analytic collectives, a phase's overlapped
// collectives hidden under its compute), the pipeline schedule played over the per-stage task
// orders (sim/schedule_player.h), and the summary: step time, MFU, memory, what limits it.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/cluster_spec.h"
#include "sim/op_cost.h"
#include "strategies/memory_model.h"
#include "strategies/schedule.h"
#include "strategies/step_program.h"

namespace shardsim::sim {

// One collective of the critical stage as the estimate costed it (explanations read these).
struct CollectiveCost {
  std::string op;     // the program op's name
  std::string layer;  // its layer program (dense, moe, embedding, head), or "step" for step-level ops
  strategies::Phase phase = strategies::Phase::kForward;
  strategies::Stream stream = strategies::Stream::kData;
  CollectiveOp collective = CollectiveOp::kAllReduce;
  std::vector<std::string> axes;
  double bytes = 0;         // per occurrence, nccl-tests size
  double seconds = 0;       // one occurrence alone
  double exposed_s = 0;     // one occurrence: what its phase's compute (step ops: the last backward) does not hide
  double hide_under_s = 0;  // the compute it may hide under (0 when not overlapped)
  double per_step = 0;      // occurrences per step on the critical stage
  bool overlapped = false;
  std::string hides_under;  // the product it hides under (strategies::OverlapPartner), "" for its phase's compute
  bool sixteen_bit = false;  // of the layer kind's 16-bit twin (decoder layers an fp8 plan keeps at 16 bits)
};

struct StepReport {
  double step_time_s = 0;
  double tokens_per_s = 0;
  double mfu = 0;       // model FLOPs (6N + causal attention, no recomputation) / (step time x devices x peak)
  double mfu_palm = 0;  // the same with PaLM's attention term (masked blocks counted): can pass 1 at long context
  double hfu = 0;       // hardware FLOPs (everything executed) / the same
  double model_flops_per_step = 0;
  double palm_flops_per_step = 0;
  double hardware_flops_per_step = 0;
  double peak_flop_per_s = 0;  // per device, for the plan's dtype
  bool fits = false;      // hbm_fits and host_fits
  bool hbm_fits = false;  // the memory model's peak per device within hbm_bytes
  double hbm_bytes = 0;
  strategies::MemoryReport memory;
  double compute_s = 0;                         // on the critical stage
  double compute_borrowed_s = 0;                // of it, lost to collectives' kernels on its units (PhaseCost::borrowed_s)
  double bubble_s = 0;                          // idle time of the critical stage in the pipeline
  double pipeline_s = 0;                        // when the critical stage's last task ends
  // Host memory per device the cluster spec gives (0: none given) and whether the offloaded
  // activations (MemoryBreakdown::host, the most on any stage) fit in it; `fits` needs both.
  double host_bytes = 0;
  bool host_fits = true;
  std::map<std::string, double> exposed_comm_s;  // "tensor all-reduce", "data reduce-scatter", ...
  std::vector<CollectiveCost> collectives;      // the critical stage's collectives, each op once
  int64_t critical_stage = 0;
  std::vector<double> stage_time_s;
  // The stage with the most work (compute and exposed communication) where that is not the
  // critical stage and exceeds its work by over 1% of the step: the critical stage's bubble holds
  // its waiting for that one (an MoE stage's all-to-alls, the head's stage). -1 else.
  int64_t heaviest_stage = -1;
  int64_t heaviest_ties = 0;  // other stages within 0.1% of the step of its work (the MoE stages alike)
  double heaviest_compute_s = 0;
  std::map<std::string, double> heaviest_exposed_comm_s;
  std::string why;  // what limits the step, in words
};

// The step's largest part, of compute, each exposed collective kind and the bubble (reads
// compute_s, exposed_comm_s and bubble_s): what it is and its seconds.
struct StepPart {
  std::string what;
  double seconds = 0;
};
StepPart LargestPart(const StepReport& report);
// Sets heaviest_stage and heaviest_ties from each stage's work (compute and exposed seconds; the
// critical stage's too), by the rule heaviest_stage states, and returns the heaviest stage's index
// (the critical one's where none is named): the caller sets its parts, the one stage named.
size_t NameHeaviestStage(StepReport& report, const std::vector<double>& work_s);
// What limits the step, in words: its largest part (with its share of step_time_s, "(the step's
// largest part: 43% of it)", where `with_share`), and whether it fits (reads fits too).
std::string WhatLimits(const StepReport& report, bool with_share = false);
// An exposed kind's name for people ("data all-gather" -> "fsdp all-gather"): the stream's word
// replaced by the axes that kind's collectives in `report` run over; the kind when it has none.
// The expert stream's keep its name, with the axes after it where they are not the expert axis
// alone ("expert all-to-all over context/expert", "expert all-reduce over tensor"); the context
// stream's say K/V ("context K/V all-gather"), or Mamba for the Mamba-2 mixers' all-to-alls
// ("Mamba all-to-all over context").
std::string ExposedLabel(const StepReport& report, const std::string& kind);

// `program` as `cluster` runs it: its overlapped collectives blocking where a calibration measured
// that the cluster's collectives do not move under compute (CollectivesOverlapCompute); `copy`
// holds the changed program then. Estimate and Simulate run every program through this.
const strategies::StepProgram& ProgramOnCluster(const strategies::StepProgram& program, const ClusterSpec& cluster,
                                                std::optional<strategies::StepProgram>& copy);

// Predicts one step. `collectives` must be built for the same cluster and plan. The schedule is
// played over at most strategies::SteadyStateMicrobatches micro-batches and its steady state
// extended to all of them, unless `play_every_microbatch` (for tests of that shortcut).
// `task_lists`, when given, keeps the schedule's task lists for the next plans of the same
// pipeline shape. `memory`, when given, is strategies::EstimateMemory(program) already computed.
StepReport Estimate(const strategies::StepProgram& program, const ClusterSpec& cluster, AxisCollectives& collectives,
                    bool play_every_microbatch = false, strategies::TaskLists* task_lists = nullptr,
                    const strategies::MemoryReport* memory = nullptr);

}  // namespace shardsim::sim
