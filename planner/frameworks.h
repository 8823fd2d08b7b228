// The training frameworks a plan can be exported to, and which plans each of them runs exactly as
// shardsim models them. The facts per framework live in one table (planner/framework_facts.h);
// both the search (only plans the chosen framework can run) and the exports (their not_expressed
// list) read them through FrameworkGaps, so the two cannot disagree.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/model_spec.h"
#include "core/plan_spec.h"

namespace shardsim::planner {

enum class Framework { kMegatronCore, kTorchtitan, kMaxText, kDeepSpeed };

// "megatron-core", "torchtitan", "maxtext", "deepspeed" (the plan JSON's `framework` values).
std::vector<std::string> FrameworkNames();
std::string_view FrameworkName(Framework framework);
// Accepts the names above and "megatron" (alias of megatron-core). Throws InputError naming
// `where`, listing the valid names and suggesting the closest, for any other name.
Framework ParseFramework(const std::string& name, const std::string& where);

// The MFU of a step under `framework`'s own model-FLOP count (FrameworkFacts::flop_count: the
// count behind the MFU or TFLOP/s it logs), given the step's MFU under PaLM's count (all of the
// attention) `mfu_palm` of `model` at `seq_len`, with what that count is and where the framework
// makes it; nullopt for a framework with no such count. Megatron-core's and torchtitan's counts
// take every layer's full context (local layers' too; Megatron-core halves it), MaxText's reads
// local layers' windows as shardsim's own does.
struct FrameworkMfu {
  double mfu = 0;
  std::string count;   // "causal attention at half", "all of the attention"
  std::string source;  // file and function in the framework's repository
};
std::optional<FrameworkMfu> MfuAsFrameworkCounts(Framework framework, const ModelSpec& model, int64_t seq_len, double mfu_palm);

// One thing of a plan a framework does not run: the plan field it is about, as a JSON pointer
// into the plan ("/fp8_recipe", "/overlap/tensor"; "" where the model is what the framework
// lacks), and the phrase that says what and why.
struct FrameworkGap {
  FrameworkGap(std::string gap_field, std::string gap_text, std::string gap_valid = "")
      : field(std::move(gap_field)), text(std::move(gap_text)), valid(std::move(gap_valid)) {}
  std::string field;
  std::string text;
  std::string valid;  // what the field would take, where the rule knows it ("" otherwise)
};

// What of `plan` the framework cannot run as shardsim models it, one phrase each; empty: it runs
// this exact plan. Cheap: the search calls it on every candidate plan before estimating, so the
// empty answer builds no strings. REQUIRES: a plan CheckPlan accepts for `model`.
std::vector<std::string> FrameworkGaps(Framework framework, const ModelSpec& model,
                                       const PlanSpec& plan);
// The same gaps, each with the plan field it is about (where an error about the plan points).
std::vector<FrameworkGap> FrameworkGapsByField(Framework framework, const ModelSpec& model,
                                               const PlanSpec& plan);

// `plan` with every switch the framework does not offer set as the framework fixes it: overlaps
// it always or never does, and fsdp_reshard_after_forward true where it cannot keep sharded
// parameters gathered, the context K/V exchange where it runs one kind only, and an unset stage
// layout as the framework splits `model`'s layers.
// FrameworkGaps of the result lists only what no setting can change (the search can score a
// candidate as the framework would run it).
PlanSpec AsFrameworkRuns(Framework framework, const ModelSpec& model, const PlanSpec& plan);

// The recomputation policies `framework` runs, from the most memory kept to the least (the
// order the search tries them in).
std::vector<Recompute> FrameworkRecomputes(Framework framework);

}  // namespace shardsim::planner
