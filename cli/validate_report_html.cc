// `shardsim validate --report FILE.html`: one self-contained page (inline CSS and SVG, no script,
// nothing fetched) with what was validated, measured against estimated and simulated time per
// category and for the step, one measured step's timeline beside the simulated one on the same
// time axis, the worst ops and memory per rank.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "cli/html_text.h"
#include "cli/plan_text.h"
#include "cli/sim_view.h"
#include "cli/svg_bars.h"
#include "cli/validate_text.h"
#include "cli/validate_timeline_svg.h"
#include "core/output_file.h"
#include "core/units.h"

namespace shardsim::cli {
namespace {

constexpr size_t kWorstOps = 15;
constexpr double kNoTimeSeconds = 1e-9;  // a category below this everywhere gets no bars
constexpr int kStreams = static_cast<int>(strategies::kStreams);

// The simulate page's look (cli/sim_report_html.cc), plus the three sources of a figure: measured
// (me), estimated (es), simulated (si). Each class sets the SVG fill and the swatch's background.
constexpr const char* kStyle = R"(
.cards{display:flex;flex-wrap:wrap;gap:10px;margin-top:10px}.card{border:1px solid #ddd;border-radius:6px;padding:8px 12px;min-width:150px}
.card b{display:block;font-size:19px}.card span{color:#555;font-size:12px}
.warn{color:#b3261e;font-weight:600}tr.incomparable td{color:#777}
svg text{font-size:11px;fill:#333}svg text.device{font-weight:600;font-size:12px}svg text.note{fill:#666}
svg .grid{stroke:#e4e4e4}svg .marker{stroke:#333;stroke-dasharray:4 3}
.sw{display:inline-block;width:12px;height:12px;margin:0 4px 0 10px;vertical-align:-1px}
.k0{fill:#4e79a7;background:#4e79a7}.k1{fill:#f28e2b;background:#f28e2b}.k2{fill:#59a14f;background:#59a14f}
.k3{fill:#e15759;background:#e15759}.k4{fill:#b07aa1;background:#b07aa1}.k5{fill:#edc948;background:#edc948}
.k6{fill:#9c755f;background:#9c755f}
.opt{fill:#9c755f;background:#9c755f}.w{fill:#d37295;background:#d37295}.b{fill:#bab0ac;background:#bab0ac}
.ot{fill:#c9c9c9;background:#c9c9c9}
.me{fill:#4d4d4d;background:#4d4d4d}.es{fill:#86bcb6;background:#86bcb6}.si{fill:#499894;background:#499894}
.scroll{overflow-x:auto}
)";

std::string Td(const std::string& text) { return "<td>" + HtmlEscape(text) + "</td>"; }
std::string TdN(const std::string& text) { return "<td class=\"n\">" + HtmlEscape(text) + "</td>"; }
std::string Th(const std::string& text) { return "<th>" + HtmlEscape(text) + "</th>"; }
std::string ThN(const std::string& text) { return "<th class=\"n\">" + HtmlEscape(text) + "</th>"; }

std::string Card(const std::string& label, const std::string& value, const std::string& note) {
  return "<div class=\"card\"><span>" + HtmlEscape(label) + "</span><b>" + HtmlEscape(value) +
         "</b><span>" + HtmlEscape(note) + "</span></div>\n";
}

// The prediction's error against the measurement, signed ("+4.5%", "-12.0%"); "-" without one.
std::string Error(double predicted, double measured) {
  if (!(measured > 0)) return "-";
  const double e = predicted / measured - 1;
  return (e >= 0 ? "+" : "") + FormatPercent(e);
}

// "1 step after the first", "5 steps after the first".
std::string StepsAfterFirst(int64_t steps) {
  return std::to_string(steps) + (steps == 1 ? " step" : " steps") + " after the first";
}

std::string Swatch(const std::string& css_class, const std::string& label) {
  return "<span class=\"sw " + css_class + "\"></span>" + HtmlEscape(label);
}

std::string Header(const ValidateContext& c, const validation::Comparison& r,
                   const validation::MeasuredRun& m, const strategies::StepProgram& program) {
  const CalibrationSpec& cal = c.cluster.calibration;
  std::ostringstream html;
  html << "<header id=\"summary\">\n<h1>"
       << HtmlEscape("shardsim validate: " + c.model.name + " on " + c.cluster.name) << "</h1>\n";
  html << "<p class=\"sub\">plan: " << HtmlEscape(PlanSummary(program)) << "</p>\n";
  html << "<p class=\"sub\">schedule: " << HtmlEscape(ScheduleName(c.plan))
       << "; mesh: " << HtmlEscape(DescribeMesh(c.plan.mesh)) << "</p>\n";
  std::string cluster = c.cluster.name + ", " + std::to_string(DeviceCount(c.cluster)) + " x " +
                        c.cluster.chip.name + " (" + DescribeShape(c.cluster.topology) + ")";
  html << "<p class=\"sub\">cluster: " << HtmlEscape(cluster) << "</p>\n";
  std::string calibration = "calibration: " + c.cluster_path;
  if (cal.empty()) {
    calibration += " (no calibration in the file)";
  } else {
    calibration += ", measured " + cal.measured_at + " on " + std::to_string(cal.hosts) +
                   (cal.hosts == 1 ? " host" : " hosts") + " of " +
                   std::to_string(cal.cores_per_host) + " cores";
    if (!cal.processor.empty()) calibration += " (" + cal.processor + ")";
    if (!cal.blas.empty()) calibration += ", BLAS " + cal.blas;
    calibration += ", largest spread between repeats " + FormatPercent(cal.spread);
  }
  html << "<p class=\"sub\">" << HtmlEscape(calibration) << "</p>\n";
  html << "<p class=\"sub\">run: "
       << HtmlEscape(std::to_string(m.ranks) + " ranks, " + std::to_string(m.step_times_s.size()) +
                     " steps (step time: the median of the " + StepsAfterFirst(r.steps_compared) + "; ops: over the " +
                     StepsAfterFirst(r.steps_compared) + "); ")
       << (c.time_faithful
               ? "time-faithful: one rank per core"
               : "<span class=\"warn\">NOT time-faithful: ranks time-share cores</span>")
       << "</p>\n";
  if (!c.notes.empty()) {
    html << "<ul class=\"notes\">\n";
    for (const std::string& note : c.notes) html << "<li>" << HtmlEscape(note) << "</li>\n";
    html << "</ul>\n";
  }
  if (!r.categories.empty()) {
    const validation::CategoryRow& step = r.categories.back();
    html << "<div class=\"cards\">\n"
         << Card("measured step", FormatSeconds(step.measured_s), "median, rank 0")
         << Card("estimated step", FormatSeconds(step.estimated_s),
                 "error " + Error(step.estimated_s, step.measured_s) + " (analytic)")
         << Card("simulated step", FormatSeconds(step.simulated_s),
                 "error " + Error(step.simulated_s, step.measured_s) + " (SimGrid)")
         << "</div>\n";
  }
  html << "</header>\n";
  return html.str();
}

// Measured, estimated and simulated bars of one category (measured alone where nothing predicts
// it); each rect's classes name its source and its category ("me c-compute").
void AddBars(const validation::CategoryRow& row, std::vector<SvgBar>& bars) {
  const std::string tag = " c-" + row.category;
  bars.push_back(
      {row.category + ": measured", row.measured_s, FormatSeconds(row.measured_s), "me" + tag});
  if (!row.predicted) return;
  bars.push_back(
      {"estimated", row.estimated_s,
       FormatSeconds(row.estimated_s) + " (" + Error(row.estimated_s, row.measured_s) + ")",
       "es" + tag});
  bars.push_back(
      {"simulated", row.simulated_s,
       FormatSeconds(row.simulated_s) + " (" + Error(row.simulated_s, row.measured_s) + ")",
       "si" + tag});
}

std::string CategoriesSection(const validation::Comparison& r) {
  std::ostringstream html;
  html << "<section id=\"categories\">\n<h2>Time per step</h2>\n<p>Seconds per step: measured "
          "on rank 0 (mean over the steps), against the analytic estimate and the SimGrid "
          "simulation of the same step program on the calibrated cluster; in brackets the "
          "prediction's error against the measurement.</p>\n<p>"
       << Swatch("me", "measured") << Swatch("es", "estimated") << Swatch("si", "simulated")
       << "</p>\n";
  std::vector<SvgBar> step, categories;
  std::string idle;  // categories without a nanosecond anywhere: in the table only
  bool unpredicted = false;
  for (const validation::CategoryRow& row : r.categories) {
    if (std::max({row.measured_s, row.estimated_s, row.simulated_s}) < kNoTimeSeconds) {
      idle += (idle.empty() ? "" : ", ") + row.category;
      continue;
    }
    AddBars(row, row.category == "step" ? step : categories);
    unpredicted = unpredicted || !row.predicted;
  }
  if (!step.empty())
    html << "<h3>The step</h3>\n<div id=\"step-bars\">" << BarsSvg(step) << "</div>\n";
  html << "<h3>By category</h3>\n";
  if (categories.empty()) {
    html << "<p>No category of time was measured or predicted.</p>\n";
  } else {
    html << "<div id=\"category-bars\">" << BarsSvg(categories) << "</div>\n";
  }
  if (!idle.empty())
    html << "<p>" << HtmlEscape("Under a nanosecond measured and predicted: " + idle) << ".</p>\n";
  if (unpredicted)
    html << "<p>other: the runtime's own bookkeeping between ops, which no prediction has; the "
            "step's error is the figure that counts.</p>\n";
  html << "<table>\n<tr>" << Th("category") << ThN("measured") << ThN("estimated") << ThN("error")
       << ThN("simulated") << ThN("error") << "</tr>\n";
  for (const validation::CategoryRow& row : r.categories) {
    html << "<tr>" << Td(row.category) << TdN(FormatSeconds(row.measured_s));
    if (row.predicted) {
      html << TdN(FormatSeconds(row.estimated_s)) << TdN(Error(row.estimated_s, row.measured_s))
           << TdN(FormatSeconds(row.simulated_s)) << TdN(Error(row.simulated_s, row.measured_s));
    } else {
      html << TdN("-") << TdN("-") << TdN("-") << TdN("-");
    }
    html << "</tr>\n";
  }
  html << "</table>\n</section>\n";
  return html.str();
}

// The step the page draws: of the steps after the first (warm-up), the one of median time.
// step_times_s[i] is the i-th step run; the trace numbers steps from the first one's number.
int64_t DrawnStep(const validation::MeasuredRun& m, double* time_s) {
  if (m.spans.empty()) return -1;
  int64_t first = m.spans.front().step, last = first;
  for (const validation::MeasuredSpan& s : m.spans) {
    first = std::min(first, s.step);
    last = std::max(last, s.step);
  }
  const size_t n = m.step_times_s.size();
  if (n < 2) {
    *time_s = n == 1 ? m.step_times_s[0] : 0;
    return last;
  }
  std::vector<size_t> order;
  for (size_t i = 1; i < n; ++i) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return m.step_times_s[a] < m.step_times_s[b]; });
  const size_t index = order[order.size() / 2];
  *time_s = m.step_times_s[index];
  return first + static_cast<int64_t>(index);
}

// The spans of `step` with their starts, from the runtime's trace file (MeasuredRun's spans have
// durations only); empty with `why` set when the file cannot be read.
std::vector<validation::MeasuredSpan> StepSpans(const validation::MeasuredRun& m, int64_t step, std::string* why) {
  std::vector<validation::MeasuredSpan> spans;
  for (const validation::MeasuredSpan& e : m.spans) {
    if (e.step == step) spans.push_back(e);
  }
  if (spans.empty()) *why = "the runtime's trace has no spans for step " + std::to_string(step);
  return spans;
}

std::string TimelineSections(const validation::MeasuredRun& m,
                             const sim::SimReport& simulated) {
  double step_time_s = 0;
  const int64_t step = DrawnStep(m, &step_time_s);
  std::string why = "the runtime's trace has no spans";
  const std::vector<validation::MeasuredSpan> spans =
      step < 0 ? std::vector<validation::MeasuredSpan>{} : StepSpans(m, step, &why);
  const std::vector<Lane> measured = MeasuredLanes(spans);
  const std::vector<Lane> sim_lanes = SimulatedLanes(simulated);
  // One axis for both: to the later of the two ends.
  const double end_s =
      std::max({LanesEnd(measured), LanesEnd(sim_lanes), simulated.timeline_end_s});
  std::map<std::string, bool> categories;
  for (const validation::MeasuredSpan& s : spans) categories[s.category] = true;

  std::ostringstream html;
  html << "<section id=\"measured-timeline\" data-step=\"" << step << "\">\n<h2>Measured step "
       << step << "</h2>\n<p>"
       << HtmlEscape("The median of the steps after the first (" + FormatSeconds(step_time_s) +
                     " on rank 0), from the runtime's trace: one row per rank, each rank's "
                     "times from its first span of the step; a span inside another is drawn "
                     "inset. Hover over a span for its key and duration.")
       << "</p>\n<p>";
  for (const auto& [category, present] : categories)
    html << Swatch(CategoryClass(category), category);
  html << "</p>\n";
  if (measured.empty()) {
    html << "<p>No measured timeline: " << HtmlEscape(why) << ".</p>\n";
  } else {
    html << "<div class=\"scroll\">"
         << LanesSvg(measured, end_s, 0,
                     "time from each rank's first span of step " + std::to_string(step))
         << "</div>\n";
  }
  html << "</section>\n";

  html << "<section id=\"simulated-timeline\">\n<h2>Simulated step</h2>\n<p>"
       << HtmlEscape(
              "The SimGrid simulation of the same step program on the calibrated cluster, "
              "on the same time axis as the measured step: one lane per stream of each "
              "simulated device (" +
              std::to_string(simulated.microbatches_simulated) + " of " +
              std::to_string(simulated.microbatches) + " micro-batches simulated, ending at " +
              FormatSeconds(simulated.timeline_end_s) + "; the step, extended to every " +
              "micro-batch, takes " + FormatSeconds(simulated.step.step_time_s) + ").")
       << "</p>\n<p>";
  for (int s = 0; s < kStreams; ++s)
    html << Swatch("k" + std::to_string(s),
                   strategies::ToString(static_cast<strategies::Stream>(s)));
  html << Swatch("w", "waiting on communication (exposed)")
       << Swatch("b", "waiting for a pipeline input (bubble)") << "</p>\n";
  if (sim_lanes.empty()) {
    html << "<p>No simulated timeline: the simulation kept no events.</p>\n";
  } else {
    html << "<div class=\"scroll\">"
         << LanesSvg(sim_lanes, end_s, simulated.timeline_end_s,
                     "time from the start of the simulated step; dashed line: end of the "
                     "simulated timeline, " +
                         FormatSeconds(simulated.timeline_end_s))
         << "</div>\n";
  }
  html << "</section>\n";
  return html.str();
}

std::string OpsSection(const validation::Comparison& r) {
  std::ostringstream html;
  html << "<section id=\"ops\">\n<h2>Worst ops</h2>\n<p>"
       << HtmlEscape("Per op of the step program, seconds per step per rank over the " +
                     StepsAfterFirst(r.steps_compared) +
                     " (the trace's keys are the program's), largest "
                     "difference first; the first " +
                     std::to_string(std::min(kWorstOps, r.ops.size())) + " of " +
                     std::to_string(r.ops.size()) + " ops.")
       << "</p>\n";
  if (r.ops.empty())
    return html.str() + "<p>No op of the trace matched the program.</p>\n</section>\n";
  html << "<table>\n<tr>" << Th("op") << Th("category") << ThN("spans per step") << ThN("measured")
       << ThN("predicted") << ThN("difference") << ThN("error") << "</tr>\n";
  for (size_t i = 0; i < r.ops.size() && i < kWorstOps; ++i) {
    const validation::OpRow& o = r.ops[i];
    char spans[32];
    std::snprintf(spans, sizeof spans, "%.4g", o.count);
    const double diff = o.predicted_s - o.measured_s;
    html << "<tr>" << Td(o.op) << "<td>" << Swatch(CategoryClass(o.category), o.category) << "</td>"
         << TdN(spans) << TdN(FormatSeconds(o.measured_s)) << TdN(FormatSeconds(o.predicted_s))
         << TdN((diff >= 0 ? "+" : "-") + FormatSeconds(std::abs(diff)))
         << TdN(Error(o.predicted_s, o.measured_s)) << "</tr>\n";
  }
  html << "</table>\n</section>\n";
  return html.str();
}

std::string MemorySection(const ValidateContext& c, const validation::Comparison& r) {
  std::ostringstream html;
  html << "<section id=\"memory\">\n<h2>Memory per rank</h2>\n";
  if (r.memory.empty()) {
    return html.str() + "<p>The runtime reported no memory accounting.</p>\n</section>\n";
  }
  html << "<p>The runtime's accounting of what it allocates (peak per category over the run) "
          "against the memory model's prediction for the rank's stage; the note says where the "
          "two do not count the same thing.</p>\n<table>\n<tr>"
       << ThN("rank") << ThN("stage") << Th("category") << ThN("measured") << ThN("predicted")
       << ThN("error") << Th("note") << "</tr>\n";
  for (const validation::MemoryRow& row : r.memory) {
    const std::string note = MemoryComparability(row.category, c.plan);
    html << "<tr" << (note.empty() ? "" : " class=\"incomparable\"") << ">"
         << TdN(std::to_string(row.rank)) << TdN(std::to_string(row.stage)) << Td(row.category)
         << TdN(FormatBinaryBytes(row.measured_bytes))
         << TdN(FormatBinaryBytes(row.predicted_bytes))
         << TdN(Error(row.predicted_bytes, row.measured_bytes)) << Td(note) << "</tr>\n";
  }
  html << "</table>\n</section>\n";
  return html.str();
}

}  // namespace

void WriteValidateReport(const std::string& path, const ValidateContext& c,
                         const validation::Comparison& r, const validation::MeasuredRun& m,
                         const sim::SimReport& simulated, const strategies::StepProgram& program) {
  const std::string title = "shardsim validate: " + c.model.name + " on " + c.cluster.name;
  std::ostringstream html;
  // The policy forbids the page any fetch and any script: it stays self-contained when opened.
  html << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
       << "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src "
          "'unsafe-inline'\">\n<title>"
       << HtmlEscape(title) << "</title>\n<style>" << PageBaseStyle() << kStyle << "</style>\n</head>\n<body>\n";
  html << Header(c, r, m, program);
  html << CategoriesSection(r);
  html << TimelineSections(m, simulated);
  html << OpsSection(r);
  html << MemorySection(c, r);
  html << "</body>\n</html>\n";
  WriteOutputFile(path, html.str(), "--report");
}

}  // namespace shardsim::cli
