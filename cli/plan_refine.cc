#include "cli/plan_refine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <stdexcept>

#include "cli/plan_text.h"
#include "cli/text_table.h"
#include "core/plan_json.h"
#include "core/units.h"
#include "strategies/build_step.h"
#include "topologies/cluster.h"

namespace shardsim::cli {
namespace {

std::string SignedPercent(double fraction) { return (fraction > 0 ? "+" : "") + FormatPercent(fraction); }

// The simulation's costliest contention: the kind, its slowdown, its busiest shared link and
// the other kinds on its links (not its own axes).
std::string ContentionReason(const sim::Contention& c) {
  char slowdown[32];
  std::snprintf(slowdown, sizeof slowdown, "%.2fx", c.simulated_s / c.uncontended_s);
  std::string why = "contention: " + c.kind + " took " + slowdown + " its time alone";
  if (!c.links.empty()) why += " on " + c.links.front();
  std::string with;
  for (const std::string& w : c.with) {
    const std::string own = " over " + w;  // the kind's own axes
    if (c.kind.size() >= own.size() && c.kind.compare(c.kind.size() - own.size(), own.size(), own) == 0) continue;
    with += (with.empty() ? "" : "; ") + w;  // a kind may itself hold commas: "data,context"
  }
  if (!with.empty()) why += ", shared with " + with;
  return why;
}

// Without contention: the part of the critical stage's time (an exposed communication kind,
// the bubble, compute) whose simulated and estimated seconds differ the most.
std::string BreakdownReason(const sim::StepReport& simulated, const sim::StepReport& estimated) {
  std::map<std::string, std::pair<double, double>> parts;  // name: (simulated, estimated)
  for (const auto& [key, seconds] : simulated.exposed_comm_s) parts["exposed " + key].first = seconds;
  for (const auto& [key, seconds] : estimated.exposed_comm_s) parts["exposed " + key].second = seconds;
  parts["bubble"] = {simulated.bubble_s, estimated.bubble_s};
  parts["compute"] = {simulated.compute_s, estimated.compute_s};
  std::string largest;
  double gap = 0;
  for (const auto& [name, seconds] : parts) {
    if (std::abs(seconds.first - seconds.second) > gap) {
      gap = std::abs(seconds.first - seconds.second);
      largest = name;
    }
  }
  if (largest.empty()) return "the critical stage's parts agree; the stages' ends differ (simulated stage " + std::to_string(simulated.critical_stage) +
                              ", estimated stage " + std::to_string(estimated.critical_stage) + ")";
  const auto& [sim_s, est_s] = parts[largest];
  return largest + ": " + FormatSeconds(sim_s) + " simulated against " + FormatSeconds(est_s) + " estimated";
}

std::string Reason(const sim::SimReport& simulated, const sim::StepReport& estimated, double difference) {
  if (std::abs(difference) <= kRefineTolerance) return "";
  if (!simulated.contention.empty()) return ContentionReason(simulated.contention.front());
  return BreakdownReason(simulated.step, estimated);
}

// The plan as the plans table shows it (mesh with its layout, schedule, micro-batch size, ZeRO,
// recomputation unless none), wrapped at `width` characters between those parts, for a table row and its
// continuation rows.
std::vector<std::string> PlanCells(const PlanSpec& p, size_t width) {
  // The mesh and its layout ("[outer>inner: ...]") may go on separate lines.
  const std::string mesh = MeshText(p);
  const size_t layout = mesh.find(" [");
  std::vector<std::string> parts{mesh.substr(0, layout)};
  if (layout != std::string::npos) parts.push_back(mesh.substr(layout + 1));
  if (p.mesh.pipeline > 1) parts.push_back(ScheduleName(p));
  parts.push_back("mbs " + std::to_string(p.micro_batch_size));
  parts.push_back("ZeRO " + std::to_string(p.zero_stage));
  if (p.recompute != Recompute::kNone) parts.push_back("recompute " + ToString(p.recompute));
  if (p.offload_layers > 0) parts.push_back("offload " + std::to_string(p.offload_layers));
  std::vector<std::string> lines{""};
  for (size_t i = 0; i < parts.size(); ++i) {
    const bool before_layout = i + 1 < parts.size() && parts[i + 1].front() == '[';
    const std::string piece = parts[i] + (i + 1 < parts.size() && !before_layout ? "," : "");
    if (!lines.back().empty() && lines.back().size() + 1 + piece.size() > width) lines.emplace_back();
    lines.back() += (lines.back().empty() ? "" : " ") + piece;
  }
  return lines;
}

// The plan on one line.
std::string PlanText(const PlanSpec& p) { return PlanCells(p, std::string::npos).front(); }

// The table's width without the plan column: the indent, the other columns and the gaps.
constexpr size_t kPlanColumnWidth = 120 - 2 - (4 + 4 + 9 + 9 + 10) - 5 * 2;

}  // namespace

Refinement Refine(const ModelSpec& model, const ClusterSpec& cluster, const std::vector<planner::RankedPlan>& best, size_t k, bool progress,
                  const sim::DesLimits& limits) {
  sim::SimulateOptions options;
  options.limits = limits;
  const auto start = std::chrono::steady_clock::now();
  Refinement refinement;
  refinement.asked = k;
  const size_t count = std::min(k, best.size());
  if (count == 0) return refinement;
  const topologies::Cluster graph(cluster);
  for (size_t i = 0; i < count; ++i) {
    if (progress) std::cerr << "\rshardsim plan: simulating " << i + 1 << "/" << count << " plans" << std::flush;
    const planner::RankedPlan& p = best[i];
    try {
      const strategies::StepProgram program = strategies::BuildStep(model, p.plan);
      sim::AxisCollectives collectives(graph, p.plan);
      RefinedPlan r{p, i + 1, sim::Simulate(program, cluster, graph, collectives, options), 0, ""};
      r.difference = r.simulated.step.step_time_s / p.report.step_time_s - 1;
      r.why = Reason(r.simulated, p.report, r.difference);
      refinement.plans.push_back(std::move(r));
    } catch (const std::runtime_error& e) {
      refinement.failed.push_back({p, i + 1, e.what()});
    }
  }
  if (progress) std::cerr << "\n";
  std::stable_sort(refinement.plans.begin(), refinement.plans.end(), [](const RefinedPlan& a, const RefinedPlan& b) {
    return a.simulated.step.step_time_s < b.simulated.step.step_time_s;
  });
  refinement.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return refinement;
}

void PrintRefinement(const Refinement& r, std::ostream& out) {
  const size_t tried = r.plans.size() + r.failed.size();
  out << "\nRefined by simulation (SimGrid): the top " << tried << " plans simulated, best by simulation first (est.: the estimate's rank)";
  if (tried < r.asked) out << " (--refine " << r.asked << " asked for more than the " << tried << " plans kept; raise --top)";
  out << ":\n";
  if (!r.plans.empty()) {
    TextTable table({"rank", "est.", "estimated", "simulated", "difference", "plan"});
    for (size_t i = 0; i < r.plans.size(); ++i) {
      const RefinedPlan& p = r.plans[i];
      const std::vector<std::string> plan = PlanCells(p.estimated.plan, kPlanColumnWidth);
      table.AddRow({std::to_string(i + 1), std::to_string(p.rank_by_estimate), FormatSeconds(p.estimated.report.step_time_s),
                    FormatSeconds(p.simulated.step.step_time_s), SignedPercent(p.difference), plan.front()});
      for (size_t line = 1; line < plan.size(); ++line) table.AddRow({"", "", "", "", "", plan[line]});
    }
    table.Print(out, "  ");
    for (size_t i = 0; i < r.plans.size(); ++i) {
      if (!r.plans[i].why.empty()) out << "  " << i + 1 << ": " << SignedPercent(r.plans[i].difference) << ", " << r.plans[i].why << "\n";
    }
  }
  for (const RefineFailure& f : r.failed) {
    out << "  estimate's #" << f.rank_by_estimate << " (" << PlanText(f.estimated.plan) << "): not simulated: " << f.error << "\n";
  }
  if (!r.plans.empty()) {
    size_t estimate_best = r.plans.front().rank_by_estimate;
    for (const RefinedPlan& p : r.plans) estimate_best = std::min(estimate_best, p.rank_by_estimate);
    const RefinedPlan& top = r.plans.front();
    if (top.rank_by_estimate != estimate_best) {
      const RefinedPlan& first = *std::find_if(r.plans.begin(), r.plans.end(), [&](const RefinedPlan& p) { return p.rank_by_estimate == estimate_best; });
      out << "  The simulation's best is the estimate's #" << top.rank_by_estimate << " (" << PlanText(top.estimated.plan) << "), not its #"
          << estimate_best << " (simulated " << FormatSeconds(first.simulated.step.step_time_s) << ", "
          << SignedPercent(first.simulated.step.step_time_s / top.simulated.step.step_time_s - 1) << " against the new best).\n";
    } else {
      out << "  The simulation's best is the estimate's best too.\n";
    }
  }
  out << "  " << tried << " simulations in " << FormatSeconds(r.wall_s) << " wall\n";
}

nlohmann::json RefinedJson(const Refinement& r) {
  nlohmann::json refined = nlohmann::json::array();
  for (const RefinedPlan& p : r.plans) {
    nlohmann::json contention = nlohmann::json::array();
    for (const sim::Contention& c : p.simulated.contention) contention.push_back({{"kind", c.kind}, {"slowdown", c.simulated_s / c.uncontended_s}});
    refined.push_back({{"plan", PlanToJson(p.estimated.plan)},
                       {"family", p.estimated.family},
                       {"rank_by_estimate", p.rank_by_estimate},
                       {"estimated_step_time_s", p.estimated.report.step_time_s},
                       {"simulated_step_time_s", p.simulated.step.step_time_s},
                       {"difference", p.difference},
                       {"why", p.why},
                       {"contention", contention},
                       {"simulation_wall_s", p.simulated.wall_s}});
  }
  return refined;
}

nlohmann::json RefineFailedJson(const Refinement& r) {
  nlohmann::json failed = nlohmann::json::array();
  for (const RefineFailure& f : r.failed) failed.push_back({{"plan", PlanToJson(f.estimated.plan)}, {"rank_by_estimate", f.rank_by_estimate}, {"error", f.error}});
  return failed;
}

}  // namespace shardsim::cli
