#include "planner/constraints.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/plan_json.h"
#include "strategies/plan_rules.h"

namespace shardsim::planner {
namespace {

using nlohmann::json;

// The fixed field `key` ("dtype", "mesh.tensor") of a plan in its JSON form.
const json& Field(const json& plan, const std::string& key) {
  // Fields PlanToJson leaves out when unset (expert_axes [], the optional strings) read as null;
  // those it leaves out at their default (offload_layers 0, repeat_kv false) read as the default.
  static const json kUnset, kDefaults = {{"offload_layers", 0}, {"repeat_kv", false}};
  const size_t dot = key.find('.');
  if (dot == std::string::npos) return plan.contains(key) ? plan.at(key) : kDefaults.contains(key) ? kDefaults.at(key) : kUnset;
  return plan.at(key.substr(0, dot)).at(key.substr(dot + 1));
}

}  // namespace

bool PlanConstraints::Fixes(std::string_view key) const { return std::find(fixed.begin(), fixed.end(), key) != fixed.end(); }

bool PlanConstraints::FixesAxis(MeshAxis axis) const { return Fixes("mesh." + std::string(AxisFacts(axis).name)); }

bool PlanConstraints::Allows(const PlanSpec& plan) const {
  if (fixed.empty()) return true;
  // Compared in the plan JSON's form, so that every field --set names is covered by one rule.
  const json want = PlanToJson(values), have = PlanToJson(plan);
  for (const std::string& key : fixed) {
    if (Field(want, key) != Field(have, key)) return false;
  }
  return true;
}

PlanConstraints ConstraintsFromJson(const json& plan, const std::string& where) {
  PlanConstraints c;
  c.source = where;
  if (!plan.is_object()) return c;
  for (const auto& [key, value] : plan.items()) {
    if ((key == "mesh" || key == "overlap") && value.is_object()) {
      for (const auto& [axis, size] : value.items()) c.fixed.push_back(key + "." + axis);
    } else {
      c.fixed.push_back(key);
    }
  }
  // The reader needs a mesh and a batch; fields the user left out are not fixed.
  json full = plan;
  if (!full.contains("mesh")) full["mesh"] = json::object();
  if (!full.contains("global_batch_size")) full["global_batch_size"] = 1;
  if (!full.contains("seq_len")) full["seq_len"] = 1;
  c.values = PlanFromJson(full, where);
  // A fixed order is checked now: the search would otherwise meet an unknown axis deep inside.
  if (c.Fixes("mesh_order")) strategies::ValidateMeshOrder(c.values, where + ":");
  return c;
}

json FixedJson(const PlanConstraints& constraints) {
  const json values = PlanToJson(constraints.values);
  json fixed = json::object();
  for (const std::string& key : constraints.fixed) fixed[key] = Field(values, key);
  return fixed;
}

std::string DescribeFixed(const PlanConstraints& constraints) {
  std::string text;
  const json fixed = FixedJson(constraints);
  for (const auto& [key, v] : fixed.items()) {
    std::string shown;
    if (v.is_string()) {
      shown = v.get<std::string>();
    } else if (v.is_array()) {
      for (const json& e : v) shown += (shown.empty() ? "" : ",") + e.get<std::string>();
    } else if (v.is_null()) {
      shown = "unset";  // a field fixed to its unset value (expert_axes [], an empty string)
    } else {
      shown = v.dump();
    }
    text += (text.empty() ? "" : ", ") + key + "=" + shown;
  }
  return text;
}

}  // namespace shardsim::planner
