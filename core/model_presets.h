// Named models with their published parameter counts, so `--model llama3-70b` just works and
// the counts can be checked against what the authors published.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/model_spec.h"

namespace shardsim {

struct ModelPreset {
  ModelSpec spec;
  double published_params_total = 0;   // as published, in parameters
  double published_params_active = 0;  // per token; equals total for dense models
  double tolerance = 0.01;             // relative agreement the test suite requires
  std::string published_source;        // where the published counts come from
};

// All model presets, in the order `shardsim presets` lists them.
std::vector<ModelPreset> ModelPresets();
std::vector<std::string> ModelPresetNames();
// The preset named `name`, or nullopt.
std::optional<ModelPreset> FindModelPreset(const std::string& name);

}  // namespace shardsim
