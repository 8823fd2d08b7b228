// shardsim's own model JSON (written and read back identically) and import of Hugging Face
// config.json files, so users can point --model at the file they already have.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/model_spec.h"

namespace shardsim {

// Every field, explicitly (no defaults left implicit), so the file documents the model.
nlohmann::json ModelToJson(const ModelSpec& model);

// Reads shardsim model JSON strictly: unknown keys, wrong types and bad sizes throw InputError
// naming `where` and the field. The result is validated (ValidateModel).
ModelSpec ModelFromJson(const nlohmann::json& value, const std::string& where);

// True when `value` looks like a Hugging Face config (it has "model_type").
bool IsHfConfig(const nlohmann::json& value);

// Model types ModelFromHfConfig understands.
std::vector<std::string> HfModelTypes();

// Imports a Hugging Face config.json. Keys the model does not need are ignored (HF configs carry
// many); required keys missing, wrong types, or an unsupported model_type throw InputError.
// `name` becomes the model's name (the HF config has none of its own).
ModelSpec ModelFromHfConfig(const nlohmann::json& value, const std::string& where, const std::string& name);

}  // namespace shardsim
