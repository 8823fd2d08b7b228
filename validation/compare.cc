#include "validation/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "strategies/memory_model.h"
#include "strategies/op_keys.h"
#include "strategies/op_names.h"

namespace shardsim::validation {
namespace {

using nlohmann::json;
using strategies::Op;

double Number(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_number()) throw InputError(where + "/" + key, "missing or not a number", "the runtime's --json report");
  return j[key].get<double>();
}

// The trace category of a stream's collectives ("fsdp" gathers count as data, as the runtime does).
std::string CategoryOfKind(const std::string& kind) {
  const std::string stream = kind.substr(0, kind.find(' '));
  return stream == "fsdp" ? "data" : stream;
}

}  // namespace

MeasuredRun ReadMeasuredRun(const json& report, const json& trace, const std::string& where) {
  MeasuredRun run;
  run.step_time_s = Number(report, "step_time_s", where);
  if (report.contains("step_times_s")) run.step_times_s = report["step_times_s"].get<std::vector<double>>();
  run.ranks = static_cast<int>(Number(report, "ranks", where));
  if (report.contains("expert_load_imbalance")) run.expert_load_imbalance = Number(report, "expert_load_imbalance", where);
  if (report.contains("category_s")) run.category_s = report["category_s"].get<std::map<std::string, double>>();
  if (report.contains("memory_bytes")) {
    for (const json& r : report["memory_bytes"]) {
      MeasuredMemory m;
      m.rank = r.value("rank", 0);
      m.stage = r.value("stage", int64_t{0});
      for (const char* c : {"params", "grads", "optimizer", "activations", "buffers"}) {
        if (r.contains(c)) m.bytes[c] = r[c].get<double>();
      }
      if (r.contains("expert_rows_at_activation_peak")) {
        m.rows_received = r["expert_rows_at_activation_peak"].value("received", int64_t{-1});
        m.rows_sent = r["expert_rows_at_activation_peak"].value("sent", int64_t{-1});
      }
      run.memory.push_back(std::move(m));
    }
  }
  if (!trace.contains("traceEvents") || !trace["traceEvents"].is_array()) {
    throw InputError(where + " trace", "has no traceEvents", "the runtime's --trace file (Chrome trace JSON)");
  }
  for (const json& e : trace["traceEvents"]) {
    if (e.value("ph", "") != "X" || !e.contains("args") || !e["args"].contains("key")) continue;
    MeasuredSpan s;
    s.rank = e.value("tid", 0);  // one track per rank (runtime/trace.h)
    s.key = e["args"]["key"].get<std::string>();
    s.category = e.value("cat", "");
    s.start_s = e.value("ts", 0.0) * 1e-6;
    s.duration_s = e.value("dur", 0.0) * 1e-6;
    s.step = e["args"].value("step", int64_t{0});
    run.spans.push_back(std::move(s));
  }
  return run;
}

std::map<std::string, double> PredictedCategories(const sim::StepReport& report, const strategies::StepProgram& program, const sim::Roofline& roofline) {
  std::map<std::string, double> c;
  double optimizer = 0;
  for (const Op& op : program.stages[static_cast<size_t>(report.critical_stage)].step_ops) {
    if (!op.is_comm() && op.name == strategies::ops::kOptimizer) optimizer += roofline.Seconds(op);
  }
  c["compute"] = report.compute_s - optimizer;
  c["optimizer"] = optimizer;
  for (const auto& [kind, seconds] : report.exposed_comm_s) c[CategoryOfKind(kind)] += seconds;
  c["pipeline"] += report.bubble_s;
  return c;
}

