// The "calibration" object of a cluster JSON (core/calibration.h), written by `shardsim
// calibrate` and read strictly like the rest of the cluster file.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "core/calibration.h"

namespace shardsim {

class JsonReader;

nlohmann::json CalibrationToJson(const CalibrationSpec& calibration);
// Throws InputError naming the field (ValidateCluster checks the tables' shape afterwards).
CalibrationSpec CalibrationFromJson(JsonReader& reader);

}  // namespace shardsim
