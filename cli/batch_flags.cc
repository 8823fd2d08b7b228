#include "cli/batch_flags.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_input.h"
#include "core/plan_json.h"
#include "core/units.h"

namespace shardsim::cli {
namespace {

// The plan fields `overrides` give, applied to `plan` as LoadPlan does (the last --set wins),
// without reading the plan strictly: the fields the flags fix may be missing until they are added.
nlohmann::json WithOverrides(nlohmann::json plan, const std::vector<std::string>& overrides) {
  for (const std::string& assignment : overrides) ApplyPlanOverride(plan, assignment);
  return plan;
}

// The value an explicit --set gave `key`; null when none did.
nlohmann::json SetValue(const std::vector<std::string>& overrides, const std::string& key) {
  const nlohmann::json sets = WithOverrides(nlohmann::json::object(), overrides);
  return sets.contains(key) ? sets[key] : nlohmann::json(nullptr);
}

// The plan's seq_len (file, then --set) when it is a positive whole number; 0 otherwise.
int64_t PlanSeqLen(const Inputs& inputs) {
  const nlohmann::json file = inputs.plan.empty() ? nlohmann::json::object() : ReadJsonFile(inputs.plan);
  if (!file.is_object()) return 0;  // LoadPlan names this error later
  const nlohmann::json plan = WithOverrides(file, inputs.overrides);
  const auto it = plan.find("seq_len");
  return it != plan.end() && it->is_number_integer() && it->get<int64_t>() > 0 ? it->get<int64_t>() : 0;
}

}  // namespace

void ApplyBatchFlags(const BatchFlags& flags, Inputs& inputs) {
  if (flags.global_batch_tokens.empty() && flags.seq_len == 0) return;
  if (flags.seq_len != 0) {
    if (flags.seq_len < 1) throw InputError("--seq-len", std::to_string(flags.seq_len) + " is not a sequence length", "1 or more tokens");
    const nlohmann::json set = SetValue(inputs.overrides, "seq_len");
    if (!set.is_null() && set != nlohmann::json(flags.seq_len)) {
      throw InputError("--seq-len", std::to_string(flags.seq_len) + " conflicts with --set seq_len=" + set.dump(), "",
                       "give the sequence length once");
    }
  }
  std::vector<std::string> fixed;
  if (flags.seq_len != 0) fixed.push_back("seq_len=" + std::to_string(flags.seq_len));
  if (!flags.global_batch_tokens.empty()) {
    const int64_t tokens = ParseTokensPerStep(flags.global_batch_tokens, "--global-batch-tokens");
    const int64_t seq_len = flags.seq_len != 0 ? flags.seq_len : PlanSeqLen(inputs);
    if (seq_len < 1) {
      throw InputError("--global-batch-tokens", "needs a sequence length to count sequences", "--seq-len S beside it, or seq_len in the plan", "add --seq-len S (or seq_len in the plan)");
    }
    if (tokens % seq_len != 0) {
      const int64_t below = tokens / seq_len * seq_len, above = below + seq_len;
      throw InputError("--global-batch-tokens",
                       std::to_string(tokens) + " tokens is not a whole number of " + std::to_string(seq_len) + "-token sequences",
                       "a multiple of the sequence length, e.g. " + (below > 0 ? std::to_string(below) + " or " : "") + std::to_string(above),
                       "change --global-batch-tokens or --seq-len");
    }
    const int64_t sequences = tokens / seq_len;
    const nlohmann::json set = SetValue(inputs.overrides, "global_batch_size");
    if (!set.is_null() && set != nlohmann::json(sequences)) {
      throw InputError("--global-batch-tokens",
                       std::to_string(tokens) + " tokens is " + std::to_string(sequences) + " sequences of " + std::to_string(seq_len) +
                           ", but --set global_batch_size=" + set.dump(),
                       "", "give the batch once: --global-batch-tokens or --set global_batch_size");
    }
    fixed.push_back("global_batch_size=" + std::to_string(sequences));
  }
  inputs.overrides.insert(inputs.overrides.end(), fixed.begin(), fixed.end());
}

}  // namespace shardsim::cli
