#include "cli/step_inputs.h"

#include "core/error.h"
#include "core/inputs.h"
#include "core/plan_json.h"
#include "strategies/plan_rules.h"

namespace shardsim::cli {

StepInputs LoadStepInputs(const Inputs& o, const std::string& command) {
  if (o.model.empty() || o.cluster.empty()) throw InputError(command, "needs --model and --cluster", "", "e.g. --model llama3-8b --cluster dgx-h100:8");
  if (o.plan.empty() && o.overrides.empty()) throw InputError(command, "needs a plan", "--plan FILE and/or --set key=value", "see examples/*.plan.json");
  StepInputs in{LoadModel(o.model), LoadCluster(o.cluster), LoadPlan(o.plan, o.overrides)};
  const std::string where = PlanSource(o.plan, o.overrides);
  if (in.cluster.chip.peak_flop_per_s.count(in.plan.dtype) == 0) {
    throw InputError(where + ":/dtype", "dtype '" + in.plan.dtype + "' has no peak on " + in.cluster.chip.name, "", "set dtype to one the chip lists");
  }
  strategies::ValidatePlan(in.plan, in.model, DeviceCount(in.cluster), in.cluster.name, where + ":");
  return in;
}

}  // namespace shardsim::cli
