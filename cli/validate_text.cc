#include "cli/validate_text.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "cli/plan_text.h"
#include "cli/text_table.h"
#include "core/plan_json.h"
#include "core/units.h"

namespace shardsim::cli {
namespace {

using nlohmann::json;

std::string Error(double predicted, double measured) { return measured > 0 ? FormatPercent(predicted / measured - 1) : "-"; }

constexpr size_t kWorstOps = 8;

}  // namespace

std::string MemoryComparability(const std::string& category, const PlanSpec& plan) {
  const bool sharded_params = plan.mesh.fsdp > 1 || plan.zero_stage >= 3;
  if (category == "params" && sharded_params) return "not comparable: the runtime holds the whole parameter buffer under FSDP / ZeRO-3";
  if (category == "grads" && (sharded_params || plan.zero_stage >= 2)) {
    return "not comparable: the runtime keeps the full gradient buffer beside its shard under ZeRO-2/3 and FSDP";
  }
  if (category == "buffers") return "not comparable: the model counts logits and FSDP gathers, the runtime also each layer's backward scratch";
  return "";
}

void PrintValidate(std::ostream& out, const ValidateContext& c, const validation::Comparison& r, const validation::MeasuredRun& m) {
  out << "Validation: " << c.model.name << ", " << DescribeMesh(c.plan.mesh) << ScheduleInHeader(c.plan) << ", ZeRO " << c.plan.zero_stage
      << " on " << c.cluster.name << " (" << c.cluster_path;
  if (!c.cluster.calibration.empty()) out << ", measured " << c.cluster.calibration.measured_at;
  out << ")\n";
  out << "  run         " << m.ranks << " ranks, " << m.step_times_s.size() << " steps (median step and op diff over the " << r.steps_compared
      << " steps after the first); " << (c.time_faithful ? "time-faithful: one rank per core" : "NOT time-faithful: ranks time-share cores") << "\n";
  for (const std::string& n : c.notes) out << "  note        " << n << "\n";
  out << "\nTime per step (rank 0 measured; estimate and simulation on the calibrated cluster):\n";
  TextTable t({"category", "measured", "estimated", "error", "simulated", "error"});
  for (const validation::CategoryRow& row : r.categories) {
    if (!row.predicted) {
      t.AddRow({row.category, FormatSeconds(row.measured_s), "-", "-", "-", "-"});
      continue;
    }
    t.AddRow({row.category, FormatSeconds(row.measured_s), FormatSeconds(row.estimated_s), Error(row.estimated_s, row.measured_s),
              FormatSeconds(row.simulated_s), Error(row.simulated_s, row.measured_s)});
  }
  t.Print(out, "  ");
  out << "  (error: predicted / measured - 1, negative where the prediction is faster; other: the runtime's bookkeeping between\n"
      << "  ops, which no prediction has; the step's error is the figure that counts)\n";
  out << "\nWorst ops (per step per rank; same keys in the trace and the program):\n";
  TextTable ops({"op", "category", "spans", "measured", "predicted", "difference"});
  for (size_t i = 0; i < r.ops.size() && i < kWorstOps; ++i) {
    const validation::OpRow& o = r.ops[i];
    char spans[32];
    std::snprintf(spans, sizeof spans, "%.4g", o.count);
    ops.AddRow({o.op, o.category, spans, FormatSeconds(o.measured_s), FormatSeconds(o.predicted_s),
                (o.predicted_s >= o.measured_s ? "+" : "-") + FormatSeconds(std::abs(o.predicted_s - o.measured_s)) + " (" +
                    Error(o.predicted_s, o.measured_s) + ")"});
  }
  ops.Print(out, "  ");
  if (r.memory.empty()) {
    out << "\nMemory: the runtime reported no accounting.\n";
  } else {
    out << "\nMemory per rank (the runtime's accounting of what it allocates, peak per category, against the memory model):\n";
    TextTable mem({"rank", "stage", "category", "measured", "predicted", "error", "note"});
    bool routed = false;
    for (const validation::MemoryRow& row : r.memory) {
      const std::string comparability = MemoryComparability(row.category, c.plan);
      std::string note = comparability;
      if (note.empty() && row.routing_bytes != 0) {
        // Dropless MoE: the model at the routing that happened, the balanced routing's beside it.
        routed = true;
        note = "routed: " + std::to_string(row.rows_received) + " rows in, " + std::to_string(row.rows_sent) + " out; balanced " +
               FormatBinaryBytes(row.predicted_bytes - row.routing_bytes) + " (" + Error(row.predicted_bytes - row.routing_bytes, row.measured_bytes) + ")";
      }
      mem.AddRow({std::to_string(row.rank), std::to_string(row.stage), row.category, FormatBinaryBytes(row.measured_bytes), FormatBinaryBytes(row.predicted_bytes),
                  comparability.empty() ? Error(row.predicted_bytes, row.measured_bytes) : "-", note});
    }
    mem.Print(out, "  ");
    if (routed) {
      out << "  (routed: dropless MoE sends a rank's experts more or fewer token copies than its tokens route; at the activations'\n"
          << "  peak, the rows in to its experts and out from its tokens over its MoE layers and micro-batches in flight. The\n"
          << "  prediction is the memory model at that routing; balanced: the model's own, at balanced routing)\n";
    }
  }
  if (!c.work_dir_removed) out << "\n  files       " << c.work_dir << " (run.json, trace.json, and cluster.json when calibrated now)\n";
}

json ValidateJson(const ValidateContext& c, const validation::Comparison& r, const validation::MeasuredRun& m) {
  json j = validation::ComparisonJson(r);
  j["model"] = c.model.name;
  j["plan"] = PlanToJson(c.plan);
  j["cluster"] = c.cluster.name;
  j["cluster_file"] = c.cluster_path;
  if (!c.cluster.calibration.empty()) j["calibrated_at"] = c.cluster.calibration.measured_at;
  j["ranks"] = m.ranks;
  j["time_faithful"] = c.time_faithful;
  j["step_times_s"] = m.step_times_s;
  if (m.expert_load_imbalance > 0) j["expert_load_imbalance"] = m.expert_load_imbalance;
  j["notes"] = c.notes;
  for (json& row : j["memory"]) row["comparable"] = MemoryComparability(row["category"].get<std::string>(), c.plan).empty();
  if (!c.work_dir_removed) j["files"] = c.work_dir;
  return j;
}

}  // namespace shardsim::cli
