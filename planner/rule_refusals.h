// The plan rules' refusals (strategies::CheckPlan) a search met, by field and rule, so that a
// search whose every plan the rules refused for a fixed field can name that field.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/plan_spec.h"
#include "planner/constraints.h"

namespace shardsim::planner {

// One rule (told apart by its hint): how many plans it refused, and the first of them with its reason.
struct RefusalExample {
  PlanSpec plan;
  Infeasibility why;
  int64_t plans = 0;
};
// One field's refusals: how many plans, and its rules, commonest first.
struct RuleRefusal {
  std::string field;
  int64_t plans = 0;
  std::vector<RefusalExample> examples;
};

// Refusals as a search meets them (one tally per worker), merged in job order so the first
// refused plan stays each rule's example whatever the threads.
class RuleRefusalTally {
 public:
  void Add(const PlanSpec& plan, const Infeasibility& why);
  void Merge(RuleRefusalTally other);
  // By field, commonest first.
  std::vector<RuleRefusal> Ranked() &&;

 private:
  void AddExample(RuleRefusal& r, RefusalExample e);
  std::map<std::string, RuleRefusal> by_field_;
};

// The commonest field among `refusals` that the constraints fix, or none.
const RuleRefusal* CommonestFixed(const std::vector<RuleRefusal>& refusals, const PlanConstraints& constraints);
// The plan rules' refusals over all fields.
int64_t RefusedPlans(const std::vector<RuleRefusal>& refusals);

}  // namespace shardsim::planner
