// Plan JSON (the CLI docs' format): reading strictly, writing every field, and `--set key=value`
// overrides applied to the JSON before it is read.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/plan_spec.h"

namespace shardsim {

nlohmann::json PlanToJson(const PlanSpec& plan);

// Reads a plan strictly (unknown keys, wrong types, out-of-range values and unknown schedule
// or recompute names throw InputError naming `where` and the field). Mesh axes left out are 1.
// Checks only what the plan alone determines; ValidatePlan checks it against a model and cluster.
PlanSpec PlanFromJson(const nlohmann::json& value, const std::string& where);

// Applies one "key=value" override: keys are top-level plan keys or "mesh.AXIS" / "overlap.AXIS";
// the value is read as JSON when it parses (4, true, "x") and as a string otherwise;
// "mesh_order=a,b,c" takes a comma list. Throws InputError for unknown keys (with the closest).
void ApplyPlanOverride(nlohmann::json& plan, const std::string& assignment);

// Every key --set accepts.
std::vector<std::string> PlanOverrideKeys();

// The values a --set key takes where they are a short list (the enumerated strings, true /
// false, ZeRO's stages); empty for sizes, counts and free text. PlanFromJson reads each
// enumerated field against it. (Schedules are strategies::ScheduleNames.)
std::vector<std::string> PlanFieldChoices(const std::string& key);

// The --set key of a JSON pointer into a plan ("/overlap/tensor" -> "overlap.tensor"); "" for a
// pointer that names none of PlanOverrideKeys.
std::string OverrideKeyOf(const std::string& pointer);

}  // namespace shardsim
