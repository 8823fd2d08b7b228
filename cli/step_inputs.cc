#include "cli/step_inputs.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/inputs.h"
#include "core/plan_json.h"
#include "core/suggest.h"
#include "planner/framework_facts.h"
#include "planner/frameworks.h"
#include "strategies/plan_rules.h"

namespace shardsim::cli {
namespace {

// The values of `key` (a short list's: PlanFieldChoices) with which `framework` runs `plan`
// without a gap at `field`, the rest of the plan as it is; empty where none does or the key
// takes no short list.
std::vector<std::string> ValuesTheFrameworkRuns(planner::Framework framework, const ModelSpec& model, const PlanSpec& plan,
                                                const std::string& field, const std::string& key) {
  std::vector<std::string> runs;
  const nlohmann::json written = PlanToJson(plan);
  for (const std::string& value : PlanFieldChoices(key)) {
    nlohmann::json changed = written;
    try {
      ApplyPlanOverride(changed, key + "=" + value);
      const std::vector<planner::FrameworkGap> gaps = planner::FrameworkGapsByField(framework, model, PlanFromJson(changed, "plan"));
      if (std::none_of(gaps.begin(), gaps.end(), [&](const planner::FrameworkGap& gap) { return gap.field == field; })) runs.push_back(value);
    } catch (const InputError&) {
      // A value the rest of the plan does not take (fp8_recipe without dtype fp8): not one to offer.
    }
  }
  return runs;
}

}  // namespace

StepInputs LoadStepInputs(const Inputs& o, const std::string& command) {
  if (o.model.empty() || o.cluster.empty()) throw InputError(command, "needs --model and --cluster", "", "e.g. --model llama3-8b --cluster dgx-h100:8");
  if (o.plan.empty() && o.overrides.empty()) throw InputError(command, "needs a plan", "--plan FILE and/or --set key=value", "see examples/*.plan.json");
  StepInputs in{LoadModel(o.model), LoadCluster(o.cluster), LoadPlan(o.plan, o.overrides), {}};
  in.as_written = in.plan;
  const std::string where = PlanSource(o.plan, o.overrides);
  CheckPlanOnCluster(in.plan, in.cluster, where);
  strategies::ValidatePlan(in.plan, in.model, DeviceCount(in.cluster), in.cluster.name, where + ":");
  // A plan that names its framework must be one that framework runs (what `plan --framework`
  // returns always is).
  if (!in.plan.framework.empty()) {
    const planner::Framework framework = planner::ParseFramework(in.plan.framework, where + ":/framework");
    // An unset stage layout is the framework's own split (DeepSpeed's of uneven layers).
    if (in.plan.pipeline_layout.empty()) in.plan.pipeline_layout = planner::AsFrameworkRuns(framework, in.model, in.plan).pipeline_layout;
    const std::vector<planner::FrameworkGap> gaps = planner::FrameworkGapsByField(framework, in.model, in.plan);
    if (!gaps.empty()) {
      // At the field the first gap is about (a gap of the model's at the framework field); the
      // others' fields listed, and the first's --set key named in the hint.
      auto at = [](const planner::FrameworkGap& gap) { return gap.field.empty() ? std::string("/framework") : gap.field; };
      std::vector<std::string> others;
      for (size_t i = 1; i < gaps.size(); ++i) others.push_back(at(gaps[i]));
      const std::string key = OverrideKeyOf(gaps.front().field);  // "" for the model's
      const std::vector<std::string> values = ValuesTheFrameworkRuns(framework, in.model, in.plan, gaps.front().field, key);
      // The profile is of one commit: an older or newer framework may run what this one does not.
      throw InputError(where + ":" + at(gaps.front()), in.plan.framework + " (profiled at " + std::string(planner::FactsOf(framework).source) +
                                                          ") cannot run this plan: " + gaps.front().text +
                                                          (others.empty() ? "" : " (and " + std::to_string(others.size()) + " more, at " + JoinNames(others) + ")"),
                       values.empty() ? "a plan the framework runs (docs/frameworks.md)" : key + " " + JoinNames(values) + " (with the rest of this plan)",
                       (key.empty() ? "" : "change " + key + ", ") + "drop the framework field, or let 'shardsim plan --framework " + in.plan.framework + "' pick one");
    }
    // What the plan leaves unset is what the framework does (its gradient-reduction dtype).
    in.plan = planner::AsFrameworkRuns(framework, in.model, in.plan);
  }
  return in;
}

}  // namespace shardsim::cli
