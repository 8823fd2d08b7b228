// Cluster JSON: the file form of ClusterSpec (what `describe --write-cluster` writes and
// `--cluster FILE.json` reads), and the parts the hardware catalogue shares with it.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "core/cluster_spec.h"

namespace shardsim {

class JsonReader;

nlohmann::json ClusterToJson(const ClusterSpec& cluster);

// Reads a cluster JSON strictly and validates it; throws InputError naming `where` and the field.
ClusterSpec ClusterFromJson(const nlohmann::json& value, const std::string& where);

// The pieces, for the catalogue (cluster_presets.cc).
ChipSpec ChipFromJson(JsonReader& reader);
std::map<std::string, LinkSpec> LinksFromJson(JsonReader& reader);
EfficiencySpec EfficiencyFromJson(JsonReader& reader);
nlohmann::json EfficiencyToJson(const EfficiencySpec& efficiency);

}  // namespace shardsim