PlanSpec AtMeasuredRouting(PlanSpec plan, const MeasuredRun& measured, std::vector<std::string>& notes) {
  constexpr double kBalanced = 1.005;  // below half a percent: balanced, as the program costs it
  if (measured.expert_load_imbalance <= 0) return plan;
  const double load = measured.expert_load_imbalance < kBalanced ? 1.0 : measured.expert_load_imbalance;
  if (load == plan.ep_capacity_factor) return plan;
  char text[320];
  std::snprintf(text, sizeof text,
                "expert routing: the busiest expert rank received %.2fx the mean rows (over the forward passes after the first step; the "
                "runtime routes dropless); estimate and simulation cost a capacity factor of %.2f (the plan's: %.2f), as every rank waits "
                "for that one",
                measured.expert_load_imbalance, load, plan.ep_capacity_factor);
  notes.push_back(text);
  plan.ep_capacity_factor = load;
  return plan;
}

Comparison Compare(const MeasuredRun& measured, const strategies::StepProgram& program, const strategies::StepProgram& balanced,
                   const ClusterSpec& cluster, sim::AxisCollectives& collectives, const sim::StepReport& estimate, const sim::StepReport& simulated) {
  Comparison out;
  const sim::Roofline roofline = sim::RooflineOf(cluster, program.plan.dtype, static_cast<double>(program.tokens_per_microbatch), Fp8RecipeOf(program.plan),
                                                  AttentionKernelOf(program.plan));
  // Categories.
  const auto est = PredictedCategories(estimate, program, roofline), simc = PredictedCategories(simulated, program, roofline);
  std::set<std::string> names;
  for (const auto& [k, v] : measured.category_s) names.insert(k);
  for (const auto& [k, v] : est) names.insert(k);
  for (const char* name : {"compute", "optimizer", "tensor", "context", "expert", "pipeline", "data", "other"}) {
    const std::string n = name;
    if (!names.count(n)) continue;
    CategoryRow row{n, measured.category_s.count(n) ? measured.category_s.at(n) : 0.0, est.count(n) ? est.at(n) : 0.0,
                    simc.count(n) ? simc.at(n) : 0.0, n != "other"};
    constexpr double kNothing_s = 1e-9;  // below a nanosecond everywhere: rounding, not time
    if (row.measured_s < kNothing_s && row.estimated_s < kNothing_s && row.simulated_s < kNothing_s) continue;
    out.categories.push_back(row);
  }
  out.categories.push_back({"step", measured.step_time_s, estimate.step_time_s, simulated.step_time_s, true});

  // Ops: the spans of every step but the first (warm-up) when there are several, averaged over
  // ranks, so against the balanced program (each rank's mean load), not the busiest rank's.
  int64_t last_step = 0;
  for (const MeasuredSpan& s : measured.spans) last_step = std::max(last_step, s.step);
  const int64_t first = last_step > 0 ? 1 : 0;
  out.steps_compared = last_step - first + 1;
  std::map<int64_t, std::map<std::string, Op>> stage_ops;
  auto op_of = [&](const std::string& key) -> const Op* {
    const std::vector<std::string> parts = strategies::SplitOpKey(key);
    if (parts.size() != 4) return nullptr;
    char* end = nullptr;
    const int64_t stage = std::strtoll(parts[0].c_str(), &end, 10);
    if (end == parts[0].c_str() || *end != '\0') return nullptr;
    if (stage < 0 || stage >= static_cast<int64_t>(balanced.stages.size())) return nullptr;
    auto& ops = stage_ops[stage];
    if (ops.empty()) {
      for (strategies::KeyedOp& k : strategies::StageOps(balanced, stage)) ops.emplace(k.key, k.op);
    }
    const auto it = ops.find(key);
    return it == ops.end() ? nullptr : &it->second;
  };
  std::map<std::string, OpRow> rows;
  std::set<std::tuple<int, int64_t, std::string>> counted;  // (rank, step, key): predicted once
  for (const MeasuredSpan& s : measured.spans) {
    if (s.step < first) continue;
    const Op* op = op_of(s.key);
    if (op == nullptr) continue;
    OpRow& row = rows[op->name];
    row.op = op->name;
    row.category = s.category;
    row.measured_s += s.duration_s;
    row.count += 1;
    if (counted.insert({s.rank, s.step, s.key}).second) {
      row.predicted_s += op->is_comm() ? collectives.Seconds(*op) : roofline.Seconds(*op);
    }
  }
  const double per = static_cast<double>(std::max(1, measured.ranks) * out.steps_compared);
  for (auto& [name, row] : rows) {
    row.measured_s /= per;
    row.predicted_s /= per;
    row.count /= per;
    out.ops.push_back(row);
  }
  std::sort(out.ops.begin(), out.ops.end(),
            [](const OpRow& a, const OpRow& b) { return std::abs(a.measured_s - a.predicted_s) > std::abs(b.measured_s - b.predicted_s); });

  out.memory = CompareMemory(measured, balanced);
  return out;
}

