// `shardsim plan --json`: the plans, the other families' best, the Pareto frontier, the misses and
// (when nothing fits) the smallest size that fits, the search's counts, and, for each plan, the
// export (--export) and the whole training run (--train-tokens).
#include <nlohmann/json.hpp>

#include "cli/plan_output.h"
#include "cli/report_json.h"
#include "core/plan_json.h"
#include "core/run_cost.h"
#include "core/units.h"

namespace shardsim::cli {
namespace {

using nlohmann::json;

json PlanEntry(const PlanFindings& f, const planner::RankedPlan& p, const ClusterSpec& cluster) {
  json j = ReportJson(f.model, cluster, p.plan, p.report);
  j["family"] = p.family;
  if (f.target) {
    const planner::Export e = planner::ExportPlan(f.model, cluster, p.plan, *f.target);
    j["export"] = {{"target", f.export_name}, {"text", e.text}, {"not_expressed", e.not_expressed}};
    if (!e.beside.empty()) {
      nlohmann::json beside = nlohmann::json::object();
      for (const planner::Setting& s : e.beside) beside[s.name] = s.value;
      j["export"]["beside"] = beside;
    }
  }
  if (f.options.train_tokens > 0) {
    j["training_run"] = TrainingRunJson(CostOfTraining(f.options.train_tokens, p.report.tokens_per_s, DeviceCount(cluster), f.options.price_per_device_hour));
  }
  return j;
}

}  // namespace

json PlanFindingsJson(const PlanFindings& f) {
  const planner::SearchResult& r = f.result;
  json plans = json::array();
  for (const auto& p : r.best) plans.push_back(PlanEntry(f, p, f.cluster));
  json runners = json::array();
  for (const auto& p : r.family_best) {
    json j = PlanEntry(f, p, f.cluster);
    j["why_lost"] = p.why_lost;
    j["same_step_as_families"] = p.same_as;
    runners.push_back(j);
  }
  json pareto = json::array();
  for (const auto& p : r.pareto) {
    pareto.push_back({{"plan", PlanToJson(p.plan)}, {"tokens_per_s", p.report.tokens_per_s}, {"peak_bytes_per_device", WholeBytes(p.report.memory.peak.total())}});
  }
  json misses = json::array();
  for (const auto& miss : r.nearest_misses) {
    misses.push_back({{"plan", PlanToJson(miss.plan)}, {"reason", miss.reason}, {"needed_bytes_per_device", WholeBytes(miss.needed_bytes)}, {"memory_over_limit", miss.overshoot}, {"estimated", miss.estimated},
                      {"host_memory_limit_bytes", WholeBytes(miss.host_limit_bytes)}});
  }
  const double rate = r.wall_s > 0 ? static_cast<double>(r.evaluated) / r.wall_s : 0;
  json j{{"fits", !r.best.empty()},
         {"plans", plans},
         {"best_of_other_families", runners},
         {"pareto", pareto},
         {"nearest_misses", misses},
         {"fixed", planner::FixedJson(f.constraints)},
         {"framework", f.framework ? json(std::string(planner::FrameworkName(*f.framework))) : json(nullptr)},
         {"max_memory_bytes_per_device", WholeBytes(r.max_memory_bytes)},
         {"search",
          {{"meshes", r.meshes},
           {"layouts", r.layouts},
           {"balanced_stage_meshes", r.balanced},
           {"candidates", r.candidates},
           {"pruned", r.pruned},
           {"dominated", r.dominated},
           {"unsupported_by_framework", r.unsupported},
           {"evaluated", r.evaluated},
           {"over_memory_limit", r.over_limit},
           {"wall_s", r.wall_s},
           {"plans_per_s", rate}}}};
  if (f.smallest) {
    const planner::SmallestFit& s = *f.smallest;
    j["smallest_fit"] = {{"found", s.found}, {"tried", s.tried}};
    if (s.found) {
      j["smallest_fit"]["cluster"] = s.cluster;
      j["smallest_fit"]["devices"] = s.devices;
      j["smallest_fit"]["plan"] = PlanEntry(f, s.plan, s.spec);
    } else {
      j["smallest_fit"]["why_not"] = s.why_not;
    }
  }
  if (f.options.refine > 0) {
    j["refined"] = RefinedJson(f.refinement);
    j["refine_failed"] = RefineFailedJson(f.refinement);
  }
  return j;
}

}  // namespace shardsim::cli
