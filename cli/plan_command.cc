// `shardsim plan`: the best ways to shard a model on a cluster within the user's constraints and
// framework, why they win, the runner-up of each other family of parallelism with why it lost,
// and, when nothing fits, how far off the nearest plans are and how many devices would do.
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/memory_limit.h"
#include "cli/plan_output.h"
#include "cli/plan_text.h"
#include "cli/sim_limits.h"
#include "core/error.h"
#include "core/run_cost.h"
#include "core/inputs.h"
#include "core/output_file.h"
#include "core/units.h"
#include "planner/pareto_plot.h"

namespace shardsim::cli {
namespace {

// Exit status when no plan fits (docs/cli.md): the search ran, the answer is "none".
constexpr int kNothingFits = 3;

// The tokens per step and sequence length from the flags, else from the plan's fixed fields; a
// flag and a fixed field that disagree are an error.
void ResolveBatch(const PlanOptions& o, const planner::PlanConstraints& fixed, int64_t& tokens, int64_t& seq_len) {
  seq_len = o.seq_len;
  if (fixed.Fixes("seq_len")) {
    if (seq_len > 0 && seq_len != fixed.values.seq_len) {
      throw InputError("--seq-len " + std::to_string(seq_len), "differs from the plan's seq_len " + std::to_string(fixed.values.seq_len), "one of them",
                       "drop --seq-len or the plan's seq_len");
    }
    seq_len = fixed.values.seq_len;
  }
  tokens = o.global_batch_tokens;
  if (fixed.Fixes("global_batch_size") && seq_len > 0) {
    const int64_t planned = CheckedMul(fixed.values.global_batch_size, seq_len, "the plan's global_batch_size x seq_len");
    if (tokens > 0 && tokens != planned) {
      throw InputError("--global-batch-tokens " + std::to_string(tokens), "differs from the plan's global_batch_size x seq_len = " + std::to_string(planned),
                       "one of them", "drop --global-batch-tokens or the plan's global_batch_size");
    }
    tokens = planned;
  }
  if (tokens <= 0 || seq_len <= 0) {
    throw InputError("plan", "needs --global-batch-tokens T and --seq-len S (or global_batch_size and seq_len in --plan/--set)", "positive whole numbers",
                     "e.g. --global-batch-tokens 4M --seq-len 8192");
  }
}

}  // namespace

int RunPlan(const PlanOptions& o, std::ostream& out) {
  if (o.model.empty() || o.cluster.empty()) throw InputError("plan", "needs --model and --cluster", "--model M --cluster C (shardsim presets lists both)", "e.g. --model llama3-8b --cluster dgx-h100:64");
  const ModelSpec model = LoadModel(o.model);
  const ClusterSpec cluster = LoadCluster(o.cluster);
  PlanFindings f(model, cluster, o);
  if (!o.plan.empty() || !o.overrides.empty()) {
    f.constraints = planner::ConstraintsFromJson(LoadPlanJson(o.plan, o.overrides), PlanSource(o.plan, o.overrides));
  }
  ResolveBatch(o, f.constraints, f.tokens_per_step, f.seq_len);
  CheckTrainTokens(o.train_tokens, static_cast<double>(f.tokens_per_step));
  if (f.constraints.Fixes("dtype") || f.constraints.Fixes("ep_dispatcher") || f.constraints.Fixes("attention_kernel") || f.constraints.Fixes("offload_layers")) {
    CheckPlanOnCluster(f.constraints.values, cluster, PlanSource(o.plan, o.overrides));
  }
  if (f.constraints.values.offload_layers > model.num_layers) {
    throw InputError(PlanSource(o.plan, o.overrides) + ":/offload_layers",
                     "offload_layers=" + std::to_string(f.constraints.values.offload_layers) + " is more than the " + std::to_string(model.num_layers) +
                         " decoder layers of '" + model.name + "'",
                     "0 to " + std::to_string(model.num_layers), "offload_layers counts the first decoder layers of each model chunk");
  }
  // Fixed expert fields on a dense model would prune every plan for one reason: said at once.
  if (!model.moe) {
    const PlanSpec& fixed = f.constraints.values;
    for (const auto& [field, value, inert] : {std::tuple{"ep_dispatcher", fixed.ep_dispatcher, std::string("alltoall")},
                                              std::tuple{"ep_dispatch_dtype", fixed.ep_dispatch_dtype, std::string("bf16")},
                                              std::tuple{"expert_routing", fixed.expert_routing, std::string("uniform")}}) {
      if (f.constraints.Fixes(field) && value != inert) {
        throw InputError(PlanSource(o.plan, o.overrides) + ":/" + field, std::string(field) + " " + value + " moves tokens to experts, which '" + model.name + "' has none of",
                         inert, std::string("drop ") + field + " for a dense model");
      }
    }
  }
  if (!o.framework.empty()) f.framework = planner::ParseFramework(o.framework, "--framework");
  if (f.constraints.Fixes("framework")) {
    const planner::Framework planned = planner::ParseFramework(f.constraints.values.framework, PlanSource(o.plan, o.overrides) + ":/framework");
    if (f.framework && *f.framework != planned) {
      throw InputError("--framework " + o.framework, "differs from the plan's framework " + f.constraints.values.framework, "one of them");
    }
    f.framework = planned;
  }
  if (!o.exporter.empty()) {
    f.target = planner::ParseExportTarget(o.exporter, "--export");
  } else if (f.framework) {
    f.target = planner::ParseExportTarget(std::string(planner::FrameworkName(*f.framework)), "--framework");  // the framework's own export
  }
  if (f.target) f.export_name = o.exporter.empty() ? std::string(planner::FrameworkName(*f.framework)) : o.exporter;

  // The search can take a while: a --plot that cannot be written is reported before it.
  if (!o.plot.empty()) CheckOutputWritable(o.plot, "--plot");

  planner::SearchOptions options;
  options.global_batch_tokens = f.tokens_per_step;
  options.seq_len = f.seq_len;
  options.top = static_cast<size_t>(o.top);
  options.threads = o.threads;
  options.constraints = f.constraints;
  options.framework = f.framework;
  // Empty: the search's default fraction of HBM.
  const double hbm = static_cast<double>(cluster.chip.hbm_bytes);
  if (!o.max_memory.empty()) options.max_memory_bytes = ParseMemoryLimit(o.max_memory, hbm, "--max-memory");
  if (options.max_memory_bytes > hbm) {
    throw InputError("--max-memory " + o.max_memory, "is more than the " + FormatBinaryBytes(hbm) + " of HBM per device of " + cluster.chip.name,
                     "at most the HBM (a fraction up to 1)", "e.g. --max-memory 0.95");
  }
  if (o.progress) {
    options.progress = [](int64_t done, int64_t total) { std::cerr << "\rshardsim plan: " << done << "/" << total << " meshes" << std::flush; };
  }
  f.result = planner::Search(model, cluster, options);
  if (o.progress) std::cerr << "\n";
  if (f.result.best.empty() && f.framework && f.result.nearest_misses.empty() && f.result.unsupported > 0) {
    // Not memory: the framework runs none of the plans that split this batch over these devices.
    std::string reasons;
    for (const auto& [gap, count] : f.result.framework_gaps) reasons += (reasons.empty() ? "" : "; ") + gap + " (" + std::to_string(count) + " plans)";
    throw InputError("--framework " + std::string(planner::FrameworkName(*f.framework)),
                     "runs none of the " + std::to_string(f.result.unsupported) + " plans that split this batch over the devices and keep the fixed fields: " + reasons,
                     "", "search without --framework, or change the constraints, device count or batch");
  }
  // Not memory either: the plan rules refused every plan the memory bound let through, most
  // often for a field the user fixed. That field is the input to change.
  if (const planner::RuleRefusal* r = planner::FixedFieldRefusal(f.result, f.constraints)) {
    const int64_t others = planner::RefusedPlans(f.result.rule_refusals) - r->plans;
    std::string examples;
    for (size_t i = 0; i < r->examples.size() && i < 2; ++i) examples += (i ? "; " : "") + MeshText(r->examples[i].plan) + ": " + r->examples[i].why.what;
    const Infeasibility& why = r->examples.front().why;
    throw InputError(PlanSource(o.plan, o.overrides) + ":/" + r->field,
                     "no plan on " + cluster.name + " keeps it: the plan rules refused " + std::to_string(r->plans) + " plans for it" +
                         (others > 0 ? " and " + std::to_string(others) + " for other fields" : "") + ", and no other plan was left; e.g. " + examples,
                     why.valid, why.hint.empty() ? "change or drop the fixed " + r->field : why.hint);
  }
  // With every mesh axis fixed no other size keeps the mesh: no larger size is searched.
  bool mesh_fixed = true;
  for (const MeshAxisFacts& axis : kMeshAxes) mesh_fixed = mesh_fixed && f.constraints.FixesAxis(axis.axis);
  if (f.result.best.empty()) {
    if (!mesh_fixed) {
      if (o.progress) std::cerr << "shardsim plan: nothing fits; searching larger sizes of " << cluster.system << "\n";
      options.progress = nullptr;
      f.smallest = planner::FindSmallestFit(model, cluster, o.cluster, options);
    }
  } else {
    if (!o.plot.empty()) {
      WriteOutputFile(o.plot, planner::ParetoSvg(f.result.pareto, static_cast<double>(cluster.chip.hbm_bytes),
                                                 model.name + " on " + cluster.name + ": tokens/s against memory per device"),
                      "--plot");
    }
    if (o.refine > 0) f.refinement = Refine(model, cluster, f.result.best, static_cast<size_t>(o.refine), o.progress, SimLimitsFrom(o.max_seconds, o.max_host_memory));
  }
  if (o.json) {
    out << PlanFindingsJson(f).dump(2) << "\n";
  } else {
    PrintPlanText(f, out);
  }
  return f.result.best.empty() ? kNothingFits : 0;
}

}  // namespace shardsim::cli
