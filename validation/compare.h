// Measured against predicted, for one plan: what `shardsim-runtime train --json --trace`
// reported, set beside the estimate and the simulation of the same step program on the same
// (calibrated) cluster, per category of time, per op (the trace's keys are the program's), and
// memory per rank by category. No MPI here: the CLI reads the runtime's files.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/cluster_spec.h"
#include "sim/estimate.h"
#include "sim/op_cost.h"
#include "strategies/step_program.h"

namespace shardsim::validation {

struct MeasuredSpan {
  int rank = 0;
  std::string key, category;
  double start_s = 0;  // since the rank's tracer started
  double duration_s = 0;
  int64_t step = 0;
};

// One rank's peak bytes by category (the runtime's own accounting of what it allocates).
struct MeasuredMemory {
  int rank = 0;
  int64_t stage = 0;
  std::map<std::string, double> bytes;  // params, grads, optimizer, activations, buffers
  // MoE: the routed rows the activations held at their peak (received by this rank's experts,
  // sent by its tokens); -1 where the runtime reported none.
  int64_t rows_received = -1, rows_sent = -1;
};

struct MeasuredRun {
  double step_time_s = 0;                   // median over the steps
  std::vector<double> step_times_s;
  std::map<std::string, double> category_s;  // mean seconds per step after the first, rank 0
  std::vector<MeasuredSpan> spans;           // every rank's op spans (the trace)
  std::vector<MeasuredMemory> memory;        // per rank; empty when the runtime did not report it
  int ranks = 0;
  // MoE with expert parallelism: the busiest expert rank's routed rows over the group's mean,
  // averaged over the forward passes after the first step (runtime Trainer::ExpertLoadImbalance);
  // 0 where the run did not report it.
  double expert_load_imbalance = 0;
};
// Reads the runtime's --json report and its --trace file; throws InputError naming `where`.
MeasuredRun ReadMeasuredRun(const nlohmann::json& report, const nlohmann::json& trace, const std::string& where);

struct CategoryRow {
  std::string category;  // compute, optimizer, tensor, context, expert, pipeline, data, other, step
  double measured_s = 0, estimated_s = 0, simulated_s = 0;
  bool predicted = true;  // false where no prediction exists ("other": the runtime's bookkeeping)
};
struct OpRow {
  std::string op;        // the program op's name
  std::string category;  // the trace's category
  double count = 0;      // spans per step per rank
  double measured_s = 0, predicted_s = 0;  // per step per rank
};
struct MemoryRow {
  int rank = 0;
  int64_t stage = 0;
  std::string category;
  double measured_bytes = 0, predicted_bytes = 0;
  // MoE activations (tensor 1, capacity factor 1): predicted_bytes is the model at the measured
  // routing, the balanced routing's prediction plus routing_bytes for the rows received beyond
  // those sent (or minus, fewer). Rows: token copies routed to this rank's experts / by its own
  // tokens, summed over the stage's MoE layers and micro-batches in flight at the peak.
  double routing_bytes = 0;
  int64_t rows_received = -1, rows_sent = -1;
};
struct Comparison {
  std::vector<CategoryRow> categories;  // the step last
  std::vector<OpRow> ops;               // largest |measured - predicted| first
  std::vector<MemoryRow> memory;
  int64_t steps_compared = 0;
};

// The categories of time a StepReport predicts for its critical stage, named as the runtime's
// trace names them (exposed collectives by stream; the bubble counts as pipeline).
std::map<std::string, double> PredictedCategories(const sim::StepReport& report, const strategies::StepProgram& program, const sim::Roofline& roofline);

// Memory per rank by category, measured against the memory model for the rank's stage (MoE
// activations at the routing the rank reported: MemoryRow::routing_bytes).
std::vector<MemoryRow> CompareMemory(const MeasuredRun& measured, const strategies::StepProgram& program);

// The plan whose program the time predictions cost: the measured one at the routing that happened.
// The runtime routes dropless (whatever capacity factor the plan names), so a run that loaded
// the busiest expert rank with f times the mean rows is costed with a capacity factor of f (1
// below half a percent over): every rank of the group waits for that rank at the all-to-alls, as
// a padded capacity makes each rank compute f times the balanced rows. Unchanged where the run
// reported no load. Appends what it changed to `notes`.
PlanSpec AtMeasuredRouting(PlanSpec plan, const MeasuredRun& measured, std::vector<std::string>& notes);

// `timed`: the program of AtMeasuredRouting's plan, which the estimate and simulation ran (the
// step and its categories: rank 0's, which waits for the busiest rank); `balanced`: the plan's
// own, which the ops (averaged over ranks: the mean load) and memory (at each rank's reported
// routing) are set beside.
Comparison Compare(const MeasuredRun& measured, const strategies::StepProgram& timed, const strategies::StepProgram& balanced,
                   const ClusterSpec& cluster, sim::AxisCollectives& collectives, const sim::StepReport& estimate, const sim::StepReport& simulated);

nlohmann::json ComparisonJson(const Comparison& comparison);

}  // namespace shardsim::validation
