// Fitting a cluster's compute efficiencies to measured runs (`shardsim calibrate --from-runs`):
// per group of runs (one system), the matmul, FP8-matmul and attention efficiencies and the
// backward passes' share of their rates that minimise
// the squared log error of the analytic estimate's step time over the group's "fit" runs, within
// bounds, by Levenberg-Marquardt (validation/least_squares.h). Communication keeps the link
// model's figures; HBM efficiency is the catalogue's. Every run (fit and test) is then predicted
// with the fitted figures.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "core/cluster_spec.h"
#include "validation/measured_runs.h"

namespace shardsim::validation {

struct FittedParameter {
  std::string name;        // "matmul", "fp8_matmul", "fp8_matmul.<recipe>", "attention"
  double start = 0;        // the cluster's own figure (a preset's fitted one, or the catalogue's)
  double value = 0;        // fitted (= start when not fitted)
  double low = 0, high = 0;
  int64_t fit_runs = 0;    // fit runs whose time it changes (0: not fitted)
  bool at_bound = false;
  // The fit's standard error of log(value), about the value's relative error (1 sigma): NaN where
  // not determined (not fitted, at a bound, no more fit runs than parameters fitted, a tie's scale
  // counting once; least_squares.h). Tied rates carry their scale's one error.
  double relative_error = std::nan("");
};

struct RunResult {
  const PublishedRun* run = nullptr;
  double predicted_s = 0;
  double error = 0;              // predicted / measured - 1
  double predicted_memory_gib = 0;  // the memory model's peak per device
  bool above_hbm = false;           // that peak exceeds the device's HBM (though the run ran)
  double hbm_gib = 0;               // the device's HBM (the cluster spec)
};

struct GroupFit {
  std::string group;
  std::vector<FittedParameter> parameters;
  ClusterSpec cluster;  // the cluster of the group's largest run, with the fitted efficiencies
  std::string start;    // where its efficiencies came from before the fit (EfficiencyOrigin)
  bool start_fitted = false;  // they were a preset's fitted defaults
  std::vector<RunResult> results;  // every run of the group, in the file's order
  int64_t fit_runs = 0, evaluations = 0;  // evaluations: of every fit run's estimate
  int iterations = 0;      // the fit's accepted steps
  bool fitted = false;     // a fit ran (FitOptions::fit and fit runs); else the clusters' figures
  bool converged = true;   // false: the fit stopped at its iteration limit
  double rms_log_error = 0;  // over the fit runs, after the fit
  // Too few fit runs to fit each acting efficiency (fewer than twice as many): the rates moved as
  // one, a common scale of their starts (their ratios kept until one meets its bound); `backward`
  // fitted beside it where the runs still number twice the two, else kept at its start.
  bool tied = false;
  bool tied_backward_kept = false;  // tied, and `backward` acts on the runs but kept its start
  double tied_scale = 1;            // tied: the fitted scale of the rates' starts
  int64_t tied_from = 0;            // tied: the efficiencies acting on the fit runs
  // The figures the fit moved (each efficiency acting on some fit run, or when tied the rates'
  // one scale and `backward` if fitted), and whether a converged fit had at least twice as many
  // fit runs: what a preset's default needs, untied (data/fitted_presets.json).
  // Tied: the rates that moved as one scale (the fitted figures other than `backward`).
  std::vector<std::string> TiedRates() const {
    std::vector<std::string> rates;
    for (const FittedParameter& f : parameters) {
      if (tied && f.fit_runs > 0 && f.name != "backward") rates.push_back(f.name);
    }
    return rates;
  }
  int64_t FreeParameters() const {
    int64_t free = 0, rates = 0;
    for (const FittedParameter& f : parameters) {
      free += f.fit_runs > 0 ? 1 : 0;
      rates += f.fit_runs > 0 && f.name != "backward" ? 1 : 0;
    }
    return tied && rates > 0 ? free - rates + 1 : free;
  }
  bool Determined() const { return fitted && converged && fit_runs >= 2 * FreeParameters() && Separated(); }
  // Every fitted figure off its bounds has a standard error: the runs tell the figures apart (runs
  // repeating one configuration count toward twice as many, but do not).
  bool Separated() const {
    for (const FittedParameter& f : parameters) {
      if (f.fit_runs > 0 && !f.at_bound && !std::isfinite(f.relative_error)) return false;
    }
    return true;
  }
};

struct FitOptions {
  bool fit = true;           // false: predict with the clusters' own efficiencies
  // Presets at the catalogue's efficiencies instead of their fitted ones
  // (WithCatalogueEfficiencies): what data/fitted_presets.json is fitted from.
  bool catalogue = false;
  std::string source_path;   // named in the fitted clusters' provenance
};

// One GroupFit per group, in order of first appearance. A group without fit runs keeps its
// clusters' figures.
std::vector<GroupFit> FitRuns(const std::vector<PublishedRun>& runs, const FitOptions& options);

}  // namespace shardsim::validation
