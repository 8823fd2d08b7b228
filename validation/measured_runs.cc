#include "validation/measured_runs.h"

#include <set>

#include <nlohmann/json.hpp>

#include "core/cluster_spec.h"
#include "core/error.h"
#include "core/inputs.h"
#include "core/json_input.h"
#include "core/model_json.h"
#include "core/plan_json.h"
#include "strategies/plan_rules.h"

namespace shardsim::validation {
namespace {

using nlohmann::json;

ModelSpec ModelOf(JsonReader& r, const std::string& where, const std::string& id) {
  if (!r.Has("model")) r.Fail("model", "missing required key 'model'", "a preset name, a shardsim model JSON object or a Hugging Face config object");
  const json& value = r.Raw("model");
  if (value.is_string()) return LoadModel(value.get<std::string>());
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
  if (run.id.empty()) r.Fail("id", "empty id", "a name for the run");
  run.model = ModelOf(r, where, run.id);
  run.cluster = r.String("cluster");
  const ClusterSpec cluster = LoadCluster(run.cluster);
  if (!r.Has("plan") || !r.Raw("plan").is_object()) r.Fail("plan", "missing or not an object", "a plan JSON object (examples/*.plan.json)");
  run.plan = PlanFromJson(r.Raw("plan"), where + "/plan");
  CheckPlanOnCluster(run.plan, cluster, where + "/plan");
  strategies::ValidatePlan(run.plan, run.model, DeviceCount(cluster), cluster.name, where + "/plan:");
  run.step_time_s = StepTimeOf(r, run.plan, DeviceCount(cluster));
  run.group = r.StringOr("group", cluster.system);
  run.source = r.StringOr("source", "");
  run.source_family = r.StringOr("source_family", "runs");
  run.framework = r.StringOr("framework", "");
  run.fit = r.EnumOr("split", "fit", {"fit", "test"}) == "fit";
  run.peak_memory_gib = r.NumberOr("peak_memory_gib", 0, 0, 1e6);
  r.StringOr("memory_metric", "");
  r.StringOr("published_precision", "");
  if (r.Has("assumed")) run.assumed = r.StringList("assumed");
  r.Finish();
  return run;
}

}  // namespace

std::vector<PublishedRun> ReadMeasuredRuns(const std::string& path) {
  const json file = ReadJsonFile(path);
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
