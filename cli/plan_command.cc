// `shardsim plan`: the best ways to shard a model on a cluster, why they win, and the runner-up of
// each other family of parallelism with why it lost.
#include <cstdio>
#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/plan_refine.h"
#include "cli/plan_text.h"
#include "cli/report_json.h"
#include "cli/text_table.h"
#include "core/error.h"
#include "core/inputs.h"
#include "core/plan_json.h"
#include "core/units.h"
#include "planner/export.h"
#include "planner/pareto_plot.h"
#include "planner/search.h"
#include "strategies/data_parallel.h"

namespace shardsim::cli {
namespace {

using nlohmann::json;

// A dimension name with its sharding axes: "D" or "D_fsdp" or "F_tensor".
std::string Dim(const std::string& dim, const std::vector<std::string>& axes) {
  if (axes.empty()) return dim;
  std::string s = dim + "_";
  if (axes.size() > 1) s += "(";
  for (size_t i = 0; i < axes.size(); ++i) s += (i ? "," : "") + axes[i];
  if (axes.size() > 1) s += ")";
  return s;
}

// The plan in the sharding notation, one line per weight class and one for the activations.
std::vector<std::string> ShardingLines(const ModelSpec& m, const PlanSpec& p) {
  const std::vector<std::string> tensor = p.mesh.tensor > 1 ? std::vector<std::string>{"tensor"} : std::vector<std::string>{};
  const std::vector<std::string> dense_shard = strategies::ParamShardAxes(p, strategies::ParamKind::kDense);
  const std::vector<std::string> expert_shard = strategies::ParamShardAxes(p, strategies::ParamKind::kExpert);
  const std::string d = Dim("D", dense_shard);
  std::vector<std::string> lines;
  lines.push_back("attention   Wqkv[" + d + ", " + Dim("(H+2Hkv)K", tensor) + "], Wo[" + Dim("HK", tensor) + ", " + d + "]");
  lines.push_back("mlp         Wup[" + d + ", " + Dim("F", tensor) + "], Wdown[" + Dim("F", tensor) + ", " + d + "]");
  if (m.moe) {
    lines.push_back("experts     W[" + Dim("E", p.mesh.expert > 1 ? std::vector<std::string>{"expert"} : std::vector<std::string>{}) + ", " +
                    Dim("D", expert_shard) + ", " + Dim("Fe", tensor) + "]");
  }
  lines.push_back("embedding   W[" + Dim("V", tensor) + ", " + d + "]");
  if (p.mesh.pipeline > 1) {
    lines.push_back("layers      L_pipeline: " + planner::StageLayers(m, p) + " decoder layers per model chunk in pipeline order" +
                    (p.pipeline_layout.empty() ? "" : " (pipeline_layout " + p.pipeline_layout + ")"));
  }
  std::vector<std::string> batch, seq;
  for (const MeshAxisFacts& axis : kMeshAxes) {
    if (axis.batch_replica && p.mesh.Size(axis.axis) > 1) batch.emplace_back(axis.name);
  }
  if (p.mesh.context > 1) seq.push_back("context");
  if (p.sequence_parallel && p.mesh.tensor > 1) seq.push_back("tensor");
  lines.push_back("activations X[" + Dim("B", batch) + ", " + Dim("S", seq) + ", D]");
  return lines;
}

}  // namespace

int RunPlan(const PlanOptions& o, std::ostream& out) {
  if (o.model.empty() || o.cluster.empty()) throw InputError("plan", "needs --model and --cluster", "", "e.g. --model llama3-8b --cluster dgx-h100:64");
  if (o.global_batch_tokens <= 0 || o.seq_len <= 0) {
    throw InputError("plan", "needs --global-batch-tokens T and --seq-len S", "positive whole numbers", "e.g. --global-batch-tokens 4M --seq-len 8192");
  }
  const ModelSpec model = LoadModel(o.model);
  const ClusterSpec cluster = LoadCluster(o.cluster);
  std::optional<planner::ExportTarget> target;
  if (!o.exporter.empty()) target = planner::ParseExportTarget(o.exporter, "--export");
  std::ofstream plot_file;
  if (!o.plot.empty()) {
    plot_file.open(o.plot);
    if (!plot_file) throw InputError("--plot " + o.plot, "cannot be written", "", "check the folder exists and is writable");
  }
  planner::SearchOptions options;
  options.global_batch_tokens = o.global_batch_tokens;
  options.seq_len = o.seq_len;
  options.top = static_cast<size_t>(o.top);
  options.threads = o.threads;
  if (o.progress) {
    options.progress = [](int64_t done, int64_t total) { std::cerr << "\rshardsim plan: " << done << "/" << total << " meshes" << std::flush; };
  }
  const planner::SearchResult result = planner::Search(model, cluster, options);
  if (o.progress) std::cerr << "\n";
  const double rate = result.wall_s > 0 ? static_cast<double>(result.evaluated) / result.wall_s : 0;
  if (!o.plot.empty()) {
    plot_file << planner::ParetoSvg(result.pareto, static_cast<double>(cluster.chip.hbm_bytes),
                                    model.name + " on " + cluster.name + ": tokens/s against memory per device");
    if (!plot_file) throw InputError("--plot " + o.plot, "write failed", "", "check free space");
  }
  const Refinement refinement = o.refine > 0 ? Refine(model, cluster, result.best, static_cast<size_t>(o.refine), o.progress) : Refinement{};

  if (o.json) {
    json plans = json::array();
    for (const auto& p : result.best) {
      json j = ReportJson(model, cluster, p.plan, p.report);
      j["family"] = p.family;
      if (target) {
        const planner::Export e = planner::ExportPlan(model, cluster, p.plan, *target);
        j["export"] = {{"target", o.exporter}, {"text", e.text}, {"not_expressed", e.not_expressed}};
      }
      plans.push_back(j);
    }
    json runners = json::array();
    for (const auto& p : result.family_best) {
      json j = ReportJson(model, cluster, p.plan, p.report);
      j["family"] = p.family;
      j["why_lost"] = p.why_lost;
      runners.push_back(j);
    }
    json pareto = json::array();
    for (const auto& p : result.pareto) {
      pareto.push_back({{"plan", PlanToJson(p.plan)}, {"tokens_per_s", p.report.tokens_per_s}, {"peak_bytes_per_device", p.report.memory.peak.total()}});
    }
    json misses = json::array();
    for (const auto& miss : result.nearest_misses) {
      misses.push_back({{"plan", PlanToJson(miss.plan)}, {"reason", miss.reason}, {"memory_over_hbm", miss.overshoot}});
    }
    json j{{"plans", plans},
             {"best_of_other_families", runners},
             {"pareto", pareto},
             {"nearest_misses", misses},
             {"search",
              {{"meshes", result.meshes},
               {"layouts", result.layouts},
               {"candidates", result.candidates},
               {"pruned", result.pruned},
               {"dominated", result.dominated},
               {"evaluated", result.evaluated},
               {"wall_s", result.wall_s},
               {"plans_per_s", rate}}}};
    if (o.refine > 0) {
      j["refined"] = RefinedJson(refinement);
      j["refine_failed"] = RefineFailedJson(refinement);
    }
    out << j.dump(2) << "\n";
    return 0;
  }
  out << "Plans for " << model.name << " on " << cluster.name << ": " << FormatCount(static_cast<double>(o.global_batch_tokens)) << " tokens per step ("
      << o.global_batch_tokens / o.seq_len << " sequences of " << o.seq_len << ")\n";
  out << "  searched " << result.meshes << " meshes and " << result.layouts << " other layouts of the leading ones, " << result.candidates << " plans: " << result.evaluated << " estimated, " << result.pruned
      << " pruned, " << result.dominated << " dominated, in " << FormatSeconds(result.wall_s) << " (" << FormatCount(rate) << " plans/s)\n\n";
  if (result.best.empty()) {
    out << "No plan fits in " << FormatBinaryBytes(static_cast<double>(cluster.chip.hbm_bytes)) << " per device. Nearest misses:\n";
    for (const auto& miss : result.nearest_misses) {
      out << "  " << DescribeMesh(miss.plan.mesh) << ", ZeRO " << miss.plan.zero_stage << ", recompute " << ToString(miss.plan.recompute) << ": "
          << miss.reason << " (" << FormatPercent(miss.overshoot) << " of HBM)\n";
    }
    return 0;
  }
  TextTable table({"rank", "mesh", "schedule", "mbs", "ZeRO", "recompute", "step", "tokens/s", "MFU", "memory", "limited by"});
  for (size_t i = 0; i < result.best.size(); ++i) {
    const auto& p = result.best[i];
    table.AddRow({std::to_string(i + 1), MeshText(p.plan), ScheduleName(p.plan), std::to_string(p.plan.micro_batch_size),
                  std::to_string(p.plan.zero_stage), ToString(p.plan.recompute), FormatSeconds(p.report.step_time_s),
                  FormatCount(p.report.tokens_per_s), FormatPercent(p.report.mfu), FormatBinaryBytes(p.report.memory.peak.total()), p.report.why});
  }
  table.Print(out);
  const auto& best = result.best.front();
  out << "\nBest plan, in the sharding notation (" << best.family << "):\n";
  for (const std::string& line : ShardingLines(model, best.plan)) out << "  " << line << "\n";
  out << "  time: compute " << FormatSeconds(best.report.compute_s) << ", bubble " << FormatSeconds(best.report.bubble_s);
  for (const auto& [key, seconds] : best.report.exposed_comm_s) {
    if (seconds > 0) out << ", exposed " << key << " " << FormatSeconds(seconds);
  }
  out << "\n";
  out << "\nPareto view (no other plan is both faster and smaller), least memory first:\n";
  TextTable pareto({"memory", "tokens/s", "mesh", "schedule", "mbs", "ZeRO", "recompute"});
  const size_t shown = std::min<size_t>(result.pareto.size(), 12);
  for (size_t i = 0; i < shown; ++i) {
    // Spread the rows over the whole frontier when it is long.
    const auto& p = result.pareto[shown < 2 ? i : i * (result.pareto.size() - 1) / (shown - 1)];
    pareto.AddRow({FormatBinaryBytes(p.report.memory.peak.total()), FormatCount(p.report.tokens_per_s), MeshText(p.plan), ScheduleName(p.plan),
                   std::to_string(p.plan.micro_batch_size), std::to_string(p.plan.zero_stage), ToString(p.plan.recompute)});
  }
  pareto.Print(out, "  ");
  if (!o.plot.empty()) out << "  (plotted in " << o.plot << ")\n";
  if (target) {
    const planner::Export e = planner::ExportPlan(model, cluster, best.plan, *target);
    out << "\nThe best plan for " << o.exporter << ":\n" << e.text << "\n";
    for (const std::string& gap : e.not_expressed) out << "  (not expressed: " << gap << ")\n";
  }
  if (!result.family_best.empty()) {
    out << "\nThe best of each other family, and why it lost:\n";
    for (const auto& p : result.family_best) {
      char slower[32];
      std::snprintf(slower, sizeof slower, "%.2fx", p.report.step_time_s / best.report.step_time_s);
      out << "  " << p.family << " (" << MeshText(p.plan) << ", " << ScheduleName(p.plan) << ", recompute "
          << ToString(p.plan.recompute) << "): " << FormatSeconds(p.report.step_time_s) << ", " << slower << ": " << p.why_lost
          << "\n";
    }
  }
  if (o.refine > 0) PrintRefinement(refinement, out);
  return 0;
}

}  // namespace shardsim::cli
