// Resolving what users type after --model, --cluster and --plan: a preset name or a file path,
// with one clear error when it is neither.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/cluster_spec.h"
#include "core/model_spec.h"
#include "core/plan_spec.h"

namespace shardsim {

// A preset name (ModelPresetNames()), a shardsim model JSON, or a Hugging Face config.json.
ModelSpec LoadModel(const std::string& arg);

// A preset string ("dgx-h100:64", "tpu-v5p:8x8x8,slices=2", "local") or a cluster JSON file.
ClusterSpec LoadCluster(const std::string& arg);

// What --cluster `arg` (LoadCluster gave `loaded`) is at another size: prefix + SIZE + options is
// the same cluster at SIZE, a cluster file's own figures kept ("dgx-h100:64,fabric=fat-tree" ->
// "dgx-h100:" "64" ",fabric=fat-tree"; "my.json:64" -> "my.json:" "64"; a file alone whose name
// is its preset's, as calibrate writes them, "dgx-h100:1024" -> "my.json:" "1024"). Empty where
// no other size exists: a custom topology, a file whose name does not say its size, "local".
struct ClusterSizeArg {
  std::string prefix, size, options;
  std::string At(const std::string& other_size) const { return prefix + other_size + options; }
};
std::optional<ClusterSizeArg> ClusterSizeOf(const std::string& arg, const ClusterSpec& loaded);

// Whether `cluster` runs what `plan` asks of its hardware: a peak for its dtype, microscaling
// tensor cores for fp8_recipe mxfp8, nodes to forward in for ep_dispatcher deepep. Throws
// InputError at `where` ("...:/dtype", "...:/fp8_recipe", "...:/ep_dispatcher") naming what the
// cluster has.
void CheckPlanOnCluster(const PlanSpec& plan, const ClusterSpec& cluster, const std::string& where);

// How errors name a plan read from `path` with `overrides`: "p.json", "p.json with --set" or
// "plan (from --set)"; a field follows after ":/".
std::string PlanSource(const std::string& path, const std::vector<std::string>& overrides);

// A plan JSON file (empty `path`: no file, the plan is built from `overrides` alone) with
// `--set key=value` overrides applied in order.
PlanSpec LoadPlan(const std::string& path, const std::vector<std::string>& overrides);
// The same plan as JSON before it is read: only the keys the file and overrides name (what
// `plan` keeps fixed). Throws InputError when the file is not a JSON object.
nlohmann::json LoadPlanJson(const std::string& path, const std::vector<std::string>& overrides);

}  // namespace shardsim
