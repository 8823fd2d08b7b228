// `shardsim presets`: the models, clusters, schedules and recomputation modes shardsim knows.
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/text_table.h"
#include "core/cluster_presets.h"
#include "core/model_json.h"
#include "core/model_presets.h"
#include "core/plan_spec.h"
#include "core/suggest.h"
#include "core/units.h"
#include "strategies/schedule.h"

namespace shardsim::cli {

int RunPresets(const PresetsOptions& options, std::ostream& out) {
  const std::vector<ModelPreset> models = ModelPresets();
  const std::vector<SystemInfo> systems = ClusterSystems();
  if (options.json) {
    nlohmann::json j;
    j["models"] = nlohmann::json::array();
    for (const ModelPreset& p : models) {
      const ParamCounts counts = CountParams(p.spec);
      nlohmann::json m = {{"name", p.spec.name},
                          {"kind", p.spec.moe ? "moe" : "dense"},
                          {"params_total", counts.total},
                          {"params_active", counts.active},
                          {"source", p.spec.source}};
      if (p.published_params_total > 0) {
        m["published_params_total"] = p.published_params_total;
        m["published_params_active"] = p.published_params_active;
        m["published_source"] = p.published_source;
      }
      j["models"].push_back(m);
    }
    j["clusters"] = nlohmann::json::array();
    for (const SystemInfo& s : systems) {
      j["clusters"].push_back({{"name", s.name},
                               {"description", s.description},
                               {"size", s.size_syntax},
                               {"example", s.example},
                               {"options", s.options},
                               {"efficiency", s.fitted ? "fitted" : "catalogue"},
                               {"fitted_from", s.fitted_from.empty() ? nlohmann::json() : nlohmann::json(s.fitted_from)}});
    }
    j["pipeline_schedules"] = strategies::ScheduleNames();
    j["pipeline_schedule_details"] = nlohmann::json::array();
    for (const strategies::Schedule* schedule : strategies::AllSchedules()) {
      j["pipeline_schedule_details"].push_back({{"name", schedule->name()}, {"summary", schedule->summary()}, {"splits_backward", schedule->SplitsBackward()}});
    }
    j["recompute"] = RecomputeNames();
    j["hf_model_types"] = HfModelTypes();
    out << j.dump(2) << "\n";
    return 0;
  }
  out << "Models (--model NAME, or a model JSON / Hugging Face config.json path)\n";
  TextTable model_table({"name", "kind", "params total", "params active", "published (total / active)"});
  for (const ModelPreset& p : models) {
    const ParamCounts c = CountParams(p.spec);
    const std::string published = p.published_params_total > 0
                                      ? FormatCount(p.published_params_total) + " / " + FormatCount(p.published_params_active)
                                      : "(shardsim's own, for CPU training)";
    model_table.AddRow({p.spec.name, p.spec.moe ? "moe" : "dense", FormatCount(static_cast<double>(c.total)),
                        FormatCount(static_cast<double>(c.active)), published});
  }
  model_table.Print(out, "  ");
  out << "\nClusters (--cluster SYSTEM:SIZE[,key=value...], or a cluster JSON path)\n";
  TextTable cluster_table({"system", "size", "example", "options", "what"});
  for (const SystemInfo& s : systems) {
    cluster_table.AddRow({s.name, s.size_syntax, s.example, s.options.empty() ? "-" : JoinNames(s.options, ", "), s.description});
  }
  cluster_table.Print(out, "  ");
  std::vector<std::string> fitted;
  for (const SystemInfo& s : systems) {
    if (s.fitted) fitted.push_back(s.fitted_from.empty() ? s.name : s.name + " (" + s.fitted_from + "'s compute figures)");
  }
  out << "  efficiencies: fitted to published runs (data/fitted_presets.json, docs/calibrate_runs.md) on " << JoinNames(fitted, ", ")
      << "; the catalogue's (data/hardware.json) on the others and with ,efficiency=catalogue\n";
  out << "\nPipeline schedules (plan field pipeline_schedule)\n";
  TextTable schedule_table({"name", "what"});
  for (const strategies::Schedule* schedule : strategies::AllSchedules()) schedule_table.AddRow({std::string(schedule->name()), std::string(schedule->summary())});
  schedule_table.Print(out, "  ");
  out << "Recomputation: " << JoinNames(RecomputeNames()) << "\n";
  out << "Hugging Face model types: " << JoinNames(HfModelTypes()) << "\n";
  return 0;
}

}  // namespace shardsim::cli
