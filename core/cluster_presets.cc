#include "core/cluster_presets.h"

#include <limits>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/cluster_json.h"
#include "core/error.h"
#include "core/hardware_catalog.h"
#include "core/json_input.h"
#include "core/suggest.h"
#include "core/text.h"
#include "core/units.h"

namespace shardsim {
namespace {

using nlohmann::json;

// Shape rules of a torus system, from its catalogue entry.
struct TorusRules {
  int64_t rank = 3;
  int64_t cube_edge = 0;  // >0: slices are sub-cubes or built of whole cubes of this edge
  int64_t max_axis = 0;   // >0: each axis is a power of two up to this
  int64_t max_chips = 0;
  std::string wraparound;  // "full-cubes" or "full-axis"
  std::string source;
};

json Catalogue() { return ParseJsonText(std::string(HardwareCatalogText()), "hardware catalogue"); }
json FittedPresets() { return ParseJsonText(std::string(FittedPresetsText()), "fitted presets").at("systems"); }

// The values of a preset's `efficiency` option.
constexpr const char* kFitted = "fitted";
constexpr const char* kCatalogue = "catalogue";
// The start of the efficiencies' `source` of a preset at its fitted figures.
constexpr const char* kFittedPrefix = "a preset's default efficiencies, fitted to published runs in data/fitted_presets.json";

// Where `system`'s fitted figures live: itself, where data/fitted_presets.json has it; else the
// system its catalogue entry names in `fitted_from` (one of the same compute: die, clocks, tensor
// cores), where that has some, with why (`carried`). nullopt: it has none.
struct FittedHome {
  std::string system;
  std::string carried;  // fitted_from's source; empty: its own fit
};
std::optional<FittedHome> FittedHomeOf(const std::string& system, const json& fitted, const json& catalogue) {
  if (fitted.contains(system)) return FittedHome{system, ""};
  const json& systems = catalogue.at("systems");
  if (!systems.contains(system) || !systems.at(system).contains("fitted_from")) return std::nullopt;
  JsonReader entry(systems.at(system), "hardware catalogue", "/systems/" + system);
  JsonReader from = *entry.Object("fitted_from");
  FittedHome home{from.String("system"), from.String("source")};
  from.Finish();
  if (!fitted.contains(home.system)) return std::nullopt;
  return home;
}

// A fit's source without its closing "; hbm X kept from the catalogue": a system that takes another
// system's fit keeps its own HBM figure, which its source names instead.
std::string WithoutHbmClause(const std::string& source) {
  const size_t at = source.rfind("; hbm ");
  return at != std::string::npos && source.find("kept from the catalogue", at) != std::string::npos ? source.substr(0, at) : source;
}

// `system`'s fitted efficiencies (data/fitted_presets.json), their source saying so: its own fit, or
// the compute figures of the system it names in `fitted_from` beside its own HBM figure; nullopt
// where it has neither. `fitted` and `catalogue`: the two files, parsed.
std::optional<EfficiencySpec> FittedEfficiency(const std::string& system, const json& fitted, const json& catalogue) {
  const std::optional<FittedHome> home = FittedHomeOf(system, fitted, catalogue);
  if (!home) return std::nullopt;
  JsonReader own(fitted.at(home->system), "fitted presets", "/systems/" + home->system);
  EfficiencySpec e = EfficiencyFromJson(own);
  (void)own.String("runs");
  own.Finish();
  const std::string catalogue_note = "the preset with ,efficiency=catalogue takes data/hardware.json's";
  if (home->carried.empty()) {
    e.source = std::string(kFittedPrefix) + " (" + system + "; " + catalogue_note + "): " + e.source;
    return e;
  }
  JsonReader entry(catalogue.at("systems").at(system), "hardware catalogue", "/systems/" + system);
  e.hbm = EfficiencyFromJson(entry).hbm;
  e.source = std::string(kFittedPrefix) + ": " + home->system + "'s, carried to " + system + " (data/hardware.json fitted_from: " + home->carried +
             "), its hbm " + FormatFixed(e.hbm, 2) + " its own catalogue figure; " + catalogue_note + ". " + home->system + "'s fit: " +
             WithoutHbmClause(e.source);
  return e;
}

std::vector<std::string> SystemNames(const json& catalogue);

// The efficiencies a preset runs at: its system's fitted figures (data/fitted_presets.json) where
// it has some, else, or with `efficiency=catalogue`, the catalogue's (data/hardware.json).
// `head` is the preset's SYSTEM:SIZE, for the hint.
// `catalogue_json`: data/hardware.json, parsed.
EfficiencySpec PresetEfficiency(JsonReader& entry, const json& catalogue_json, const std::string& system, const std::string& head,
                                const std::map<std::string, std::string>& options, const std::string& where) {
  const EfficiencySpec catalogue = EfficiencyFromJson(entry);
  const json fitted_json = FittedPresets();
  const std::optional<EfficiencySpec> fitted = FittedEfficiency(system, fitted_json, catalogue_json);
  const bool has_fitted = fitted.has_value();
  const std::string choice = options.count("efficiency") ? options.at("efficiency") : kFitted;
  if (choice != kFitted && choice != kCatalogue) {
    const std::string suggestion = DidYouMean(choice, {kFitted, kCatalogue});
    throw InputError(where, "efficiency '" + choice + "' is not fitted or catalogue" + (suggestion.empty() ? "" : "; " + suggestion),
                     has_fitted ? "fitted (the default here: data/fitted_presets.json), catalogue (data/hardware.json's figures)"
                                : "catalogue (the default here: " + system + " has no fitted figures)",
                     "e.g. " + head + ",efficiency=catalogue");
  }
  if (choice == kCatalogue) return catalogue;
  if (!has_fitted) {
    if (!options.count("efficiency")) return catalogue;
    std::vector<std::string> with;
    for (const std::string& name : SystemNames(catalogue_json)) {
      if (FittedHomeOf(name, fitted_json, catalogue_json)) with.push_back(name);
    }
    throw InputError(where, system + " has no fitted efficiencies (the published runs do not determine them; docs/calibrate_runs.md)",
                     "catalogue here; fitted on " + JoinNames(with),
                     "drop ,efficiency=fitted, or fit your own runs with 'shardsim calibrate --from-runs'");
  }
  return *fitted;
}

// A preset string's system: what comes before its size or options.
std::string SystemOf(const std::string& preset) { return preset.substr(0, preset.find_first_of(":,")); }

std::vector<std::string> SystemNames(const json& catalogue) {
  std::vector<std::string> names;
  for (const auto& item : catalogue.at("systems").items()) names.push_back(item.key());
  return names;
}

std::string Shape(const std::vector<int64_t>& dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "x" : "") + std::to_string(dims[i]);
  return s;
}

std::vector<int64_t> ParseShape(const std::string& size, int64_t rank, const std::string& where, const std::string& system) {
  std::vector<int64_t> dims;
  for (const std::string& part : Split(size, 'x')) dims.push_back(ParseInteger(part, where, 1, 1 << 20));
  if (static_cast<int64_t>(dims.size()) != rank) {
    const std::string example = rank == 3 ? "8x8x8" : "16x16";
    throw InputError(where, system + " slices have " + std::to_string(rank) + " axes, got '" + size + "'",
                     rank == 3 ? "AxBxC" : "AxB", "e.g. " + system + ":" + example);
  }
  return dims;
}

void CheckTorusShape(const std::vector<int64_t>& dims, const TorusRules& rules, const std::string& where,
                     const std::string& system) {
  int64_t chips = 1;
  for (int64_t d : dims) chips *= d;
  if (chips > rules.max_chips) {
    throw InputError(where, system + ":" + Shape(dims) + " has " + std::to_string(chips) + " chips, more than the largest slice",
                     "up to " + std::to_string(rules.max_chips) + " chips per slice", "add slices over DCN with ',slices=N'");
  }
  if (rules.cube_edge > 0) {
    bool beyond_cube = false;
    for (int64_t d : dims) beyond_cube = beyond_cube || d > rules.cube_edge;
    for (int64_t d : dims) {
      const bool ok = beyond_cube ? d % rules.cube_edge == 0 : (d == 1 || d == 2 || d == 4);
      if (!ok) {
        throw InputError(where, system + ":" + Shape(dims) + " is not a slice shape: " +
                                    (beyond_cube ? "slices larger than a cube are built of whole " + std::to_string(rules.cube_edge) + "x" +
                                                       std::to_string(rules.cube_edge) + "x" + std::to_string(rules.cube_edge) + " cubes"
                                                 : std::string("axes within a cube are 1, 2 or 4 chips")),
                         beyond_cube ? "every axis a multiple of " + std::to_string(rules.cube_edge) : "1, 2, 4 per axis",
                         "e.g. " + system + ":4x4x8");
      }
    }
  }
  if (rules.max_axis > 0) {
    for (int64_t d : dims) {
      if (d > rules.max_axis || (d & (d - 1)) != 0) {
        throw InputError(where, system + ":" + Shape(dims) + " is not a slice shape", "axes of 1, 2, 4, 8 or 16 chips",
                         "e.g. " + system + ":16x16");
      }
    }
  }
}

std::vector<bool> TorusWraparound(const std::vector<int64_t>& dims, const TorusRules& rules) {
  std::vector<bool> wrap(dims.size(), false);
  if (rules.wraparound == "full-cubes") {
    bool whole_cubes = true;
    for (int64_t d : dims) whole_cubes = whole_cubes && d % rules.cube_edge == 0;
    wrap.assign(dims.size(), whole_cubes);
  } else {
    for (size_t i = 0; i < dims.size(); ++i) wrap[i] = dims[i] == rules.max_axis;
  }
  return wrap;
}

// Options after the size: ",key=value". Returns key -> value, rejecting unknown keys.
std::map<std::string, std::string> ParseOptions(const std::string& text, const std::vector<std::string>& allowed,
                                                const std::string& where) {
  std::map<std::string, std::string> options;
  for (const std::string& item : Split(text, ',')) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      throw InputError(where, "option '" + item + "' is not key=value", allowed.empty() ? "no options" : JoinNames(allowed),
                       "e.g. dgx-h100:64,oversubscription=2");
    }
    const std::string key = item.substr(0, eq);
    bool known = false;
    for (const std::string& a : allowed) known = known || a == key;
    if (!known) {
      const std::string suggestion = DidYouMean(key, allowed);
      throw InputError(where, "unknown option '" + key + "'" + (suggestion.empty() ? "" : "; " + suggestion),
                       allowed.empty() ? "this system takes no options" : JoinNames(allowed), "shardsim presets lists each system's options");
    }
    options[key] = item.substr(eq + 1);
  }
  return options;
}

