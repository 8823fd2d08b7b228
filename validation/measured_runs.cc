#include "validation/measured_runs.h"

#include <set>

#include <nlohmann/json.hpp>

#include "core/cluster_spec.h"
#include "core/error.h"
#include "core/inputs.h"
#include "core/json_input.h"
#include "core/model_json.h"
#include "core/plan_json.h"
#include "core/suggest.h"
#include "core/units.h"
#include "strategies/plan_rules.h"

namespace shardsim::validation {
namespace {

using nlohmann::json;

// A preset, model file or cluster named by a run: its errors name the run's field, not the
// command-line flag that names them elsewhere.
template <typename Load>
auto NamedIn(const std::string& field, Load load) -> decltype(load()) {
  try {
    return load();
  } catch (const InputError& e) {
    throw InputError(field, e.problem(), e.valid(), e.hint());
  }
}

// A run's id and group are printed in tables and a group names the cluster file it writes
// (GROUP.cluster.json): no control characters, and a group no path separator or leading dot.
void CheckName(JsonReader& r, const std::string& key, const std::string& value, bool file_name) {
  if (value.empty()) r.Fail(key, "empty " + key, "a name");
  for (const char c : value) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) r.Fail(key, "a control character in " + key + " '" + value + "'", "printable characters");
    if (file_name && (c == '/' || c == '\\')) {
      r.Fail(key, "a path separator in " + key + " '" + value + "'", "a name usable as a file name (it names GROUP.cluster.json)");
    }
  }
  if (file_name && value.front() == '.') r.Fail(key, key + " '" + value + "' starts with a dot", "a name usable as a file name (it names GROUP.cluster.json)");
}

ModelSpec ModelOf(JsonReader& r, const std::string& where, const std::string& id) {
  if (!r.Has("model")) r.Fail("model", "missing required key 'model'", "a preset name, a shardsim model JSON object or a Hugging Face config object");
  const json& value = r.Raw("model");
  if (value.is_string()) return NamedIn(where + "/model", [&] { return LoadModel(value.get<std::string>()); });
  if (!value.is_object()) r.Fail("model", "expected a string or an object, got " + JsonTypeName(value));
  return IsHfConfig(value) ? ModelFromHfConfig(value, where + "/model", id) : ModelFromJson(value, where + "/model");
}

double StepTimeOf(JsonReader& r, const PlanSpec& plan, int64_t devices) {
  auto measured = r.Object("measured");
  if (!measured) r.Fail("measured", "missing required key 'measured'", "{\"step_time_s\": ...} or {\"tokens_per_s_per_device\": ...}");
  measured->StringOr("what", "");
  const bool step = measured->Has("step_time_s"), tokens = measured->Has("tokens_per_s_per_device");
  if (step == tokens) {
    measured->Fail("step_time_s", step ? "both step_time_s and tokens_per_s_per_device given" : "neither step_time_s nor tokens_per_s_per_device given",
                   "exactly one of them", "tokens/s per device is converted with the plan's global batch and sequence length");
  }
  double seconds = 0;
  if (step) {
    seconds = measured->Number("step_time_s", 1e-6, 1e7);
  } else {
    const double rate = measured->Number("tokens_per_s_per_device", 1e-6, 1e12);
    seconds = static_cast<double>(plan.global_batch_size) * static_cast<double>(plan.seq_len) / (rate * static_cast<double>(devices));
  }
  measured->Finish();
  return seconds;
}

PublishedRun RunOf(const json& value, const std::string& where) {
  JsonReader r(value, where);
  PublishedRun run;
  run.id = r.String("id");
  CheckName(r, "id", run.id, false);
  run.model = ModelOf(r, where, run.id);
  run.cluster = r.String("cluster");
  const ClusterSpec cluster = NamedIn(where + "/cluster", [&] { return LoadCluster(run.cluster); });
  if (!r.Has("plan") || !r.Raw("plan").is_object()) r.Fail("plan", "missing or not an object", "a plan JSON object (examples/*.plan.json)");
  run.plan = PlanFromJson(r.Raw("plan"), where + "/plan");
  CheckPlanOnCluster(run.plan, cluster, where + "/plan");
  strategies::ValidatePlan(run.plan, run.model, DeviceCount(cluster), cluster.name, where + "/plan:");
  run.step_time_s = StepTimeOf(r, run.plan, DeviceCount(cluster));
  run.group = r.StringOr("group", cluster.system);
  CheckName(r, "group", run.group, true);
  run.source = r.StringOr("source", "");
  run.source_family = r.StringOr("source_family", "runs");
  run.framework = r.StringOr("framework", "");
  // Provenance, free text, except that a name one edit or two from a profiled framework is a
  // typo: the profiled name costs the run as that framework runs it (docs/frameworks.md).
  const std::vector<std::string> close = ClosestNames(run.framework, PlanFrameworkNames(), 1);
  if (CanonicalFrameworkName(run.framework).empty() && !close.empty() && EditDistance(run.framework, close.front()) <= 2) {
    r.Fail("framework", "unknown framework '" + run.framework + "'; did you mean '" + close.front() + "'?",
           JoinNames(PlanFrameworkNames()) + " (costed as that framework runs), or another name (provenance only)");
  }
  run.fit = r.EnumOr("split", "fit", {"fit", "test"}) == "fit";
  if (r.Has("peak_memory_gib")) {
    // A peak the device cannot hold is not a measurement of it.
    const double hbm_gib = BytesToGiB(static_cast<double>(cluster.chip.hbm_bytes));
    run.peak_memory_gib = r.Number("peak_memory_gib", 1e-3, hbm_gib > 0 ? hbm_gib : 1e6);
  }
  r.StringOr("memory_metric", "");
  r.StringOr("published_precision", "");
  if (r.Has("assumed")) run.assumed = r.StringList("assumed");
  r.Finish();
  return run;
}

}  // namespace

std::vector<PublishedRun> ReadMeasuredRuns(const std::string& path) {
  json file;
  try {
    file = ReadJsonFile(path);
  } catch (const InputError& e) {
    if (e.where() == path) throw e.WithPrefix("--from-runs ");  // the file itself (missing, a folder): name the flag
    throw;
  }
  JsonReader top(file, path);
  top.StringOr("_about", "");
  if (top.Has("skipped") && !top.Raw("skipped").is_array()) top.Fail("skipped", "expected an array");
  if (!top.Has("runs") || !top.Raw("runs").is_array()) top.Fail("runs", "missing or not an array", "{\"runs\": [{\"id\": ..., \"model\": ..., \"cluster\": ..., \"plan\": ..., \"measured\": ...}]}");
  const json& list = top.Raw("runs");
  top.Finish();
  if (list.empty()) throw InputError(path + ":/runs", "no runs", "at least one measured run", "docs/accuracy.md shows the format");
  std::vector<PublishedRun> runs;
  std::set<std::string> ids;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string where = path + ":/runs/" + std::to_string(i);
    runs.push_back(RunOf(list[i], where));
    if (!ids.insert(runs.back().id).second) throw InputError(where + "/id", "duplicate id '" + runs.back().id + "'", "a unique id per run");
  }
  return runs;
}

}  // namespace shardsim::validation
