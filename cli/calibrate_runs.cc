// `shardsim calibrate --from-runs runs.json`: fits each group's compute efficiencies to measured
// step times (validation/runs_fit.h), prints every run predicted against measured, the error
// statistics of the fit and the test runs per source and group, and the memory model against
// published peaks; writes the fitted clusters.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/text_table.h"
#include "core/cluster_json.h"
#include "core/error.h"
#include "core/output_file.h"
#include "core/suggest.h"
#include "core/units.h"
#include "planner/frameworks.h"
#include "validation/measured_runs.h"
#include "validation/runs_fit.h"
#include "validation/runs_report.h"

namespace shardsim::cli {
namespace {

using validation::ErrorStats;
using validation::GroupFit;

std::string Signed(double fraction) { return (fraction >= 0 ? "+" : "") + FormatPercent(fraction); }

void PrintStats(const std::string& title, const std::map<std::string, ErrorStats>& by, const ErrorStats& all, std::ostream& out) {
  TextTable t({title, "runs", "median |error|", "p90 |error|", "median error", "predicted too fast", "within 10%"});
  auto row = [&t](const std::string& key, const ErrorStats& s) {
    if (s.runs == 0) {  // no statistics over no runs
      t.AddRow({key, "0", "-", "-", "-", "-", "-"});
      return;
    }
    t.AddRow({key, std::to_string(s.runs), FormatPercent(s.median), FormatPercent(s.p90), Signed(s.median_signed), std::to_string(s.below),
              std::to_string(s.within_tenth)});
  };
  for (const auto& [key, s] : by) row(key, s);
  row("all", all);
  t.Print(out, "  ");
}

void PrintGroup(const GroupFit& g, bool fitted, std::ostream& out) {
  out << "\nGroup " << g.group << ": " << g.results.size() << " runs (" << g.fit_runs << " fit, " << g.results.size() - static_cast<size_t>(g.fit_runs)
      << " test)\n";
  out << "  start: its cluster's efficiencies, " << g.start << (g.start_fitted ? ", or --catalogue for the catalogue's" : "") << "\n";
  TextTable p({"efficiency", "start", fitted ? "fitted" : "used", "fit runs it acts on", "bounds"});
  for (const validation::FittedParameter& f : g.parameters) {
    const std::string spread = fitted && std::isfinite(f.relative_error) ? " +/-" + FormatFixed(100 * f.relative_error, 1) + "%" : "";
    p.AddRow({f.name, FormatFixed(f.start, 3), FormatFixed(f.value, 3) + spread + (f.at_bound ? " (at bound)" : ""), std::to_string(f.fit_runs),
              FormatFixed(f.low, 2) + "-" + FormatFixed(f.high, 2)});
  }
  p.Print(out, "  ");
  if (fitted && g.fit_runs == 0) {
    out << "  not fitted: the group has no fit runs; its test runs are predicted with its cluster's figures above (start)\n";
  } else if (fitted) out << "  RMS of log(predicted/measured) over the fit runs: " << FormatFixed(g.rms_log_error, 3) << " (" << g.evaluations << " evaluations, " << g.iterations << (g.iterations == 1 ? " step" : " steps")
                << (g.converged ? "" : "; not converged: the iteration limit, or an estimate without a finite time") << ")\n";
  if (fitted && g.tied) {
    out << "  note: " << g.fit_runs << " fit run" << (g.fit_runs == 1 ? "" : "s") << " for " << g.tied_from << " efficiencies acting on them (fitting each needs "
        << 2 * g.tied_from << "): " << JoinNames(g.TiedRates()) << " fitted as one scale (x" << FormatFixed(g.tied_scale, 3)
        << ") of their starts (brought into their bounds), their ratios kept unless one meets its bound"
        << (g.tied_backward_kept ? "; backward kept at its start (fitting it beside the scale needs 4 fit runs)" : "") << "\n";
  }
  if (fitted && g.fit_runs > 0 && g.fit_runs < 2 * g.FreeParameters()) {
    const int64_t free = g.FreeParameters();
    // Tied and short of runs: `backward` was kept, so the one figure is the scale.
    const std::string what = g.tied ? " figure (their common scale)" : std::string(" efficienc") + (free == 1 ? "y" : "ies");
    out << "  note: fitted on " << g.fit_runs << " run" << (g.fit_runs == 1 ? "" : "s") << " for " << free << what
        << ": the figures are weakly determined (a preset's default needs a converged fit on twice as many runs, each efficiency fitted on its own)"
        << (free >= g.fit_runs ? "; no more runs than fitted figures (" + std::to_string(free) + "), so the fit can match them exactly and its RMS tells nothing"
                               : "")
        << "\n";
  }
  if (fitted && g.fit_runs > g.FreeParameters() && g.converged && !g.Separated()) {
    out << "  note: these fit runs do not tell the fitted figures apart (no standard error: they vary together, as when the runs repeat one "
           "configuration), so the figures are weakly determined\n";
  }
  // A figure the fit pushed to its bound: the runs ask for more than a kernel can give, so the
  // figures stand in for what the model lacks; they are to be read together, not as kernel rates.
  std::string bounded;
  for (const validation::FittedParameter& f : g.parameters) {
    if (fitted && f.at_bound && f.fit_runs > 0) bounded += (bounded.empty() ? "" : ", ") + f.name;
  }
  if (!bounded.empty()) {
    out << "  note: " << bounded << " stopped at a bound: these runs differ from the model by more than the efficiencies may move, and the "
           "fitted figures make up for it together (use them as a set for this group's runs, not as kernel rates)\n";
  }
  TextTable t({"run", "split", "measured s", "predicted s", "error", "memory GiB: predicted (published)"});
  for (const validation::RunResult& r : g.results) {
    const std::string memory = FormatFixed(r.predicted_memory_gib, 1) + (r.run->peak_memory_gib > 0 ? " (" + FormatFixed(r.run->peak_memory_gib, 1) + ")" : "") +
                               (r.above_hbm ? " > " + FormatFixed(r.hbm_gib, 1) + " HBM" : "");
    t.AddRow({r.run->id, r.run->fit ? "fit" : "test", FormatFixed(r.run->step_time_s, 3), FormatFixed(r.predicted_s, 3), Signed(r.error), memory});
  }
  t.Print(out, "  ");
}

std::string WhatWasWritten(const CalibrateOptions& o, const GroupFit& g) {
  if (o.no_fit) return "its cluster's own efficiencies (--no-fit)";
  if (g.fit_runs == 0) return "its cluster's own efficiencies: the group has no fit runs";
  return "the efficiencies fitted on " + std::to_string(g.fit_runs) + (g.fit_runs == 1 ? " run" : " runs");
}

void WriteClusters(const CalibrateOptions& o, const std::vector<GroupFit>& fits, std::ostream& out) {
  if (!o.out.empty()) {
    if (fits.size() != 1) {
      throw InputError("--out", "the runs form " + std::to_string(fits.size()) + " groups", "--out with runs of one group",
                       "use --out-dir DIR to write one cluster JSON per group");
    }
    WriteOutputFile(o.out, ClusterToJson(fits.front().cluster).dump(2) + "\n", "--out");
    out << "Wrote " << o.out << " (" << fits.front().cluster.name << " with " << WhatWasWritten(o, fits.front()) << ")\n";
  }
  if (!o.out_dir.empty()) {
    for (const GroupFit& g : fits) {
      const std::string path = (std::filesystem::path(o.out_dir) / (g.group + ".cluster.json")).string();
      WriteOutputFile(path, ClusterToJson(g.cluster).dump(2) + "\n", "--out-dir");
      out << "Wrote " << path << " (" << g.cluster.name << " with " << WhatWasWritten(o, g) << ")\n";
    }
  }
}

// Before the fit: --out needs runs of one group, --out-dir a folder that can be made and written.
void CheckOutputs(const CalibrateOptions& o, const std::vector<validation::PublishedRun>& runs) {
  if (!o.out.empty()) {
    std::set<std::string> groups;
    for (const validation::PublishedRun& r : runs) groups.insert(r.group);
    if (groups.size() != 1) {
      throw InputError("--out", "the runs form " + std::to_string(groups.size()) + " groups", "--out with runs of one group",
                       "use --out-dir DIR to write one cluster JSON per group");
    }
    CheckOutputWritable(o.out, "--out");
  }
  if (!o.out_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.out_dir, ec);
    if (ec) throw InputError("--out-dir " + o.out_dir, "cannot create the directory: " + ec.message(), "a writable directory path");
    CheckOutputWritable((std::filesystem::path(o.out_dir) / "group.cluster.json").string(), "--out-dir");
  }
}

}  // namespace

