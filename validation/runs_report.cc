#include "validation/runs_report.h"

#include <cmath>

#include "core/stats.h"

namespace shardsim::validation {

using nlohmann::json;

ErrorStats StatsOf(const std::vector<double>& errors) {
  ErrorStats s;
  s.runs = static_cast<int64_t>(errors.size());
  if (errors.empty()) return s;
  std::vector<double> absolute;
  for (const double e : errors) {
    absolute.push_back(std::abs(e));
    s.below += e < 0 ? 1 : 0;
    s.within_tenth += std::abs(e) <= 0.1 ? 1 : 0;
  }
  s.median = Median(absolute);
  s.p90 = NearestRankQuantile(absolute, 0.9);
  s.median_signed = Median(errors);
  return s;
}

namespace {

std::map<std::string, ErrorStats> StatsBy(const std::map<std::string, std::vector<double>>& errors) {
  std::map<std::string, ErrorStats> out;
  for (const auto& [key, list] : errors) out[key] = StatsOf(list);
  return out;
}

json StatsJson(const ErrorStats& s) {
  if (s.runs == 0) return {{"runs", 0}};  // no statistics over no runs
  return {{"runs", s.runs},           {"median_abs_error", s.median}, {"p90_abs_error", s.p90}, {"median_error", s.median_signed},
          {"predicted_below", s.below}, {"within_10_percent", s.within_tenth}};
}

json StatsMapJson(const std::map<std::string, ErrorStats>& m) {
  json j = json::object();
  for (const auto& [key, s] : m) j[key] = StatsJson(s);
  return j;
}

}  // namespace

AccuracySummary Summarize(const std::vector<GroupFit>& fits) {
  std::vector<double> fit, test, memory;
  int64_t above_hbm = 0;
  std::map<std::string, std::vector<double>> test_source, test_group, fit_source, fit_group;
  for (const GroupFit& g : fits) {
    for (const RunResult& r : g.results) {
      const double e = r.error;
      (r.run->fit ? fit : test).push_back(e);
      (r.run->fit ? fit_source : test_source)[r.run->source_family].push_back(e);
      (r.run->fit ? fit_group : test_group)[g.group].push_back(e);
      if (r.run->peak_memory_gib > 0) memory.push_back(r.predicted_memory_gib / r.run->peak_memory_gib - 1);
      above_hbm += r.above_hbm ? 1 : 0;
    }
  }
  return {StatsOf(fit), StatsOf(test), StatsBy(test_source), StatsBy(test_group), StatsBy(fit_source), StatsBy(fit_group), StatsOf(memory), above_hbm};
}

json RunsReportJson(const std::vector<GroupFit>& fits, const AccuracySummary& s) {
  json groups = json::array();
  for (const GroupFit& g : fits) {
    json parameters = json::array();
    for (const FittedParameter& f : g.parameters) {
      parameters.push_back({{"name", f.name}, {"start", f.start}, {"value", f.value}, {"low", f.low}, {"high", f.high},
                            {"fit_runs", f.fit_runs}, {"at_bound", f.at_bound},
                            {"relative_error", std::isfinite(f.relative_error) ? json(f.relative_error) : json(nullptr)}});
    }
    json runs = json::array();
    for (const RunResult& r : g.results) {
      json run = {{"id", r.run->id}, {"split", r.run->fit ? "fit" : "test"}, {"source_family", r.run->source_family},
                  {"measured_step_time_s", r.run->step_time_s}, {"predicted_step_time_s", r.predicted_s}, {"error", r.error},
                  {"predicted_memory_gib", r.predicted_memory_gib}, {"predicted_above_hbm", r.above_hbm},
                  {"hbm_gib", r.hbm_gib}};
      if (r.run->peak_memory_gib > 0) run["published_peak_memory_gib"] = r.run->peak_memory_gib;
      runs.push_back(run);
    }
    groups.push_back({{"group", g.group}, {"fit_runs", g.fit_runs}, {"evaluations", g.evaluations}, {"fitted", g.fitted}, {"determined", g.Determined()}, {"tied", g.tied}, {"start", g.start},
                      {"iterations", g.fitted ? json(g.iterations) : json(nullptr)}, {"converged", g.fitted ? json(g.converged) : json(nullptr)},
                      {"rms_log_error", g.fit_runs > 0 ? json(g.rms_log_error) : json(nullptr)},
                      {"parameters", parameters}, {"efficiency_source", g.cluster.efficiency.source}, {"runs", runs}});
  }
  return {{"groups", groups},
          {"summary",
           {{"fit", StatsJson(s.fit)}, {"test", StatsJson(s.test)}, {"test_by_source", StatsMapJson(s.test_by_source)},
            {"test_by_group", StatsMapJson(s.test_by_group)}, {"fit_by_source", StatsMapJson(s.fit_by_source)},
            {"fit_by_group", StatsMapJson(s.fit_by_group)}, {"memory", StatsJson(s.memory)}, {"predicted_above_hbm", s.above_hbm}}}};
}

}  // namespace shardsim::validation
