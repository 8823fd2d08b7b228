// `shardsim simulate`: one training step played out on SimGrid over the cluster's links, with
// the analytic estimate beside it, what was folded, the busiest links and where contention
// slowed communication; a Chrome trace (--trace) and a report page (--report) to look at it.
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/sim_limits.h"
#include "cli/plan_text.h"
#include "cli/report_json.h"
#include "cli/step_inputs.h"
#include "cli/step_text.h"
#include "cli/sim_report_html.h"
#include "cli/sim_trace.h"
#include "cli/text_table.h"
#include "core/error.h"
#include "core/inputs.h"
#include "core/output_file.h"
#include "core/plan_json.h"
#include "core/units.h"
#include "sim/des_budget.h"
#include "sim/simulate.h"
#include "strategies/build_step.h"
#include "strategies/plan_rules.h"

namespace shardsim::cli {
namespace {

nlohmann::json SimulationJson(const sim::SimReport& r, const sim::StepReport& estimate) {
  nlohmann::json j;
  j["engine"] = "SimGrid (S4U, CM02 flow model)";
  j["estimate_step_time_s"] = estimate.step_time_s;
  j["difference_from_estimate"] = r.step.step_time_s / estimate.step_time_s - 1;
  j["folded"] = r.folded;
  j["simulated"] = r.simulated;
  j["simulated_devices"] = r.simulated_devices;
  j["represented_devices"] = r.represented_devices;
  j["microbatches_simulated"] = r.microbatches_simulated;
  j["microbatches"] = r.microbatches;
  j["flows"] = r.flows;
  j["activities"] = r.activities;
  j["wall_s"] = r.wall_s;
  j["peak_rss_bytes"] = r.peak_rss_bytes;
  j["estimated_flows"] = r.engine_load.flows;
  j["estimated_wall_s"] = r.engine_estimate.seconds;
  j["estimated_peak_bytes"] = WholeBytes(r.engine_estimate.bytes);
  nlohmann::json devices = nlohmann::json::array();
  for (const sim::DeviceUse& d : r.devices) {
    nlohmann::json streams;
    for (size_t s = 0; s < strategies::kStreams; ++s) {
      if (d.stream_busy_s[s] > 0) streams[strategies::ToString(static_cast<strategies::Stream>(s))] = d.stream_busy_s[s];
    }
    devices.push_back({{"rank", d.rank}, {"stage", d.stage}, {"represents", d.represents}, {"busy_s", streams}, {"compute_s", d.compute_s},
                       {"exposed_comm_s", d.exposed_comm_s}, {"bubble_s", d.bubble_s}, {"overlapped_comm_s", d.overlapped_comm_s},
                       {"compute_utilisation", d.compute_s / r.step.step_time_s}, {"memory_bytes", WholeBytes(d.memory_bytes)}});
  }
  j["devices"] = devices;
  nlohmann::json links = nlohmann::json::array();
  for (size_t i = 0; i < r.links.size() && i < 20; ++i) {
    const sim::LinkUse& l = r.links[i];
    links.push_back({{"link", l.link}, {"name", l.name}, {"busy_s", l.busy_s}, {"utilisation", l.utilisation}, {"kinds", l.kinds}, {"senders", l.senders}});
  }
  j["links"] = links;
  j["links_with_traffic"] = r.links.size();
  nlohmann::json contention = nlohmann::json::array();
  for (const sim::Contention& c : r.contention) {
    contention.push_back({{"kind", c.kind}, {"simulated_s", c.simulated_s}, {"uncontended_s", c.uncontended_s},
                          {"slowdown", c.simulated_s / c.uncontended_s}, {"links", c.links}, {"with", c.with}});
  }
  j["contention"] = contention;
  return j;
}

}  // namespace

int RunSimulate(const SimulateOptions& o, std::ostream& out) {
  const StepInputs in = LoadStepInputs(o, "simulate");
  const ModelSpec& model = in.model;
  const ClusterSpec& cluster = in.cluster;
  const PlanSpec& plan = in.plan;
  if (o.no_fold && plan.mesh.Product() > kMaxUnfoldedDevices) {
    throw InputError("--no-fold", "simulates every device; this plan has " + std::to_string(plan.mesh.Product()) + " devices",
                     "at most " + std::to_string(kMaxUnfoldedDevices), "leave folding on for large clusters");
  }
  sim::SimulateOptions options;
  options.fold = !o.no_fold;
  options.timeline = !o.trace.empty() || !o.report.empty();
  options.progress = o.progress;
  options.limits = SimLimitsFrom(o.max_seconds, o.max_host_memory);
  if (!o.trace.empty()) CheckOutputWritable(o.trace, "--trace");
  if (!o.report.empty()) CheckOutputWritable(o.report, "--report");
  const strategies::StepProgram program = strategies::BuildStep(model, plan);
  const topologies::Cluster graph(cluster);
  sim::AxisCollectives collectives(graph, plan);
  const sim::SimReport r = sim::Simulate(program, cluster, graph, collectives, options);
  const sim::StepReport& estimate = r.estimate;
  if (!o.trace.empty()) WriteOutputFile(o.trace, ChromeTrace(r, program).dump() + "\n", "--trace");
  if (!o.report.empty()) WriteOutputFile(o.report, SimReportHtml(r, program, cluster), "--report");

  if (o.json) {
    nlohmann::json j = ReportJson(model, cluster, plan, r.step);
    j["engine"] = "simulation";
    j["simulation"] = SimulationJson(r, estimate);
    out << j.dump(2) << "\n";
    return 0;
  }
  out << "Simulation (SimGrid): " << model.name << " on " << cluster.name << ", " << DescribeMesh(plan.mesh) << ScheduleInHeader(plan) << ", ZeRO " << plan.zero_stage
      << ExpertAxesNote(plan) << "\n";
  out << "  step        " << FormatSecondsSpan(r.step.step_time_s) << " simulated, " << FormatSecondsSpan(estimate.step_time_s) << " estimated ("
      << FormatPercent(r.step.step_time_s / estimate.step_time_s - 1) << " apart): " << FormatCount(r.step.tokens_per_s) << " tokens/s, MFU "
      << FormatPercent(r.step.mfu) << " of " << FormatSI(r.step.peak_flop_per_s, "FLOP/s") << " " << MatmulPeakDtype(plan.dtype, Fp8RecipeOf(plan)) << " peak (cluster spec)\n";
  out << "  time        on stage " << r.step.critical_stage << " (the slowest): compute " << FormatSeconds(r.step.compute_s) << ", bubble "
      << FormatSeconds(r.step.bubble_s);
  for (const auto& [key, seconds] : r.step.exposed_comm_s) {
    if (seconds > 0) out << ", exposed " << sim::ExposedLabel(estimate, key) << " " << FormatSeconds(seconds);
  }
  out << "\n";
  PrintHeaviestStage(r.step, estimate, out);
  out << "  limited by  " << sim::WhatLimits(r.step, true) << "\n";
  for (const sim::Contention& c : r.contention) {
    out << "  contention  " << c.kind << ": " << FormatSeconds(c.simulated_s) << " per step against " << FormatSeconds(c.uncontended_s)
        << " alone (" << FormatPercent(c.simulated_s / c.uncontended_s - 1) << " slower)";
    if (!c.links.empty()) out << " on " << c.links.front() << (c.links.size() > 1 ? " and " + std::to_string(c.links.size() - 1) + " more" : "");
    if (!c.with.empty()) {
      std::string with;
      for (const std::string& w : c.with) with += (with.empty() ? "" : ", ") + w;
      out << ", shared with " << with;
    }
    out << "\n";
  }
  if (!r.links.empty()) {
    out << "  busiest     " << r.links.front().name << ": " << FormatPercent(r.links.front().utilisation) << " of the step busy\n";
  }
  for (const std::string& f : r.folded) out << "  folded      " << f << "\n";
  for (const std::string& s : r.simulated) out << "  explicit    " << s << "\n";
  out << "  engine      " << FormatCount(static_cast<double>(r.flows)) << " flows, " << FormatCount(static_cast<double>(r.activities)) << " activities in "
      << FormatSeconds(r.wall_s) << " wall, " << FormatBinaryBytes(static_cast<double>(r.peak_rss_bytes)) << " peak memory (estimated beforehand: "
      << FormatSeconds(r.engine_estimate.seconds) << ", " << FormatBinaryBytes(r.engine_estimate.bytes) << ")\n";
  if (!o.trace.empty()) out << "  trace       " << o.trace << " (Chrome trace: open in ui.perfetto.dev or chrome://tracing)\n";
  if (!o.report.empty()) out << "  report      " << o.report << "\n";
  return 0;
}

}  // namespace shardsim::cli
