#include "cli/step_inputs.h"

#include <algorithm>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/inputs.h"
#include "core/mesh_axes.h"
#include "core/plan_json.h"
#include "core/suggest.h"
#include "planner/framework_facts.h"
#include "planner/frameworks.h"
#include "strategies/plan_rules.h"
#include "strategies/schedule.h"

namespace shardsim::cli {
namespace {

// The values of `key` (a short list's: PlanFieldChoices, or the schedules) with which the rest
// of the plan as it is stays a plan of the cluster and `framework` runs it without the gaps at
// `field` and without new ones; empty where none does or the key takes no short list.
std::vector<std::string> ValuesTheFrameworkRuns(planner::Framework framework, const StepInputs& in, const std::vector<planner::FrameworkGap>& gaps,
                                                const std::string& key) {
  const std::string& field = gaps.front().field;
  std::set<std::string> others;
  for (const planner::FrameworkGap& gap : gaps) {
    if (gap.field != field) others.insert(gap.field);
  }
  std::vector<std::string> runs;
  const nlohmann::json written = PlanToJson(in.plan);
  for (const std::string& value : key == "pipeline_schedule" ? strategies::ScheduleNames() : PlanFieldChoices(key)) {
    nlohmann::json changed = written;
    try {
      ApplyPlanOverride(changed, key + "=" + value);
      const PlanSpec plan = PlanFromJson(changed, "plan");
      CheckPlanOnCluster(plan, in.cluster, "plan");
      strategies::ValidatePlan(plan, in.model, DeviceCount(in.cluster), in.cluster.name, "plan:");
      const std::vector<planner::FrameworkGap> left = planner::FrameworkGapsByField(framework, in.model, plan);
      if (std::all_of(left.begin(), left.end(), [&](const planner::FrameworkGap& gap) { return others.count(gap.field) > 0; })) runs.push_back(value);
    } catch (const InputError&) {
      // A value the rest of the plan or the cluster does not take (fp8_recipe without dtype fp8,
      // a dtype without a peak on this chip): not one to offer.
    }
  }
  return runs;
}

}  // namespace

StepInputs LoadStepInputs(const Inputs& o, const std::string& command) {
  if (o.model.empty() || o.cluster.empty()) throw InputError(command, "needs --model and --cluster", "--model M --cluster C (shardsim presets lists both)", "e.g. --model llama3-8b --cluster dgx-h100:8");
  // The model and cluster first: a mistyped name is said before a missing plan.
  ModelSpec model = LoadModel(o.model);
  ClusterSpec cluster = LoadCluster(o.cluster);
  if (o.plan.empty() && o.overrides.empty()) throw InputError(command, "needs a plan", "--plan FILE and/or --set key=value", "see examples/*.plan.json");
  StepInputs in{std::move(model), std::move(cluster), LoadPlan(o.plan, o.overrides), {}};
  in.as_written = in.plan;
  const std::string where = PlanSource(o.plan, o.overrides);
  CheckPlanOnCluster(in.plan, in.cluster, where);
  strategies::ValidatePlan(in.plan, in.model, DeviceCount(in.cluster), in.cluster.name, where + ":");
  // A plan that names its framework must be one that framework runs (what `plan --framework`
  // returns always is).
  if (!in.plan.framework.empty()) {
    const planner::Framework framework = planner::ParseFramework(in.plan.framework, where + ":/framework");
    // What the plan does not write is the framework's: an unset stage layout its own split
    // (DeepSpeed's of uneven layers), an overlap switch or the context K/V exchange the
    // framework's where it fixes them (the plan's defaults are on and ring). Only what the plan
    // writes can be refused.
    const PlanSpec runs = planner::AsFrameworkRuns(framework, in.model, in.plan);
    if (in.plan.pipeline_layout.empty()) in.plan.pipeline_layout = runs.pipeline_layout;
    const nlohmann::json written = LoadPlanJson(o.plan, o.overrides);
    for (const MeshAxisFacts& axis : kMeshAxes) {
      if (!written.contains("overlap") || !written["overlap"].contains(axis.name)) in.plan.overlap.Overlaps(axis.axis) = runs.overlap.Overlaps(axis.axis);
    }
    if (!written.contains("context_kv")) in.plan.context_kv = runs.context_kv;
    const std::vector<planner::FrameworkGap> gaps = planner::FrameworkGapsByField(framework, in.model, in.plan);
    if (!gaps.empty()) {
      // At the field the first gap is about (a gap of the model's at the framework field); the
      // others' fields listed, and the first's --set key named in the hint.
      auto at = [](const planner::FrameworkGap& gap) { return gap.field.empty() ? std::string("/framework") : gap.field; };
      std::vector<std::string> others;
      for (size_t i = 1; i < gaps.size(); ++i) {
        if (at(gaps[i]) != at(gaps.front()) && std::find(others.begin(), others.end(), at(gaps[i])) == others.end()) others.push_back(at(gaps[i]));
      }
      const std::string key = OverrideKeyOf(gaps.front().field);  // "" for the model's
      const std::vector<std::string> values = ValuesTheFrameworkRuns(framework, in, gaps, key);
      const std::string valid = !gaps.front().valid.empty() ? gaps.front().valid
                                : values.empty()            ? "a plan the framework runs (docs/frameworks.md)"
                                                            : key + " " + JoinNames(values) + " (with the rest of this plan)";
      // The profile is of one commit: an older or newer framework may run what this one does not.
      throw InputError(where + ":" + at(gaps.front()), in.plan.framework + " (profiled at " + std::string(planner::FactsOf(framework).source) +
                                                          ") cannot run this plan: " + gaps.front().text +
                                                          (others.empty() ? "" : " (and " + std::to_string(others.size()) + " more, at " + JoinNames(others) + ")"),
                       valid,
                       (key.empty() ? "" : "change " + key + ", ") + "drop the framework field, or let 'shardsim plan --framework " + in.plan.framework + "' pick one");
    }
    // What the plan leaves unset is what the framework does (its gradient-reduction dtype).
    in.plan = planner::AsFrameworkRuns(framework, in.model, in.plan);
  }
  return in;
}

}  // namespace shardsim::cli
