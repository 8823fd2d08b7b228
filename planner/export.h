// Exports of a plan to the frameworks people run: Megatron-core command-line flags, a torchtitan
// Trainer.Config fragment, a MaxText config fragment, a DeepSpeed config JSON and a JAX Mesh.
// Each is a list of settings (name -> value, in the framework's own names) rendered to text, and
// each but JAX reads back into a plan (PlanFromExport), so tests hold the two directions together.
// What a framework cannot run of the plan is FrameworkGaps (planner/frameworks.h), one table.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/cluster_spec.h"
#include "core/model_spec.h"
#include "core/plan_spec.h"
#include "planner/frameworks.h"

namespace shardsim::planner {

enum class ExportTarget { kMegatron, kMaxText, kTorchtitan, kJax, kDeepSpeed };

// "megatron-core", "maxtext", "torchtitan", "jax", "deepspeed".
std::vector<std::string> ExportTargetNames();
// Accepts the names above and "megatron" (alias of megatron-core). Throws InputError naming
// `where` for any other name (with the closest).
ExportTarget ParseExportTarget(const std::string& name, const std::string& where);
// The framework an export target runs (none for jax, a mesh only).
std::optional<Framework> FrameworkOf(ExportTarget target);

// One setting as the framework names it: a flag ("--tensor-model-parallel-size"), a config path
// ("parallelism.tensor_parallel_degree", "zero_optimization.stage") or a key
// ("ici_fsdp_parallelism"), with its value as the framework spells it (empty for a flag without a
// value). Names starting with "launch." are facts the framework's config cannot hold (world size,
// constructor arguments of the model code); the text shows them as comments where its format has
// them, else Export::beside holds them.
struct Setting {
  std::string name;
  std::string value;
  bool operator==(const Setting&) const = default;
};

struct Export {
  std::string text;  // flags, YAML, Python or JSON, ready to paste
  std::vector<std::string>
      not_expressed;              // FrameworkGaps of the plan; for jax, what a mesh leaves out
  std::vector<Setting> settings;  // what `text` renders, in its order (empty for jax)
  // Launch facts (settings named "launch.", the prefix dropped) that `text` cannot hold as
  // comments and so leaves out: DeepSpeed's, whose config is strict JSON. Said beside the text.
  std::vector<Setting> beside;
};

// The layers of each pipeline stage with runs collapsed, first stage first: "7, 8 x14, 7"
// (llama3-405b on 16 stages; see LayersPerPart).
std::string StageLayers(const ModelSpec& model, const PlanSpec& plan);

// The export of `plan` (CanonicalSharding's form of it). REQUIRES: a plan CheckPlan accepts for
// `model` on `cluster`'s devices.
Export ExportPlan(const ModelSpec& model, const ClusterSpec& cluster, const PlanSpec& plan,
                  ExportTarget target);

// The plan a framework runs from `settings` (an export's): mesh, batch, schedule and chunks,
// layout, ZeRO / FSDP, recomputation, dtype, overlaps, attention, context kind, in
// CanonicalSharding's form, the mesh_order the framework lays ranks out in. Throws InputError
// naming the setting for a value the framework would not accept. REQUIRES: target is not jax.
PlanSpec PlanFromExport(ExportTarget target, const std::vector<Setting>& settings,
                        const ModelSpec& model);

}  // namespace shardsim::planner
