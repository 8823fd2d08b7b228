// The hardware catalogue (data/hardware.json) and the presets' fitted efficiencies
// (data/fitted_presets.json), embedded into the binary at build time so the tool needs no data
// files at run time.
#pragma once

#include <string_view>

namespace shardsim {

// The text of data/hardware.json as it was when the binary was built.
std::string_view HardwareCatalogText();

// The text of data/fitted_presets.json as it was when the binary was built: per catalogue system,
// the efficiencies `calibrate --from-runs` fitted to the published runs of
// tests/data/measured_runs.json (scripts/refit_presets.sh writes it).
std::string_view FittedPresetsText();

}  // namespace shardsim