int RunCalibrateFromRuns(const CalibrateOptions& o, std::ostream& out) {
  std::vector<validation::PublishedRun> runs = validation::ReadMeasuredRuns(o.from_runs);
  // A run made with a framework shardsim profiles is costed as that framework runs it: the
  // overlaps and FSDP behaviour it fixes, its gradient-reduction dtype where the run leaves it
  // unset (docs/frameworks.md). Other frameworks' runs keep their plans as written.
  std::vector<std::string> unprofiled;  // framework names given as provenance only
  for (validation::PublishedRun& r : runs) {
    if (CanonicalFrameworkName(r.framework).empty()) {
      if (!r.framework.empty() && std::find(unprofiled.begin(), unprofiled.end(), r.framework) == unprofiled.end()) unprofiled.push_back(r.framework);
      continue;
    }
    r.plan = planner::AsFrameworkRuns(planner::ParseFramework(r.framework, o.from_runs + ": run " + r.id + "/framework"), r.model, r.plan);
  }
  CheckOutputs(o, runs);
  const std::vector<GroupFit> fits = validation::FitRuns(runs, {.fit = !o.no_fit, .catalogue = o.catalogue, .source_path = o.from_runs});
  const validation::AccuracySummary summary = validation::Summarize(fits);
  if (o.json) {
    nlohmann::json report = validation::RunsReportJson(fits, summary);
    report["provenance_only_frameworks"] = unprofiled;  // named by runs, no profile: costed as their plans say
    out << report.dump(2) << "\n";
    std::ostringstream quiet;
    WriteClusters(o, fits, quiet);
    return 0;
  }
  out << (o.no_fit ? "Predicted " : "Calibrated from ") << runs.size() << " measured runs in " << o.from_runs << " (" << summary.fit.runs << " fit, "
      << summary.test.runs << " test, as the file's split says); error = predicted / measured step time - 1\n";
  if (!unprofiled.empty()) {
    out << "Frameworks named as provenance only (no profile: those runs are costed as their plans say): " << JoinNames(unprofiled) << "\n";
  }
  for (const GroupFit& g : fits) PrintGroup(g, !o.no_fit, out);
  out << "\nAccuracy on the test runs" << (o.no_fit ? "" : " (not fitted on)") << "\n";
  PrintStats("source", summary.test_by_source, summary.test, out);
  PrintStats("group", summary.test_by_group, summary.test, out);
  out << "\nOn the fit runs\n";
  PrintStats("source", summary.fit_by_source, summary.fit, out);
  PrintStats("group", summary.fit_by_group, summary.fit, out);
  if (summary.above_hbm > 0) {
    out << "\n" << summary.above_hbm << " of the " << runs.size()
        << " runs are predicted above their device's HBM (marked '> N HBM', N its GiB) although they ran: the memory model or the run's assumed plan "
           "(recompute, sharding) is off for them\n";
  }
  if (summary.memory.runs > 0) {
    const ErrorStats& m = summary.memory;
    out << "\nMemory per device against the " << m.runs << " published peaks: median |error| " << FormatPercent(m.median) << ", p90 "
        << FormatPercent(m.p90) << ", median error " << Signed(m.median_signed) << "; " << m.within_tenth << " of " << m.runs << " within 10%, "
        << m.below << " predicted below the peak\n";
  }
  WriteClusters(o, fits, out);
  return 0;
}

}  // namespace shardsim::cli
