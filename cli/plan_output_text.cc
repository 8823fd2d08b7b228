// `shardsim plan`'s readable output: what was searched, the plans table, the best plan in the
// sharding notation, the Pareto view, the export, the other families, and, when nothing fits,
// the nearest misses and the smallest size of the system on which a plan fits.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/plan_output.h"
#include "cli/plan_text.h"
#include "cli/text_table.h"
#include "core/cluster_presets.h"
#include "core/run_cost.h"
#include "core/units.h"
#include "planner/export.h"
#include "sim/op_cost.h"
#include "strategies/data_parallel.h"

namespace shardsim::cli {
namespace {

// Prose lines wrap at the text width unless --wide.
struct Writer {
  std::ostream& out;
  size_t width;
  void Line(const std::string& text, const std::string& first = "", const std::string& rest = "    ") const {
    out << Wrap(text, width, first, rest);
  }
};

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
  const std::string d = Dim("D", strategies::ParamShardAxes(p, strategies::ParamKind::kDense));
  std::vector<std::string> lines;
  if (NumHybridLayers(m, kHybridMamba) > 0) {
    // The input projection's z, x, B, C and dt columns and the output projection's rows, by heads
    // and groups (strategies/mamba_layer.h).
    lines.push_back("mamba       Win[" + d + ", " + Dim("(2HmP+2GN+Hm)", tensor) + "], Wout[" + Dim("HmP", tensor) + ", " + d + "]");
  }
  if (NumHybridLayers(m, kHybridAttention) > 0) {
    lines.push_back("attention   Wqkv[" + d + ", " + Dim("(H+2Hkv)K", tensor) + "], Wo[" + Dim("HK", tensor) + ", " + d + "]");
  }
  if (NumMoeLayers(m) < m.num_layers - NumHybridLayers(m, kHybridMamba) - (IsHybrid(m) ? NumHybridLayers(m, kHybridAttention) : 0)) {
    lines.push_back("mlp         Wup[" + d + ", " + Dim("F", tensor) + "], Wdown[" + Dim("F", tensor) + ", " + d + "]");
  }
  if (m.moe) {
    // LatentMoE's routed experts read the latent width L, projected from D and back (replicated
    // over tensor).
    const bool latent = m.moe->latent_size > 0;
    lines.push_back("experts     W[" + Dim("E", ExpertAxes(p)) + ", " +
                    Dim(latent ? "L" : "D", strategies::ParamShardAxes(p, strategies::ParamKind::kExpert)) + ", " + Dim("Fe", ExpertTensorDegree(p) > 1 ? tensor : std::vector<std::string>{}) + "]" +
                    (latent ? " (L = latent " + std::to_string(m.moe->latent_size) + "; projections W[" + d + ", L], W[L, " + d + "])" : ""));
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

std::string Times(double ratio) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2fx", ratio);
  return text;
}

void PrintHeader(const PlanFindings& f, const Writer& w) {
  const planner::SearchResult& r = f.result;
  const double hbm = static_cast<double>(f.cluster.chip.hbm_bytes);
  w.out << "Plans for " << f.model.name << " on " << f.cluster.name << ": " << FormatCount(static_cast<double>(f.tokens_per_step)) << " tokens per step ("
        << f.tokens_per_step / f.seq_len << " sequences of " << f.seq_len << ")\n";
  const std::string fixed = planner::DescribeFixed(f.constraints);
  if (!fixed.empty()) w.Line("fixed by --plan/--set: " + fixed + "; the other fields searched (docs/plan.md)", "  ");
  if (f.framework) {
    w.Line("framework: " + std::string(planner::FrameworkName(*f.framework)) + ", only the plans it runs exactly (" + std::to_string(r.unsupported) +
               " others skipped; docs/frameworks.md)",
           "  ");
  }
  w.Line("memory limit: " + FormatBinaryBytes(r.max_memory_bytes) + " per device, " + FormatPercent(r.max_memory_bytes / hbm) + " of the " +
             FormatBinaryBytes(hbm) + " of HBM" + (f.options.max_memory.empty() ? " (the default, leaving room for fragmentation and buffers; --max-memory)" : " (--max-memory)"),
         "  ");
  // Only a preset takes ,efficiency=catalogue (a cluster file keeps its own figures).
  const bool preset = LooksLikeClusterPreset(f.options.cluster);
  // The attention figure the plans ran at: their kernel's (all share the search's), the flash
  // kernels' where nothing was found.
  const std::string kernel = f.result.best.empty() ? "" : AttentionKernelOf(f.result.best.front().plan);
  w.Line("efficiencies: " + EfficiencyOrigin(f.cluster) + (UsesFittedEfficiencies(f.cluster) && preset ? ", or ,efficiency=catalogue for the catalogue's" : "") +
             "; matmul " + FormatFixed(f.cluster.efficiency.matmul, 3) + ", attention " +
             (kernel == kUnfusedAttention ? std::string("(unfused: batched products at the matmul share) ") : std::string()) +
             FormatFixed(f.cluster.efficiency.Attention(kernel), 3) +
             (f.cluster.efficiency.backward != 1 ? ", backward passes at " + FormatFixed(f.cluster.efficiency.backward, 3) + " of those rates" : std::string()),
         "  ");
  const double rate = r.wall_s > 0 ? static_cast<double>(r.evaluated) / r.wall_s : 0;
  w.Line("searched " + std::to_string(r.meshes) + " meshes and " + std::to_string(r.layouts) + " other layouts of the leading ones" +
             (r.balanced > 0 ? " (" + std::to_string(r.balanced) + " of them again with balanced stages)" : std::string()) + ", " +
             std::to_string(r.candidates) + " plans: " + std::to_string(r.evaluated - r.over_limit) + " estimated, " + std::to_string(r.over_limit) +
             " over the memory limit, " + std::to_string(r.pruned) + " pruned, " +
             std::to_string(r.dominated) + " dominated, in " + FormatSeconds(r.wall_s) + " (" + FormatCount(rate) + " plans/s estimated or judged over the limit)",
         "  ");
  w.out << "\n";
}

void PrintNothingFits(const PlanFindings& f, const Writer& w) {
  const planner::SearchResult& r = f.result;
  w.Line("No plan of " + f.model.name + " fits in " + FormatBinaryBytes(r.max_memory_bytes) + " per device on " + f.cluster.name + ".");
  if (f.framework && r.nearest_misses.empty() && r.unsupported > 0) {
    w.Line("None of the plans searched is one " + std::string(planner::FrameworkName(*f.framework)) + " runs: its limits (docs/frameworks.md) excluded all " +
           std::to_string(r.unsupported) + " that split this batch over these devices. Try another device count or batch, or search without --framework.");
  }
  if (r.capped_microbatch > 0) {
    w.Line("The search runs at most " + std::to_string(planner::kMaxSearchedMicrobatches) + " micro-batches a replica a step: on the meshes that cap bound, " +
           "micro-batches of " + std::to_string(r.capped_microbatch) + " sequences or more; fix a smaller one with --set micro_batch_size=N to search it, or use a smaller batch.");
  }
  if (f.smallest) {
    const planner::SmallestFit& s = *f.smallest;
    if (s.found) {
      const sim::StepReport& rep = s.plan.report;
      w.Line("The smallest size of " + f.cluster.system + " on which one fits: " + s.cluster + " (" + std::to_string(s.devices) + " devices), with " +
             MeshText(s.plan.plan) + ", ZeRO " + ZeroText(s.plan.plan) + ", recompute " + RecomputeText(s.plan.plan) + ": " + FormatSeconds(rep.step_time_s) +
             " per step, " + FormatBinaryBytes(rep.memory.peak.total()) + " per device.");
    } else {
      w.Line((f.cluster.system == "custom" ? std::string("No larger size was searched") : "No larger size of " + f.cluster.system + " was found on which one fits") +
             ": " + s.why_not + ".");
    }
    std::string tried;
    for (const std::string& t : s.tried) tried += (tried.empty() ? "" : ", ") + t;
    if (!tried.empty()) w.Line("(searched " + tried + ")", "  ");
  }
  if (r.nearest_misses.empty()) return;
  w.out << "Nearest misses, closest first:\n";
  for (const planner::Miss& miss : r.nearest_misses) {
    const std::string details = miss.estimated ? ", " + ScheduleName(miss.plan) + ", mbs " + std::to_string(miss.plan.micro_batch_size) + ", recompute " +
                                                     RecomputeText(miss.plan)
                                               : "";
    const bool host = miss.host_limit_bytes > 0;
    const double limit = host ? miss.host_limit_bytes : r.max_memory_bytes;
    w.Line(MeshText(miss.plan) + ", ZeRO " + ZeroText(miss.plan) + details + ": " + miss.reason + ", " + Times(miss.overshoot) + " the " +
               FormatBinaryBytes(limit) + (host ? " of host memory per device (cluster spec)" : " limit") + "; it would need " +
               FormatBinaryBytes(miss.needed_bytes - limit) + " more",
           "  ", "      ");
  }
}

void PrintPlans(const PlanFindings& f, const Writer& w) {
  const planner::SearchResult& r = f.result;
  const bool wide = f.options.wide;
  // The table, with "limited by" as its last column when it fits the width (else a line below).
  auto table = [&](bool limited_column) {
    std::vector<std::string> header = {"rank", "mesh", "schedule", "mbs", "ZeRO", "recompute", "step", "tokens/s", "MFU", "memory"};
    if (limited_column) header.push_back("limited by");
    if (wide) header.insert(header.begin() + 2, "layout (outer>inner)");
    TextTable t(header);
    for (size_t i = 0; i < r.best.size(); ++i) {
      const planner::RankedPlan& p = r.best[i];
      std::vector<std::string> row = {std::to_string(i + 1), MeshText(p.plan), ScheduleName(p.plan), std::to_string(p.plan.micro_batch_size),
                                      ZeroText(p.plan), RecomputeText(p.plan), FormatSeconds(p.report.step_time_s), FormatCount(p.report.tokens_per_s),
                                      FormatPercent(p.report.mfu), FormatBinaryBytes(p.report.memory.peak.total())};
      if (limited_column) row.push_back(p.report.why);
      if (wide) {
        std::string order;
        for (const std::string& a : UsedMeshOrder(p.plan)) order += (order.empty() ? "" : ">") + a;
        row.insert(row.begin() + 2, order);
      }
      t.AddRow(row);
    }
    return t;
  };
  const TextTable full = table(true);
  const bool fits = full.Width() <= w.width;
  (fits ? full : table(false)).Print(w.out);
  if (!fits) {
    std::string limits;
    for (size_t i = 0; i < r.best.size(); ++i) limits += (limits.empty() ? "" : "; ") + std::to_string(i + 1) + " " + r.best[i].report.why;
    w.Line("limited by: " + limits, "  ", "    ");
  }
  bool folds = false;
  for (const auto* list : {&r.best, &r.pareto, &r.family_best}) {
    for (const planner::RankedPlan& p : *list) folds = folds || !p.plan.expert_axes.empty();
  }
  bool laid_out = false;  // a plan of the tables with its own stage split
  for (const auto* list : {&r.best, &r.pareto, &r.family_best}) {
    for (const planner::RankedPlan& p : *list) laid_out = laid_out || !p.plan.pipeline_layout.empty();
  }
  w.Line(MeshLegend(folds) + ". ZeRO: the stage and the replica axes it acts on (1 (d): ZeRO-1 over data; 0 (d): replicated over data; -: no replica axis; rg / kg: sharded parameters re-gathered for "
             "the backward / kept gathered, not the default for this pipeline depth)." +
             (laid_out ? std::string(" +split: the decoder layers split over the stages otherwise than by default (the plan's pipeline_layout: balanced by the search, the framework's own split, or fixed by --set; the best plan's is shown below).") : std::string()) +
             " dtype " + r.best.front().plan.dtype + ".",
         "  ", "  ");
  if (f.options.train_tokens > 0) {
    w.out << "\nTraining on " << FormatCount(f.options.train_tokens) << " tokens (--train-tokens) at each plan's predicted tokens/s:\n";
    std::vector<std::string> cols = {"rank", "time", "device-hours"};
    if (f.options.price_per_device_hour > 0) cols.push_back("cost at " + FormatCount(f.options.price_per_device_hour) + " per device-hour");
    TextTable runs(cols);
    for (size_t i = 0; i < r.best.size(); ++i) {
      const TrainingRun run = CostOfTraining(f.options.train_tokens, r.best[i].report.tokens_per_s, DeviceCount(f.cluster), f.options.price_per_device_hour);
      std::vector<std::string> row = {std::to_string(i + 1), FormatDuration(run.seconds), FormatCount(run.device_hours)};
      if (run.priced) row.push_back(FormatCount(run.cost));
      runs.AddRow(row);
    }
    runs.Print(w.out, "  ");
    w.Line("Steady-state steps only: no restarts, evaluation or warm-up; the cost is in the currency of the price given.", "  ", "  ");
  }
}

void PrintBest(const PlanFindings& f, const Writer& w) {
  const planner::RankedPlan& best = f.result.best.front();
  w.out << "\nBest plan, in the sharding notation (" << best.family << "):\n";
  for (const std::string& line : ShardingLines(f.model, best.plan)) w.Line(line, "  ", "              ");
  std::string time = "time: compute " + FormatSeconds(best.report.compute_s) + ", bubble " + FormatSeconds(best.report.bubble_s);
  for (const auto& [key, seconds] : best.report.exposed_comm_s) {
    if (seconds > 0) time += ", exposed " + sim::ExposedLabel(best.report, key) + " " + FormatSeconds(seconds);
  }
  w.Line(time, "  ", "    ");
}

void PrintPareto(const PlanFindings& f, const Writer& w) {
  const std::vector<planner::RankedPlan>& pareto = f.result.pareto;
  constexpr size_t kShown = 40;
  const size_t shown = f.options.wide ? pareto.size() : std::min(pareto.size(), kShown);
  w.out << "\nPareto view: the " << pareto.size() << " plans no other plan beats on both tokens/s and memory, least memory first";
  w.out << (shown < pareto.size() ? " (" + std::to_string(shown) + " of them, evenly spread; --wide shows all):\n" : ":\n");
  TextTable table({"memory", "tokens/s", "mesh", "schedule", "mbs", "ZeRO", "recompute"});
  for (size_t i = 0; i < shown; ++i) {
    const planner::RankedPlan& p = pareto[shown < 2 || shown == pareto.size() ? i : i * (pareto.size() - 1) / (shown - 1)];
    table.AddRow({FormatBinaryBytes(p.report.memory.peak.total()), FormatCount(p.report.tokens_per_s), MeshText(p.plan), ScheduleName(p.plan),
                  std::to_string(p.plan.micro_batch_size), ZeroText(p.plan), RecomputeText(p.plan)});
  }
  table.Print(w.out, "  ");
  if (!f.options.plot.empty()) w.out << "  (plotted in " << f.options.plot << ")\n";
}

void PrintExport(const PlanFindings& f, const Writer& w) {
  if (!f.target) return;
  const planner::Export e = planner::ExportPlan(f.model, f.cluster, f.result.best.front().plan, *f.target);
  w.out << "\nThe best plan for " << f.export_name << ":\n" << e.text << "\n";
  if (!e.beside.empty()) {
    std::string facts;
    for (const planner::Setting& s : e.beside) facts += (facts.empty() ? "" : ", ") + s.name + " " + s.value;
    w.Line("(for the launcher and the training script, not the config above: " + facts + ")", "  ", "    ");
  }
  for (const std::string& gap : e.not_expressed) w.Line("(not expressed: " + gap + ")", "  ", "    ");
}

void PrintFamilies(const PlanFindings& f, const Writer& w) {
  const planner::SearchResult& r = f.result;
  if (r.family_best.empty()) return;
  const planner::RankedPlan& best = r.best.front();
  w.out << "\nThe best of each other family, and why it lost:\n";
  for (const planner::RankedPlan& p : r.family_best) {
    std::string families = p.family;
    for (const std::string& same : p.same_as) families += " = " + same;
    w.Line(families + " (" + MeshText(p.plan) + ", " + ScheduleName(p.plan) + ", recompute " + RecomputeText(p.plan) + "): " +
               FormatSeconds(p.report.step_time_s) + ", " + Times(p.report.step_time_s / best.report.step_time_s) + ": " + p.why_lost,
           "  ", "      ");
  }
  bool merged = false;
  for (const planner::RankedPlan& p : r.family_best) merged = merged || !p.same_as.empty();
  if (merged) w.Line("(a = b: the best plans of both families predict the same step)", "  ", "  ");
}

}  // namespace

void PrintPlanText(const PlanFindings& f, std::ostream& out) {
  const Writer w{out, f.options.wide ? std::string::npos : kTextWidth};
  PrintHeader(f, w);
  if (f.result.best.empty()) {
    PrintNothingFits(f, w);
    return;
  }
  PrintPlans(f, w);
  PrintBest(f, w);
  PrintPareto(f, w);
  PrintExport(f, w);
  PrintFamilies(f, w);
  if (f.options.refine > 0) PrintRefinement(f.refinement, out);
}

}  // namespace shardsim::cli
