#include "core/inputs.h"

#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/cluster_json.h"
#include "core/cluster_presets.h"
#include "core/error.h"
#include "core/json_input.h"
#include "core/model_json.h"
#include "core/model_presets.h"
#include "core/plan_json.h"
#include "core/suggest.h"
#include "core/text.h"

namespace shardsim {
namespace {

// The error_code form: a name too long for the file system is "not there", not an exception.
bool Exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

bool LooksLikePath(const std::string& arg) {
  return arg.find('/') != std::string::npos || arg.find('.') != std::string::npos || Exists(arg);
}

// The name an imported HF config gets: its "_name_or_path", else the folder that holds a
// config.json, else the file's stem.
std::string HfModelName(const nlohmann::json& config, const std::string& path) {
  const auto it = config.find("_name_or_path");
  if (it != config.end() && it->is_string() && !it->get<std::string>().empty()) return it->get<std::string>();
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  if (ec) p = path;
  if (p.filename() == "config.json" && p.has_parent_path() && !p.parent_path().filename().empty()) {
    return p.parent_path().filename().string();
  }
  return p.stem().empty() ? path : p.stem().string();
}

// The JSON file `path` given after `flag`; an error about the file itself (missing, a folder,
// unreadable) names the flag and what the flag takes (`valid`), as errors about what is in it name
// the file's fields.
nlohmann::json ReadFlagFile(const std::string& flag, const std::string& path, const std::string& valid) {
  try {
    return ReadJsonFile(path);
  } catch (const InputError& e) {
    if (e.where() == path) throw InputError(flag + " " + path, e.problem(), e.valid().empty() ? valid : e.valid(), e.hint());
    throw;
  }
}

std::string ModelFlagValues() { return "a preset (" + JoinNames(ModelPresetNames()) + ") or a shardsim model JSON or Hugging Face config.json"; }
constexpr const char* kClusterFlagValues = "a preset SYSTEM:SIZE (shardsim presets) or a cluster JSON";

// A Hugging Face config.json without its model_type reads as no model JSON either (it has no
// name): said as what it is.
void CheckNotUntypedHfConfig(const nlohmann::json& value, const std::string& path) {
  if (!value.is_object() || value.contains("name") || value.contains("model_type") || !value.contains("num_hidden_layers")) return;
  throw InputError(path + ":/model_type", "missing: the file has a Hugging Face config's num_hidden_layers but no model_type (nor a shardsim model's name)",
                   JoinNames(HfModelTypes()), "add the architecture's \"model_type\", or write a shardsim model JSON (shardsim describe --model llama3-8b --write-model F)");
}

}  // namespace

ModelSpec LoadModel(const std::string& arg) {
  if (arg.empty()) throw InputError("--model", "is empty", "a preset (" + JoinNames(ModelPresetNames()) + ") or a JSON file");
  if (auto preset = FindModelPreset(arg)) return preset->spec;
  if (!LooksLikePath(arg)) {
    const std::string s = DidYouMean(arg, ModelPresetNames());
    throw InputError("--model", "unknown model preset '" + arg + "'" + (s.empty() ? "" : "; " + s), JoinNames(ModelPresetNames()),
                     "or give the path of a shardsim model JSON or a Hugging Face config.json");
  }
  const nlohmann::json value = ReadFlagFile("--model", arg, ModelFlagValues());
  CheckNotUntypedHfConfig(value, arg);
  if (IsHfConfig(value)) return ModelFromHfConfig(value, arg, HfModelName(value, arg));
  return ModelFromJson(value, arg);
}

namespace {

// FILE.json:SIZE as its path and its size (with any options after it); nothing for another
// argument, or for a file whose own name has the form.
struct FileAtSize {
  std::string path, size;
};
std::optional<FileAtSize> SplitFileAtSize(const std::string& arg) {
  const size_t at = arg.rfind(".json:");
  if (at == std::string::npos || Exists(arg)) return std::nullopt;
  return FileAtSize{arg.substr(0, at + 5), arg.substr(at + 6)};
}

// "FILE.json:SIZE": the file's chip, links, efficiencies and calibration on its catalogue system at
// another size (SIZE as a preset writes it: "64", "8x8x8"; the file's own options, those of the
// preset string its name is, unless SIZE gives some), so that a cluster `calibrate --from-runs`
// fitted at one size plans at another. nullopt: no such form (or a file of that very name).
std::optional<ClusterSpec> ResizedClusterFile(const std::string& arg) {
  const std::optional<FileAtSize> split = SplitFileAtSize(arg);
  if (!split) return std::nullopt;
  const std::string& path = split->path;
  const std::string& size = split->size;
  if (!Exists(path)) throw InputError("--cluster " + arg, "no file " + path, "FILE.json:SIZE naming a cluster file", "check the path");
  const ClusterSpec file = ClusterFromJson(ReadFlagFile("--cluster", path, kClusterFlagValues), path);
  if (!LooksLikeClusterPreset(file.system)) {
    throw InputError("--cluster " + arg, path + "'s system '" + file.system + "' is no catalogue system to resize", "FILE.json:SIZE for a file whose system is a preset's (dgx-h100, tpu-v5p, ...)",
                     "give the file alone, at its own size, or edit its topology");
  }
  if (("," + size).find(",efficiency=") != std::string::npos) {
    std::string others;  // the size and the other options, for the preset the hint names
    for (const std::string& item : Split(size, ',')) {
      if (item.rfind("efficiency=", 0) != 0) others += (others.empty() ? "" : ",") + item;
    }
    throw InputError("--cluster " + arg, "a cluster file keeps its own efficiencies: ,efficiency= is a preset's option", "FILE.json:SIZE with the preset's other options",
                     "for the catalogue's figures use the preset itself: " + file.system + ":" + others + ",efficiency=catalogue");
  }
  std::string preset = file.system + ":" + size;
  const size_t options = file.name.find(',');
  if (size.find(',') == std::string::npos && options != std::string::npos && LooksLikeClusterPreset(file.name)) preset += file.name.substr(options);
  ClusterSpec resized;
  try {
    resized = ParseClusterPreset(preset, "--cluster " + arg);
  } catch (const InputError& e) {
    // Its hint names the preset's sizes: name them on the file, whose figures they would drop.
    std::string hint = e.hint();
    for (size_t p = hint.find(file.system + ":"); p != std::string::npos; p = hint.find(file.system + ":", p + path.size() + 1)) {
      hint.replace(p, file.system.size() + 1, path + ":");
    }
    throw InputError(e.where(), e.problem(), e.valid(), hint);
  }
  resized.name = arg;
  resized.chip = file.chip;
  resized.efficiency = file.efficiency;
  resized.calibration = file.calibration;
  // The file's links; a class the new size needs and the file lacks (DCN across slices) keeps the catalogue's.
  for (const auto& [name, link] : file.links) resized.links[name] = link;
  return resized;
}

// A cluster file named as a preset ("dgx-h100:64", as describe --write-cluster names it) whose
// topology was edited to another size: every message would name the preset's size.
void CheckNameMatchesTopology(const ClusterSpec& file, const std::string& path) {
  // A name without a size ("local": this machine's cores) names no fixed count.
  if (!LooksLikeClusterPreset(file.name) || file.name.find(':') == std::string::npos) return;
  int64_t named = 0;
  try {
    named = DeviceCount(ParseClusterPreset(file.name, path + ":/name"));
  } catch (const InputError&) {
    return;  // a name, not a preset's spec
  }
  if (named == DeviceCount(file)) return;
  throw InputError(path + ":/name", "'" + file.name + "' names " + std::to_string(named) + " devices but the file's topology holds " + std::to_string(DeviceCount(file)),
                   "a name that agrees with the topology, or one that names no preset", "rename the cluster (e.g. '" + file.system + "-custom') or undo the topology's edit");
}

}  // namespace

ClusterSpec LoadCluster(const std::string& arg) {
  if (arg.empty()) throw InputError("--cluster", "is empty", "a preset such as dgx-h100:64 or a cluster JSON file");
  if (LooksLikeClusterPreset(arg)) return ParseClusterPreset(arg, "--cluster " + arg);
  if (std::optional<ClusterSpec> resized = ResizedClusterFile(arg)) return *resized;
  if (Exists(arg) || arg.find('/') != std::string::npos || arg.ends_with(".json")) {
    ClusterSpec file = ClusterFromJson(ReadFlagFile("--cluster", arg, kClusterFlagValues), arg);
    CheckNameMatchesTopology(file, arg);
    return file;
  }
  return ParseClusterPreset(arg, "--cluster " + arg);  // not a file: report it as an unknown preset
}

std::optional<ClusterSizeArg> ClusterSizeOf(const std::string& arg, const ClusterSpec& loaded) {
  if (loaded.system == "custom") return std::nullopt;
  // A size is devices ("64") or a torus's dimensions ("8x8x8"); anything else names none.
  auto split = [](const std::string& prefix, const std::string& rest) -> std::optional<ClusterSizeArg> {
    const size_t comma = rest.find(',');
    ClusterSizeArg parts{prefix, rest.substr(0, comma), comma == std::string::npos ? "" : rest.substr(comma)};
    for (const std::string& dim : Split(parts.size, 'x')) {
      if (dim.empty() || dim.size() > 9 || dim.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    }
    return parts;
  };
  const size_t colon = arg.find(':');
  if (LooksLikeClusterPreset(arg)) {
    if (colon == std::string::npos) return std::nullopt;
    return split(arg.substr(0, colon + 1), arg.substr(colon + 1));
  }
  if (const std::optional<FileAtSize> file = SplitFileAtSize(arg)) return split(file->path + ":", file->size);
  // A file alone, named FILE.json, whose name is its preset's: FILE.json:SIZE adds the name's
  // options itself.
  const std::string own = loaded.system + ":";
  if (!arg.ends_with(".json") || !LooksLikeClusterPreset(loaded.name) || loaded.name.rfind(own, 0) != 0) return std::nullopt;
  std::optional<ClusterSizeArg> parts = split(arg + ":", loaded.name.substr(own.size()));
  if (parts) parts->options.clear();
  return parts;
}

std::string PlanSource(const std::string& path, const std::vector<std::string>& overrides) {
  if (path.empty()) return "plan (from --set)";
  return overrides.empty() ? path : path + " with --set";
}

nlohmann::json LoadPlanJson(const std::string& path, const std::vector<std::string>& overrides) {
  nlohmann::json value = nlohmann::json::object();
  if (!path.empty()) {
    value = ReadFlagFile("--plan", path, "a plan JSON file (examples/*.plan.json)");
  }
  if (!value.is_object()) {
    throw InputError(path + ":/", "expected a JSON object, got " + JsonTypeName(value), "a plan object {\"mesh\": {...}, ...}");
  }
  for (const std::string& assignment : overrides) ApplyPlanOverride(value, assignment);
  return value;
}

PlanSpec LoadPlan(const std::string& path, const std::vector<std::string>& overrides) {
  nlohmann::json value = LoadPlanJson(path, overrides);
  const std::string where = PlanSource(path, overrides);
  if (path.empty() && !value.contains("mesh")) value["mesh"] = nlohmann::json::object();
  return PlanFromJson(value, where);
}

void CheckPlanOnCluster(const PlanSpec& plan, const ClusterSpec& cluster, const std::string& where) {
  const std::map<std::string, double>& peaks = cluster.chip.peak_flop_per_s;
  if (peaks.count(plan.dtype) == 0) {
    // The plan's dtypes the chip has a peak for (its int8 peak, say, is no training dtype).
    std::string have;
    for (const std::string& dtype : PlanFieldChoices("dtype")) {
      if (peaks.count(dtype) > 0) have += (have.empty() ? "" : ", ") + dtype;
    }
    throw InputError(where + ":/dtype", "dtype '" + plan.dtype + "' has no peak on " + cluster.chip.name, have, "set dtype to one the chip lists");
  }
  if (plan.fp8_recipe == "nvfp4" && (!cluster.chip.microscaling || peaks.count("fp4") == 0)) {
    throw InputError(where + ":/fp8_recipe", "fp8_recipe nvfp4 on " + cluster.chip.name + ", which has no FP4 tensor cores (no fp4 peak with microscaling)",
                     "tensorwise, rowwise, blockwise" + std::string(cluster.chip.microscaling ? " or mxfp8" : ""),
                     "nvfp4 needs a Blackwell system (dgx-b200, dgx-b300, gb200-nvl72, gb300-nvl72)");
  }
  if (plan.fp8_recipe == "mxfp8" && !cluster.chip.microscaling) {
    throw InputError(where + ":/fp8_recipe", "fp8_recipe mxfp8 on " + cluster.chip.name + ", which has no microscaling tensor cores", "tensorwise, rowwise or blockwise",
                     "mxfp8 needs a Blackwell system (dgx-b200, dgx-b300, gb200-nvl72, gb300-nvl72)");
  }
  if ((plan.attention_kernel == "triton" || plan.attention_kernel == "flex") && cluster.topology.kind != TopologyKind::kSwitched) {
    throw InputError(where + ":/attention_kernel", "attention_kernel " + plan.attention_kernel + " on " + cluster.name + ": a GPU kernel (Triton, PyTorch's FlexAttention)",
                     "flash (the chip's own blockwise attention)", "drop attention_kernel on TPU and CPU clusters");
  }
  if (plan.ep_dispatcher == "deepep" && cluster.topology.kind == TopologyKind::kTorus) {
    throw InputError(where + ":/ep_dispatcher", "ep_dispatcher deepep on " + cluster.name + ": it forwards rows within NVLink nodes, which a torus has none of",
                     "alltoall", "drop ep_dispatcher (DeepEP runs on GPU clusters)");
  }
  if (plan.offload_layers > 0 && cluster.links.count("host") == 0) {
    throw InputError(where + ":/offload_layers", "offload_layers " + std::to_string(plan.offload_layers) + " on " + cluster.name +
                         ", whose spec has no 'host' link class (the device's link to its host's memory)", "0",
                     "drop offload_layers, or give the cluster JSON a links.host entry (bandwidth one direction, as the GPU presets have)");
  }
}

}  // namespace shardsim