std::vector<MemoryRow> CompareMemory(const MeasuredRun& measured, const strategies::StepProgram& program) {
  std::vector<MemoryRow> rows;
  const strategies::MemoryReport memory = strategies::EstimateMemory(program);
  for (const MeasuredMemory& m : measured.memory) {
    const strategies::MemoryBreakdown& p = memory.stages[static_cast<size_t>(std::clamp<int64_t>(m.stage, 0, static_cast<int64_t>(memory.stages.size()) - 1))];
    const std::map<std::string, double> predicted = {
        {"params", p.params}, {"grads", p.grads}, {"optimizer", p.optimizer}, {"activations", p.activations}, {"buffers", p.buffers}};
    for (const auto& [category, bytes] : m.bytes) {
      MemoryRow row{m.rank, m.stage, category, bytes, predicted.at(category)};
      if (category == "activations" && m.rows_received >= 0 && m.rows_sent >= 0 && program.plan.mesh.tensor == 1 &&
          program.plan.ep_capacity_factor == 1.0) {
        // Dropless routing: the model at the routing that happened (balanced receives what it
        // sends). Not with tensor > 1, where experts read rows gathered over tensor, nor with a
        // capacity factor, which the model counts on both sides and the runtime does not apply.
        row.rows_received = m.rows_received, row.rows_sent = m.rows_sent;
        row.routing_bytes = static_cast<double>(m.rows_received - m.rows_sent) * strategies::ExpertRowActivationBytes(program.model, program.plan);
        row.predicted_bytes += row.routing_bytes;
      }
      rows.push_back(row);
    }
  }
  return rows;
}

json ComparisonJson(const Comparison& c) {
  json categories = json::array(), ops = json::array(), memory = json::array();
  for (const CategoryRow& r : c.categories) {
    json row = {{"category", r.category}, {"measured_s", r.measured_s}};
    if (r.predicted) {
      row["estimated_s"] = r.estimated_s;
      row["simulated_s"] = r.simulated_s;
      if (r.measured_s > 0) {
        row["estimate_error"] = r.estimated_s / r.measured_s - 1;
        row["simulation_error"] = r.simulated_s / r.measured_s - 1;
      }
    }
    categories.push_back(row);
  }
  for (const OpRow& r : c.ops) {
    ops.push_back({{"op", r.op}, {"category", r.category}, {"spans_per_step", r.count}, {"measured_s", r.measured_s}, {"predicted_s", r.predicted_s},
                   {"difference_s", r.predicted_s - r.measured_s}});
  }
  for (const MemoryRow& r : c.memory) {
    json row = {{"rank", r.rank}, {"stage", r.stage}, {"category", r.category}, {"measured_bytes", r.measured_bytes}, {"predicted_bytes", r.predicted_bytes},
                {"error", r.measured_bytes > 0 ? json(r.predicted_bytes / r.measured_bytes - 1) : json(nullptr)}};
    if (r.rows_received >= 0) {
      row["expert_rows_received"] = r.rows_received;
      row["expert_rows_sent"] = r.rows_sent;
      row["predicted_balanced_bytes"] = r.predicted_bytes - r.routing_bytes;
      row["balanced_error"] = r.measured_bytes > 0 ? json((r.predicted_bytes - r.routing_bytes) / r.measured_bytes - 1) : json(nullptr);
    }
    memory.push_back(row);
  }
  return {{"categories", categories}, {"ops", ops}, {"memory", memory}, {"steps_compared", c.steps_compared}};
}

}  // namespace shardsim::validation
