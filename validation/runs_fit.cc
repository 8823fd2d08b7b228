#include "validation/runs_fit.h"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <map>
#include <functional>
#include <memory>

#include "core/cluster_presets.h"
#include "core/inputs.h"
#include "core/suggest.h"
#include "core/units.h"
#include "sim/estimate.h"
#include "strategies/build_step.h"
#include "topologies/cluster.h"
#include "validation/least_squares.h"

namespace shardsim::validation {
namespace {

// What one run needs for repeated estimates: the routed cluster and the collective models stay,
// only the efficiencies of `cluster` change between evaluations.
struct Prepared {
  const PublishedRun* run = nullptr;
  ClusterSpec cluster{};
  std::unique_ptr<topologies::Cluster> graph{};
  std::unique_ptr<sim::AxisCollectives> collectives{};
  strategies::StepProgram program{};
};

// Bounds: the range of shares of peak that public kernels reach (GEMMs 30-95%, attention kernels
// 10-95%, FP8 GEMMs 20-95% of the FP8 peak, whatever their scaling recipe); a fit at a bound is
// reported as such.
struct Bound {
  const char* name;
  double low, high;
};
// The backward passes' share of the forward rates: 0.3-1 (no faster than the forward).
constexpr Bound kBounds[] = {{"matmul", 0.3, 0.95}, {"fp8_matmul", 0.2, 0.95}, {"attention", 0.1, 0.95}, {"backward", 0.3, 1.0}};
// A recipe's or kernel's own parameter takes its base efficiency's bounds.
const Bound& BoundOf(std::string_view name) {
  return *std::find_if(std::begin(kBounds), std::end(kBounds), [&](const Bound& b) { return name == b.name; });
}

// "matmul 0.3-0.95, fp8_matmul (each recipe) 0.2-0.95, ...": kBounds as the provenance says them.
std::string BoundsText() {
  std::vector<std::string> parts;
  for (const Bound& b : kBounds) {
    const std::string each = std::string_view(b.name) == "fp8_matmul" ? " (each recipe)" : std::string_view(b.name) == "attention" ? " (each kernel)" : "";
    parts.push_back(std::string(b.name) + each + " " + FormatFixed(b.low, 2) + "-" + FormatFixed(b.high, 2));
  }
  return JoinNames(parts);
}

// A parameter's name after `prefix` ("fp8_matmul.rowwise" after "fp8_matmul."), or "".
std::string After(const std::string& name, std::string_view prefix) {
  return name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : std::string();
}
// The efficiencies' own name for a plan's `value`: "" where it is the base efficiency's (`base`).
std::string Own(const std::string& value, std::string_view base) { return value == base ? "" : value; }

// "fp8_matmul.<recipe>": an FP8 scaling recipe's own GEMM efficiency (EfficiencySpec's
// fp8_matmul_recipes); "attention.<kernel>": an attention kernel's (attention_kernels: triton,
// flex). Each fitted where the group's runs use it; "" for other names.
constexpr std::string_view kRecipePrefix = "fp8_matmul.", kKernelPrefix = "attention.";
std::string RecipeOf(const std::string& name) { return After(name, kRecipePrefix); }
std::string KernelOf(const std::string& name) { return After(name, kKernelPrefix); }
// A plan's recipe and kernel as the efficiencies name them: tensorwise is fp8_matmul's own,
// flash attention's; unfused attention has none (its products run at the matmul share).
std::string RecipeOf(const PlanSpec& plan) { return Own(Fp8RecipeOf(plan), "tensorwise"); }
std::string KernelOf(const PlanSpec& plan) { return plan.flash_attention ? Own(AttentionKernelOf(plan), "flash") : ""; }

double& Field(EfficiencySpec& e, const std::string& name) {
  if (name == "matmul") return e.matmul;
  if (name == "backward") return e.backward;
  if (name == "fp8_matmul") return e.fp8_matmul;
  if (const std::string recipe = RecipeOf(name); !recipe.empty()) return e.fp8_matmul_recipes[recipe];
  if (const std::string kernel = KernelOf(name); !kernel.empty()) return e.attention_kernels[kernel];
  return e.attention;
}

double Start(const EfficiencySpec& e, const std::string& name) {
  if (name == "matmul") return e.matmul;
  if (name == "backward") return e.backward;
  if (name == "fp8_matmul") return e.Fp8Matmul();
  if (const std::string recipe = RecipeOf(name); !recipe.empty()) return e.Fp8Matmul(recipe);
  if (const std::string kernel = KernelOf(name); !kernel.empty()) return e.Attention(kernel);
  return e.Attention();
}

bool Acts(const std::string& name, const PlanSpec& plan) {
  if (name == "backward") return true;  // every run has backward passes
  if (name == "fp8_matmul") return plan.dtype == "fp8" && RecipeOf(plan).empty();
  if (const std::string recipe = RecipeOf(name); !recipe.empty()) return RecipeOf(plan) == recipe;
  if (name == "matmul") return plan.dtype != "fp8";
  if (const std::string kernel = KernelOf(name); !kernel.empty()) return KernelOf(plan) == kernel;
  return plan.flash_attention && KernelOf(plan).empty();  // attention: the flash kernels'; a fitted kernel's runs are its own
}

// A recipe's or kernel's own parameter that no fit run uses: it runs at what it falls back to
// (fp8_matmul, attention), fitted or not, and is never written.
bool FallsBack(const FittedParameter& f) { return f.fit_runs == 0 && (!RecipeOf(f.name).empty() || !KernelOf(f.name).empty()); }

sim::StepReport EstimateWith(Prepared& p, const std::vector<FittedParameter>& parameters) {
  for (const FittedParameter& f : parameters) {
    if (FallsBack(f)) continue;
    Field(p.cluster.efficiency, f.name) = f.value;
  }
  return sim::Estimate(p.program, p.cluster, *p.collectives);
}

// log(predicted / measured) of every fit run, with the efficiencies `parameters` says.
std::vector<double> LogErrors(std::vector<Prepared>& prepared, const std::vector<FittedParameter>& parameters) {
  std::vector<double> errors;
  for (Prepared& p : prepared) {
    if (p.run->fit) errors.push_back(std::log(EstimateWith(p, parameters).step_time_s / p.run->step_time_s));
  }
  return errors;
}

GroupFit FitGroup(const std::string& group, std::vector<Prepared>& prepared, const FitOptions& options) {
  GroupFit g;
  g.group = group;
  const Prepared* largest = &prepared.front();
  for (const Prepared& p : prepared) {
    if (DeviceCount(p.cluster) > DeviceCount(largest->cluster)) largest = &p;
    g.fit_runs += p.run->fit ? 1 : 0;
  }
  g.cluster = largest->cluster;
  g.start = EfficiencyOrigin(g.cluster);
  g.start_fitted = UsesFittedEfficiencies(g.cluster);
  std::vector<std::pair<std::string, Bound>> bounds;
  for (const Bound& b : kBounds) bounds.emplace_back(b.name, b);
  // One parameter per FP8 recipe other than tensorwise and per attention kernel other than flash
  // that the group's runs use, in the order they first appear.
  auto own_parameters = [&](std::string (*of)(const PlanSpec&), std::string_view prefix, const Bound& bound) {
    std::vector<std::string> seen;
    for (const Prepared& p : prepared) {
      const std::string value = of(p.run->plan);
      if (value.empty() || std::find(seen.begin(), seen.end(), value) != seen.end()) continue;
      seen.push_back(value);
      bounds.emplace_back(std::string(prefix) + value, bound);
    }
  };
  own_parameters(RecipeOf, kRecipePrefix, BoundOf("fp8_matmul"));
  own_parameters(KernelOf, kKernelPrefix, BoundOf("attention"));
  // The backward passes' share trades off against the forward rates unless the fit runs redo
  // different amounts of forward work (recomputation none, selective, full): fitted only then.
  std::vector<Recompute> redo;
  for (const Prepared& p : prepared) {
    if (p.run->fit && std::find(redo.begin(), redo.end(), p.run->plan.recompute) == redo.end()) redo.push_back(p.run->plan.recompute);
  }
  for (const auto& [name, b] : bounds) {
    FittedParameter f{.name = name, .start = Start(g.cluster.efficiency, name), .low = b.low, .high = b.high};
    f.value = f.start;
    for (const Prepared& p : prepared) f.fit_runs += p.run->fit && Acts(f.name, p.run->plan) ? 1 : 0;
    if (f.name == "backward" && redo.size() < 2) f.fit_runs = 0;
    g.parameters.push_back(f);
  }
  g.fitted = options.fit && g.fit_runs > 0;
  // Too few fit runs for the efficiencies acting on them: one scale of the rates (GroupFit::tied),
  // `backward` beside it only where the runs number twice the two.
  const int64_t acting = g.FreeParameters();
  g.tied = g.fitted && acting > 1 && g.fit_runs < 2 * acting;
  if (g.tied) {
    g.tied_from = acting;
    for (FittedParameter& f : g.parameters) {
      if (f.name == "backward" && f.fit_runs > 0 && g.fit_runs < 2 * g.FreeParameters()) {
        f.fit_runs = 0;
        g.tied_backward_kept = true;
      }
    }
  }
  if (g.fitted) {
    // Least squares in log space over the parameters some fit run depends on, or (tied) over one
    // log scale of the rates' starts (each start first clamped into its bounds): the scale ranges
    // as far as the loosest rate may move, and each rate stops at its own bound.
    std::vector<size_t> fitted, slot;  // slot: each fitted parameter's place in x
    std::vector<double> x, low, high;
    int scale = -1;  // tied: the common scale's place in x
    auto base = [](const FittedParameter& f) { return std::clamp(f.start, f.low, f.high); };
    for (size_t i = 0; i < g.parameters.size(); ++i) {
      const FittedParameter& f = g.parameters[i];
      if (f.fit_runs == 0) continue;
      fitted.push_back(i);
      if (!g.tied || f.name == "backward") {
        slot.push_back(x.size());
        x.push_back(std::log(f.value));
        low.push_back(std::log(f.low));
        high.push_back(std::log(f.high));
      } else if (scale < 0) {
        scale = static_cast<int>(x.size());
        slot.push_back(x.size());
        x.push_back(0.0);
        low.push_back(std::log(f.low / base(f)));
        high.push_back(std::log(f.high / base(f)));
      } else {
        slot.push_back(static_cast<size_t>(scale));
        low[scale] = std::min(low[scale], std::log(f.low / base(f)));
        high[scale] = std::max(high[scale], std::log(f.high / base(f)));
      }
    }
    auto set = [&](const std::vector<double>& at) {
      for (size_t k = 0; k < fitted.size(); ++k) {
        FittedParameter& f = g.parameters[fitted[k]];
        const bool scaled = g.tied && static_cast<int>(slot[k]) == scale;
        f.value = std::clamp(scaled ? base(f) * std::exp(at[slot[k]]) : std::exp(at[slot[k]]), f.low, f.high);
      }
    };
    const LeastSquaresFit fit = MinimiseSquares([&](const std::vector<double>& at) {
      set(at);
      return LogErrors(prepared, g.parameters);
    }, x, low, high);
    set(fit.x);
    g.evaluations = fit.evaluations;
    g.iterations = fit.iterations;
    g.converged = fit.converged;
    if (scale >= 0) g.tied_scale = std::exp(fit.x[static_cast<size_t>(scale)]);
    for (size_t k = 0; k < fitted.size(); ++k) g.parameters[fitted[k]].relative_error = fit.std_error[slot[k]];
    std::vector<std::string> figures, starts;
    int64_t fp8_runs = 0;
    for (const Prepared& p : prepared) fp8_runs += p.run->fit && p.run->plan.dtype == "fp8" ? 1 : 0;
    for (FittedParameter& f : g.parameters) {
      if (f.fit_runs == 0) continue;
      f.at_bound = f.value < f.low * 1.01 || f.value > f.high * 0.99;
      if (f.at_bound) f.relative_error = std::nan("");  // held there, or a tied rate its bound stopped
      Field(g.cluster.efficiency, f.name) = f.value;
      figures.push_back(f.name + " " + FormatFixed(f.value, 3) + " (" + std::to_string(f.fit_runs) + " runs" +
                        (f.name == "matmul" && fp8_runs > 0 ? ", and the output heads and routers of the " + std::to_string(fp8_runs) + " fp8 runs" : "") + ")");
      if (f.name != "backward") starts.push_back(FormatFixed(base(f), 3));
    }
    // fp8 runs' output heads run at the 16-bit matmul figure (Op::sixteen_bit); with no 16-bit fit
    // run it is not fitted (the heads alone, a few percent of the work, would not determine it).
    const bool matmul_fitted = std::any_of(g.parameters.begin(), g.parameters.end(), [](const FittedParameter& f) { return f.name == "matmul" && f.fit_runs > 0; });
    if (fp8_runs > 0 && !matmul_fitted) {
      figures.push_back("the fp8 runs' output heads and routers at matmul " + FormatFixed(g.cluster.efficiency.matmul, 3) + " (not fitted: no 16-bit fit run)");
    }
    std::string tied;
    if (g.tied) {
      tied = "; " + JoinNames(g.TiedRates()) + " as one scale (x" + FormatFixed(g.tied_scale, 3) + ") of their starts in bounds " + JoinNames(starts) +
             ", too few fit runs to fit each" + (g.tied_backward_kept ? ", backward kept at its start" : "");
    }
    g.cluster.efficiency.source = "fitted by shardsim calibrate --from-runs to the measured step times of the " + std::to_string(g.fit_runs) +
                                  " fit runs of group '" + group + "' in " + options.source_path + ": " + JoinNames(figures) + tied +
                                  "; least squares of log(predicted/measured) (Levenberg-Marquardt, " + std::string(g.converged ? "converged" : "not converged") + "), bounds " + BoundsText() + "; hbm " +
                                  FormatFixed(g.cluster.efficiency.hbm, 2) + " kept from the catalogue";
  }
  // A recipe or kernel no fit run uses runs at what it falls back to: its figure is that one.
  for (FittedParameter& f : g.parameters) {
    if (FallsBack(f)) f.value = Start(g.cluster.efficiency, f.name);
  }
  double sum = 0;
  for (Prepared& p : prepared) {
    const sim::StepReport r = EstimateWith(p, g.parameters);
    g.results.push_back({p.run, r.step_time_s, r.step_time_s / p.run->step_time_s - 1, BytesToGiB(r.memory.peak.total()), !r.hbm_fits, BytesToGiB(r.hbm_bytes)});
    if (p.run->fit) sum += std::pow(std::log(r.step_time_s / p.run->step_time_s), 2);
  }
  g.rms_log_error = g.fit_runs > 0 ? std::sqrt(sum / static_cast<double>(g.fit_runs)) : 0;
  return g;
}

}  // namespace

std::vector<GroupFit> FitRuns(const std::vector<PublishedRun>& runs, const FitOptions& options) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<Prepared>> groups;
  for (const PublishedRun& run : runs) {
    if (!groups.count(run.group)) order.push_back(run.group);
    Prepared p{.run = &run, .cluster = LoadCluster(options.catalogue ? WithCatalogueEfficiencies(run.cluster) : run.cluster)};
    p.cluster.name = run.cluster;  // as the run names it, whatever efficiencies it starts from
    p.graph = std::make_unique<topologies::Cluster>(p.cluster);
    p.collectives = std::make_unique<sim::AxisCollectives>(*p.graph, run.plan);
    p.program = strategies::BuildStep(run.model, run.plan);
    groups[run.group].push_back(std::move(p));
  }
  std::vector<GroupFit> fits;
  for (const std::string& group : order) fits.push_back(FitGroup(group, groups[group], options));
  return fits;
}

}  // namespace shardsim::validation