std::vector<std::string> OptionsFor(const std::string& kind) {
  if (kind == "torus") return {"slices", "efficiency"};
  if (kind == "switched") return {"oversubscription", "fabric", "sharp", "domain", "efficiency"};
  return {};
}

TorusRules ReadTorusRules(JsonReader& system) {
  JsonReader t = *system.Object("torus");
  TorusRules rules;
  rules.rank = t.Int("rank", 1, 4);
  rules.cube_edge = t.IntOr("cube_edge", 0, 0, 64);
  rules.max_axis = t.IntOr("max_axis", 0, 0, 1024);
  rules.max_chips = t.Int("max_chips", 1, int64_t{1} << 24);
  rules.wraparound = t.Enum("wraparound", {"full-cubes", "full-axis"});
  rules.source = t.String("source");
  t.Finish();
  return rules;
}

}  // namespace

std::vector<SystemInfo> ClusterSystems() {
  const json catalogue = Catalogue(), fitted = FittedPresets();
  std::vector<SystemInfo> systems;
  for (const auto& item : catalogue.at("systems").items()) {
    const json& s = item.value();
    SystemInfo info;
    info.name = item.key();
    info.description = s.at("description").get<std::string>();
    const std::string kind = s.at("kind").get<std::string>();
    info.options = OptionsFor(kind);
    const std::optional<FittedHome> home = FittedHomeOf(info.name, fitted, catalogue);
    info.fitted = home.has_value();
    if (home && !home->carried.empty()) info.fitted_from = home->system;
    if (kind == "torus") {
      const int64_t rank = s.at("torus").at("rank").get<int64_t>();
      info.size_syntax = rank == 3 ? "AxBxC (chips per axis)" : "AxB (chips per axis)";
      info.example = info.name + (rank == 3 ? ":8x8x8" : ":16x16");
    } else if (kind == "switched") {
      const int64_t per_node = s.at("node").at("devices_per_node").get<int64_t>();
      info.size_syntax = "N (GPUs: up to " + std::to_string(per_node) + ", or a multiple of it)";
      info.example = info.name + ":" + std::to_string(per_node * (per_node >= 72 ? 2 : 8));
    } else {
      info.size_syntax = "[N] (CPU cores; default: all of this machine's)";
      info.example = "local";
    }
    systems.push_back(info);
  }
  return systems;
}

