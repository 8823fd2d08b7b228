// What the per-framework export files (planner/export_<framework>.cc) share: building and reading
// a list of settings, and the pieces of a plan several frameworks spell alike. Internal to
// planner/; planner/export.h is the interface.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/cluster_spec.h"
#include "core/model_spec.h"
#include "core/plan_spec.h"
#include "planner/export.h"
#include "planner/framework_facts.h"

namespace shardsim::planner {

// Reads settings by name for PlanFromExport; a malformed value throws InputError naming
// "<framework> setting <name>".
class SettingReader {
 public:
  SettingReader(const std::vector<Setting>& settings, std::string framework);
  bool Has(const std::string& name) const;
  std::string Get(const std::string& name, const std::string& fallback = "") const;
  // Get with a string value's surrounding double quotes removed (TOML strings, quoted flags).
  std::string Text(const std::string& name, const std::string& fallback = "") const;
  int64_t Int(const std::string& name, int64_t fallback) const;
  double Number(const std::string& name, double fallback) const;
  bool Bool(const std::string& name, bool fallback) const;  // "true" / "false"
  [[noreturn]] void Fail(const std::string& name, const std::string& what) const;

 private:
  const std::vector<Setting>& settings_;
  std::string framework_;
};

// A plan holding the framework's mesh order and nothing else set.
PlanSpec EmptyPlan(const FrameworkFacts& facts);

// Decoder layers, embedding and head of each model chunk along the path, first chunk first.
struct ChunkParts {
  bool embedding = false, head = false;
  int64_t first_layer = 0, layers = 0;
  int64_t mtp = 0;  // multi-token-prediction modules, after its decoder layers
};
std::vector<ChunkParts> PathParts(const ModelSpec& model, const PlanSpec& plan);
// `parts` in Megatron-core's layout syntax ("Ettt|ttt|ttmL"); "" when `plan` (with its mesh,
// schedule and virtual_stages set) lays the model out so by default.
std::string LayoutOrEmpty(const ModelSpec& model, const PlanSpec& plan,
                          const std::vector<ChunkParts>& parts);

// Micro-batches per replica and step.
int64_t Microbatches(const PlanSpec& plan);

// Per framework (export_megatron.cc, export_torchtitan.cc, export_maxtext.cc,
// export_deepspeed.cc): the settings of a plan in CanonicalSharding's form, their text, and the
// plan read back.
std::vector<Setting> MegatronSettings(const ModelSpec& model, const PlanSpec& plan);
std::string MegatronText(const std::vector<Setting>& settings);
PlanSpec MegatronPlan(const SettingReader& settings, const ModelSpec& model);

std::vector<Setting> TorchtitanSettings(const ModelSpec& model, const PlanSpec& plan);
std::string TorchtitanText(const std::vector<Setting>& settings);
PlanSpec TorchtitanPlan(const SettingReader& settings, const ModelSpec& model);

// MaxText's DCN axes follow the cluster's slices: the outer axes must take them whole or divide
// them. MaxTextDcnGap says why not, the one gap that depends on the cluster (FrameworkGaps takes
// none), which ExportPlan adds to not_expressed.
std::optional<std::string> MaxTextDcnGap(const ClusterSpec& cluster, const PlanSpec& plan);
std::vector<Setting> MaxTextSettings(const ModelSpec& model, const ClusterSpec& cluster,
                                     const PlanSpec& plan);
std::string MaxTextText(const std::vector<Setting>& settings);
PlanSpec MaxTextPlan(const SettingReader& settings, const ModelSpec& model);

std::vector<Setting> DeepSpeedSettings(const ModelSpec& model, const PlanSpec& plan);
std::string DeepSpeedText(const std::vector<Setting>& settings);
// DeepSpeed's batch fields for `plan`: it refuses a config unless train_batch_size = micro-batch x
// accumulation x its data-parallel world, every rank not tensor or pipeline (its expert groups lie
// inside it), so a context axis it does not run (a gap) joins that world. `note`, for
// not_expressed: where the fields differ from the plan's micro-batch or cannot pass that check.
struct DeepSpeedBatch {
  int64_t micro = 1, accumulation = 1;
  std::string note;
};
DeepSpeedBatch DeepSpeedBatchOf(const PlanSpec& plan);
PlanSpec DeepSpeedPlan(const SettingReader& settings, const ModelSpec& model);

}  // namespace shardsim::planner
