#include "cli/step_text.h"

#include <string>

#include "core/units.h"

namespace shardsim::cli {

void PrintHeaviestStage(const sim::StepReport& report, const sim::StepReport& labels, std::ostream& out) {
  if (report.heaviest_stage < 0) return;
  double more = report.heaviest_compute_s - report.compute_s;
  out << "  heaviest    stage " << report.heaviest_stage;
  if (report.heaviest_ties > 0) out << " (and " << report.heaviest_ties << " other" << (report.heaviest_ties > 1 ? "s" : "") << " as heavy)";
  out << ": compute " << FormatSeconds(report.heaviest_compute_s);
  for (const auto& [key, seconds] : report.heaviest_exposed_comm_s) {
    more += seconds;
    if (seconds > 0) out << ", exposed " << sim::ExposedLabel(labels, key) << " " << FormatSeconds(seconds);
  }
  for (const auto& [key, seconds] : report.exposed_comm_s) more -= seconds;
  out << ": " << FormatSeconds(more) << " more than stage " << report.critical_stage << ", the critical one, which waits for it in its bubble\n";
}

}  // namespace shardsim::cli