bool HasFittedEfficiencies(const std::string& system) { return FittedHomeOf(system, FittedPresets(), Catalogue()).has_value(); }

std::string FittedFromSystem(const std::string& system) {
  const std::optional<FittedHome> home = FittedHomeOf(system, FittedPresets(), Catalogue());
  return home && !home->carried.empty() ? home->system : "";
}

std::string WithCatalogueEfficiencies(const std::string& preset) {
  return HasFittedEfficiencies(SystemOf(preset)) ? preset + ",efficiency=" + kCatalogue : preset;
}

bool UsesFittedEfficiencies(const ClusterSpec& cluster) {
  const std::optional<EfficiencySpec> fitted = FittedEfficiency(cluster.system, FittedPresets(), Catalogue());
  return fitted && *fitted == cluster.efficiency;
}

std::string EfficiencyOrigin(const ClusterSpec& cluster) {
  if (UsesFittedEfficiencies(cluster)) {
    const std::string donor = FittedFromSystem(cluster.system);
    return donor.empty() ? "fitted to published runs (data/fitted_presets.json)"
                         : donor + "'s fit to published runs (data/fitted_presets.json, the same compute), hbm " +
                               FormatFixed(cluster.efficiency.hbm, 2) + " " + cluster.system + "'s own";
  }
  const json catalogue = Catalogue().at("systems");
  if (catalogue.contains(cluster.system)) {
    JsonReader entry(catalogue.at(cluster.system), "hardware catalogue", "/systems/" + cluster.system);
    if (EfficiencyFromJson(entry) == cluster.efficiency) return "the catalogue's (data/hardware.json)";
  }
  return "the cluster file's own (its efficiency.source)";
}

