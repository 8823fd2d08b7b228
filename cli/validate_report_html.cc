// `shardsim validate --report FILE.html`: one self-contained page (no network, no scripts from
// elsewhere) with the comparison's tables.
#include <fstream>
#include <sstream>

#include "cli/html_text.h"
#include "cli/validate_text.h"
#include "core/error.h"
#include "core/units.h"

namespace shardsim::cli {

void WriteValidateReport(const std::string& path, const ValidateContext& c, const validation::Comparison& r, const validation::MeasuredRun& m,
                         const sim::SimReport& simulated, const strategies::StepProgram& program) {
  (void)simulated;
  (void)program;
  std::ostringstream html;
  html << "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>shardsim validate: " << HtmlEscape(c.model.name) << "</title></head><body>";
  html << "<h1>Validation: " << HtmlEscape(c.model.name) << ", " << HtmlEscape(DescribeMesh(c.plan.mesh)) << "</h1>";
  html << "<p>" << m.ranks << " ranks on " << HtmlEscape(c.cluster.name) << "</p><table id=\"categories\"><tr><th>category</th><th>measured</th><th>estimated</th><th>simulated</th></tr>";
  for (const validation::CategoryRow& row : r.categories) {
    html << "<tr><td>" << HtmlEscape(row.category) << "</td><td>" << FormatSeconds(row.measured_s) << "</td><td>" << FormatSeconds(row.estimated_s)
         << "</td><td>" << FormatSeconds(row.simulated_s) << "</td></tr>";
  }
  html << "</table></body></html>\n";
  std::ofstream file(path, std::ios::binary);
  if (!file) throw InputError("--report", "cannot open '" + path + "' for writing", "", "check that the folder exists and is writable");
  file << html.str();
  if (!file) throw InputError("--report", "could not write all of '" + path + "'", "", "check the free space");
}

}  // namespace shardsim::cli
