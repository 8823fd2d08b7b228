#include "planner/rule_refusals.h"

#include <algorithm>
#include <utility>

namespace shardsim::planner {

void RuleRefusalTally::AddExample(RuleRefusal& r, RefusalExample e) {
  r.plans += e.plans;
  auto same = std::find_if(r.examples.begin(), r.examples.end(), [&](const RefusalExample& a) { return a.why.hint == e.why.hint; });
  if (same == r.examples.end()) {
    r.examples.push_back(std::move(e));
  } else {
    same->plans += e.plans;
  }
}

void RuleRefusalTally::Add(const PlanSpec& plan, const Infeasibility& why) {
  RuleRefusal& r = by_field_[why.field];
  r.field = why.field;
  AddExample(r, {plan, why, 1});
}

void RuleRefusalTally::Merge(RuleRefusalTally other) {
  for (auto& [field, theirs] : other.by_field_) {
    RuleRefusal& r = by_field_[field];
    r.field = field;
    for (RefusalExample& e : theirs.examples) AddExample(r, std::move(e));
  }
}

std::vector<RuleRefusal> RuleRefusalTally::Ranked() && {
  std::vector<RuleRefusal> out;
  for (auto& [field, r] : by_field_) {
    std::stable_sort(r.examples.begin(), r.examples.end(), [](const auto& a, const auto& b) { return a.plans > b.plans; });
    out.push_back(std::move(r));
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.plans > b.plans; });
  return out;
}

const RuleRefusal* CommonestFixed(const std::vector<RuleRefusal>& refusals, const PlanConstraints& constraints) {
  for (const RuleRefusal& r : refusals) {
    if (constraints.Fixes(r.field) && !r.examples.empty()) return &r;
  }
  return nullptr;
}

int64_t RefusedPlans(const std::vector<RuleRefusal>& refusals) {
  int64_t plans = 0;
  for (const RuleRefusal& r : refusals) plans += r.plans;
  return plans;
}

}  // namespace shardsim::planner