bool LooksLikeClusterPreset(const std::string& text) {
  const std::string head = SystemOf(text);
  for (const std::string& name : SystemNames(Catalogue())) {
    if (name == head) return true;
  }
  return false;
}

ClusterSpec ParseClusterPreset(const std::string& text, const std::string& where) {
  const json catalogue = Catalogue();
  const size_t comma = text.find(',');
  const std::string head = text.substr(0, comma);
  const std::string option_text = comma == std::string::npos ? "" : text.substr(comma + 1);
  const size_t colon = head.find(':');
  const std::string system = head.substr(0, colon);
  const std::string size = colon == std::string::npos ? "" : head.substr(colon + 1);

  const std::vector<std::string> names = SystemNames(catalogue);
  if (!catalogue.at("systems").contains(system)) {
    const std::string suggestion = DidYouMean(system, names);
    throw InputError(where, "unknown cluster preset '" + system + "'" + (suggestion.empty() ? "" : "; " + suggestion),
                     JoinNames(names), "run 'shardsim presets' for the sizes each takes, or give a cluster JSON file");
  }
  JsonReader entry(catalogue.at("systems").at(system), "hardware catalogue", "/systems/" + system);
  const std::string kind = entry.Enum("kind", {"torus", "switched", "local"});
  (void)entry.String("description");
  ClusterSpec c;
  c.name = text;
  c.system = system;
  JsonReader chip = *entry.Object("chip");
  c.chip = ChipFromJson(chip);
  c.links = LinksFromJson(entry);
  const std::map<std::string, std::string> options =
      comma == std::string::npos ? std::map<std::string, std::string>{} : ParseOptions(option_text, OptionsFor(kind), where);
  c.efficiency = PresetEfficiency(entry, catalogue, system, head, options, where);

  if (kind == "torus") {
    const TorusRules rules = ReadTorusRules(entry);
    if (size.empty()) {
      throw InputError(where, "'" + system + "' needs a slice shape", rules.rank == 3 ? "AxBxC" : "AxB",
                       "e.g. " + system + (rules.rank == 3 ? ":8x8x8" : ":16x16"));
    }
    c.topology.kind = TopologyKind::kTorus;
    c.topology.torus_dims = ParseShape(size, rules.rank, where, system);
    CheckTorusShape(c.topology.torus_dims, rules, where, system);
    c.topology.wraparound = TorusWraparound(c.topology.torus_dims, rules);
    c.topology.slices = options.count("slices") ? ParseInteger(options.at("slices"), where + " (slices)", 1, 1024) : 1;
    int64_t chips = c.topology.slices;
    for (int64_t d : c.topology.torus_dims) chips *= d;
    CheckClusterSize(chips, text, where);
    c.topology.source = rules.source;
  } else if (kind == "switched") {
    JsonReader node = *entry.Object("node");
    const int64_t per_node = node.Int("devices_per_node", 1, 1024);
    const std::string valid = "part of one node (1 to " + std::to_string(per_node - 1) + " GPUs) or a whole number of " + std::to_string(per_node) +
                              "-GPU nodes: " + std::to_string(per_node) + ", " + std::to_string(2 * per_node) + ", " + std::to_string(3 * per_node) + ", ...";
    if (size.empty()) throw InputError(where, "'" + system + "' needs a GPU count", valid, "e.g. " + system + ":" + std::to_string(8 * per_node));
    int64_t gpus = 0;
    try {
      gpus = ParseInteger(size, where, 1, std::numeric_limits<int64_t>::max());
    } catch (const InputError& e) {
      throw InputError(e.where(), e.problem(), valid, "the size is a GPU count, e.g. " + system + ":" + std::to_string(8 * per_node));
    }
    CheckClusterSize(gpus, system + ":" + size, where);
    // The GPUs the job uses in each NVLink domain: all of them, all of one partial domain, or
    // `domain=K` of each (a job on 64 of each GB200 NVL72 rack's 72 GPUs).
    int64_t used_per_node = gpus < per_node ? gpus : per_node;
    if (options.count("domain")) {
      used_per_node = ParseInteger(options.at("domain"), where + " (domain)", 1, per_node);
      if (gpus % used_per_node != 0) {
        throw InputError(where, system + ":" + size + " is not a whole number of domains of " + options.at("domain") + " GPUs",
                         "domain=K with K dividing the GPU count and at most " + std::to_string(per_node), "e.g. " + system + ":128,domain=64");
      }
    }
    if (gpus % used_per_node != 0) {
      const int64_t below = gpus / per_node * per_node;
      throw InputError(where, system + ":" + size + " is not whole nodes (" + std::to_string(per_node) + " GPUs per node)", valid,
                       "use " + (below > 0 ? system + ":" + std::to_string(below) + " or " : std::string()) + system + ":" +
                           std::to_string(below + per_node) + ", or add ,domain=K to use K GPUs of each node");
    }
    c.topology.kind = TopologyKind::kSwitched;
    c.topology.devices_per_node = used_per_node;
    c.topology.nodes = gpus / used_per_node;
    c.topology.fabric = node.Enum("fabric", {"fat-tree", "rail-optimized"});
    c.topology.oversubscription = node.Number("oversubscription", 1, 1024);
    c.topology.leaf_ports = node.Int("leaf_ports", 1, 4096);
    c.topology.nvls = node.Bool("nvls");
    c.topology.sharp = node.Bool("sharp");
    c.topology.host_bytes_per_device = node.IntOr("host_bytes_per_device", 0, 0, int64_t{1} << 50);
    c.topology.source = node.String("source");
    node.Finish();
    if (options.count("fabric")) {
      const std::string& fabric = options.at("fabric");
      if (fabric != "fat-tree" && fabric != "rail-optimized") {
        throw InputError(where, "unknown fabric '" + fabric + "'", "fat-tree, rail-optimized", "a GPU system's scale-out network; TPU systems have none to choose");
      }
      c.topology.fabric = fabric;
    }
    if (options.count("sharp")) {
      const std::string& value = options.at("sharp");
      if (value != "true" && value != "false") throw InputError(where, "sharp '" + value + "' is not true or false", "true, false");
      c.topology.sharp = value == "true";
    }
    if (options.count("oversubscription")) {
      const std::string& value = options.at("oversubscription");
      char* end = nullptr;
      const double ratio = std::strtod(value.c_str(), &end);
      if (end == value.c_str() || *end != '\0' || !(ratio >= 1) || ratio > 1024) {
        throw InputError(where, "oversubscription '" + value + "' is not a ratio >= 1", "1 (non-blocking) to 1024",
                         "e.g. oversubscription=2 for 2:1 leaf uplinks");
      }
      c.topology.oversubscription = ratio;
    }
  } else {
    c.topology.kind = TopologyKind::kLocal;
    const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
    c.topology.local_devices = size.empty() ? cores : ParseInteger(size, where, 1, 4096);
    c.topology.source = size.empty() ? "this machine's hardware threads" : "given on the command line";
  }
  ValidateCluster(c, where);
  return c;
}

}  // namespace shardsim
