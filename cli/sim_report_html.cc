#include "cli/sim_report_html.h"

#include <sstream>

#include "cli/html_text.h"
#include "cli/sim_report_sections.h"
#include "cli/sim_timeline_svg.h"
#include "cli/sim_view.h"
#include "core/units.h"
#include "strategies/step_program.h"

namespace shardsim::cli {
namespace {

constexpr int kStreams = static_cast<int>(strategies::kStreams);  // strategies::Stream's values

// Colours: one per stream (Tableau 10); waiting on communication in the overview's colour for
// exposed communication; the bubble and other idle time in greys. Each class sets the SVG fill
// and the HTML swatch's background alike.
constexpr const char* kStyle = R"(
.cards{display:flex;flex-wrap:wrap;gap:10px}.card{border:1px solid #ddd;border-radius:6px;padding:8px 12px;min-width:150px}
.card b{display:block;font-size:19px}.card span{color:#555;font-size:12px}
svg text{font-size:11px;fill:#333}svg text.device{font-weight:600;font-size:12px}svg text.note{fill:#666}
svg .grid{stroke:#e4e4e4}svg .marker{stroke:#333;stroke-dasharray:4 3}
.sw{display:inline-block;width:12px;height:12px;margin:0 4px 0 10px;vertical-align:-1px}
.k0{fill:#4e79a7;background:#4e79a7}.k1{fill:#f28e2b;background:#f28e2b}.k2{fill:#59a14f;background:#59a14f}
.k3{fill:#e15759;background:#e15759}.k4{fill:#b07aa1;background:#b07aa1}.k5{fill:#edc948;background:#edc948}
.k6{fill:#9c755f;background:#9c755f}
.w,.ex{fill:#d37295;background:#d37295}.b{fill:#bab0ac;background:#bab0ac}.ot{fill:#e3e3e3;background:#e3e3e3}
.mem{fill:#76b7b2;background:#76b7b2}.over{fill:#e15759;background:#e15759}
.scroll{overflow-x:auto}
)";

}  // namespace

std::string SimReportHtml(const sim::SimReport& report, const strategies::StepProgram& program,
                          const ClusterSpec& cluster) {
  const std::string title = "shardsim simulate: " + program.model.name + " on " + cluster.name;
  std::ostringstream html;
  // The policy forbids the page any fetch and any script: it stays self-contained when opened.
  html << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
       << "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src "
          "'unsafe-inline'\">\n<title>"
       << HtmlEscape(title) << "</title>\n<style>" << PageBaseStyle() << kStyle << "</style>\n</head>\n<body>\n";
  html << "<h1>" << HtmlEscape(title) << "</h1>\n";
  html << "<p class=\"sub\">plan: " << HtmlEscape(PlanSummary(program)) << "</p>\n";
  html << "<p class=\"sub\">cluster: "
       << HtmlEscape(cluster.name + ", " + std::to_string(DeviceCount(cluster)) + " x " +
                     cluster.chip.name + " (" + DescribeShape(cluster.topology) + "), " +
                     FormatBinaryBytes(static_cast<double>(cluster.chip.hbm_bytes)) +
                     " HBM per device")
       << "</p>\n";
  html << SummarySection(report, program);
  html << OverviewSection(report);
  html << ExposedSection(report);
  html << PipelineSection(report);
  const std::vector<int64_t> drawn = DrawnDevices(report);
  html << "<h2>Timeline</h2>\n<p>One device per pipeline stage (its lowest rank), one lane per "
          "stream; hover over an op for its key and duration (open the --trace file in "
          "ui.perfetto.dev to zoom). "
       << HtmlEscape(std::to_string(report.microbatches_simulated) + " of " +
                     std::to_string(report.microbatches) + " micro-batches simulated, ending at " +
                     FormatSeconds(report.timeline_end_s) +
                     "; the step, extended to every micro-batch, takes " +
                     FormatSeconds(report.step.step_time_s) + ".")
       << "</p>\n<p>";
  for (int s = 0; s < kStreams; ++s) {
    html << "<span class=\"sw k" << s << "\"></span>"
         << HtmlEscape(strategies::ToString(static_cast<strategies::Stream>(s)));
  }
  html << "<span class=\"sw w\"></span>waiting on communication (exposed)<span class=\"sw "
          "b\"></span>waiting for a pipeline input (bubble)</p>\n";
  if (drawn.empty()) {
    html << "<p>No timeline: the simulation kept no events.</p>\n";
  } else {
    html << "<div class=\"scroll\">" << TimelineSvg(report, drawn) << "</div>\n";
  }
  html << MemorySection(report);
  html << DevicesSection(report);
  html << LinksSection(report);
  html << ContentionSection(report);
  html << FoldingSection(report);
  html << "</body>\n</html>\n";
  return html.str();
}

}  // namespace shardsim::cli
