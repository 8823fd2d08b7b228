// Cluster presets: `--cluster SYSTEM:SIZE[,key=value...]` strings such as "dgx-h100:64",
// "tpu-v5p:16x16x16", "tpu-v5e:16x16,slices=4", "dgx-a100:1024,fabric=fat-tree,oversubscription=2"
// or "local", built from the embedded hardware catalogue.
#pragma once

#include <string>
#include <vector>

#include "core/cluster_spec.h"

namespace shardsim {

struct SystemInfo {
  std::string name;         // "dgx-h100"
  std::string description;
  std::string size_syntax;  // "N (GPUs, a multiple of 8)", "AxBxC", ...
  std::string example;      // "dgx-h100:64"
  std::vector<std::string> options;  // accepted ",key=value" options
  bool fitted = false;  // its efficiencies are fitted to published runs (data/fitted_presets.json)
  std::string fitted_from;  // the system whose fitted compute figures it takes (data/hardware.json fitted_from); empty: its own
};

// The systems of the catalogue, in catalogue order.
std::vector<SystemInfo> ClusterSystems();

// Builds the cluster a preset string names. Throws InputError naming `where` for an unknown
// system (with suggestions), a missing or malformed size, a size the system does not come in
// (not whole nodes, not a valid slice shape, too large), or an unknown option.
ClusterSpec ParseClusterPreset(const std::string& text, const std::string& where);

// Whether `system`'s presets default to efficiencies fitted to published runs
// (data/fitted_presets.json).
bool HasFittedEfficiencies(const std::string& system);
// The system whose fitted compute figures `system`'s presets take (data/hardware.json's
// `fitted_from`), or "" where they are its own or it has none.
std::string FittedFromSystem(const std::string& system);

// `preset` at the catalogue's efficiencies (data/hardware.json): ",efficiency=catalogue" added where
// its system has fitted ones (a later option wins over an earlier one).
std::string WithCatalogueEfficiencies(const std::string& preset);

// Whether `cluster` runs at its system's fitted figures, exactly (a cluster file written from such
// a preset keeps them).
bool UsesFittedEfficiencies(const ClusterSpec& cluster);
// Where `cluster`'s efficiencies come from, in a few words: a preset's fitted defaults, the
// catalogue's figures (its system's, exactly), or a cluster file's own (its efficiency.source says
// more).
std::string EfficiencyOrigin(const ClusterSpec& cluster);

// True when `text` starts with a known system name (so it is meant as a preset, not a path).
bool LooksLikeClusterPreset(const std::string& text);

}  // namespace shardsim
