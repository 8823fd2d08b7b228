// What `shardsim validate` prints: measured against estimated and simulated per category and
// for the step, the worst ops of the per-op diff, memory per rank by category, and how the
// figures were obtained (as text, as JSON, and as an HTML page with --report).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/cluster_spec.h"
#include "core/model_spec.h"
#include "core/plan_spec.h"
#include "sim/simulate.h"
#include "strategies/step_program.h"
#include "validation/compare.h"

namespace shardsim::cli {

struct ValidateContext {
  const ModelSpec& model;
  const PlanSpec& plan;
  const ClusterSpec& cluster;     // the calibrated cluster, cut to the plan's ranks
  std::string cluster_path;       // where the calibration came from
  std::string work_dir;           // the runtime's report and trace
  bool work_dir_removed = false;  // a temporary folder, removed at the end
  bool time_faithful = true;      // at most one rank per core
  std::vector<std::string> notes;
};

// Memory categories compared, and whether the runtime's accounting and the model count the same
// thing in each (a reason when not).
std::string MemoryComparability(const std::string& category, const PlanSpec& plan);

void PrintValidate(std::ostream& out, const ValidateContext& context, const validation::Comparison& comparison,
                   const validation::MeasuredRun& measured);
nlohmann::json ValidateJson(const ValidateContext& context, const validation::Comparison& comparison, const validation::MeasuredRun& measured);
// The self-contained HTML page (cli/validate_report_html.cc).
void WriteValidateReport(const std::string& path, const ValidateContext& context, const validation::Comparison& comparison,
                         const validation::MeasuredRun& measured, const sim::SimReport& simulated, const strategies::StepProgram& program);

}  // namespace shardsim::cli
