#include "cli/sim_report_sections.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "cli/html_text.h"
#include "cli/svg_bars.h"
#include "core/units.h"

namespace shardsim::cli {
namespace {

constexpr int kStreams = static_cast<int>(strategies::kStreams);
constexpr size_t kMaxRows = 256;  // device rows and bars beyond these are summarised

std::string Td(const std::string& text) { return "<td>" + HtmlEscape(text) + "</td>"; }
std::string TdN(const std::string& text) { return "<td class=\"n\">" + HtmlEscape(text) + "</td>"; }
std::string Th(const std::string& text) { return "<th>" + HtmlEscape(text) + "</th>"; }

std::string Card(const std::string& label, const std::string& value, const std::string& note) {
  return "<div class=\"card\"><span>" + HtmlEscape(label) + "</span><b>" + HtmlEscape(value) +
         "</b><span>" + HtmlEscape(note) + "</span></div>\n";
}

// "1 device", "8 devices".
std::string Devices(int64_t count) {
  return std::to_string(count) + (count == 1 ? " device" : " devices");
}

std::string Fraction(double part, double whole) {
  return FormatPercent(whole > 0 ? part / whole : 0);
}

double ExposedTotal(const sim::StepReport& step) {
  double total = 0;
  for (const auto& [kind, seconds] : step.exposed_comm_s) total += seconds;
  return total;
}

// The critical stage's representative device (its lowest rank), or null when none is reported.
const sim::DeviceUse* CriticalDevice(const sim::SimReport& report) {
  const sim::DeviceUse* found = nullptr;
  for (const sim::DeviceUse& use : report.devices) {
    if (use.stage == report.step.critical_stage && (found == nullptr || use.rank < found->rank))
      found = &use;
  }
  return found;
}

// The colour class of a communication kind ("tensor all-reduce", "data,fsdp reduce-scatter"): its
// first mesh axis's stream.
std::string KindClass(const std::string& kind) {
  static const std::map<std::string, std::string> kByAxis = {{"tensor", "k1"}, {"data", "k2"},
                                                             {"fsdp", "k2"},   {"pipeline", "k3"},
                                                             {"expert", "k4"}, {"context", "k5"}, {"host", "k6"}};
  const auto it = kByAxis.find(kind.substr(0, kind.find_first_of(" ,")));
  return it == kByAxis.end() ? "ex" : it->second;
}

std::string Join(const std::vector<std::string>& items) {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : ", ") + item;
  return text;
}

std::string List(const std::vector<std::string>& items, const std::string& empty) {
  if (items.empty()) return "<p>" + HtmlEscape(empty) + "</p>\n";
  std::string html = "<ul>\n";
  for (const std::string& item : items) html += "<li>" + HtmlEscape(item) + "</li>\n";
  return html + "</ul>\n";
}

}  // namespace

std::string SummarySection(const sim::SimReport& report, const strategies::StepProgram& program) {
  const sim::StepReport& s = report.step;
  const std::string peak =
      FormatSI(s.peak_flop_per_s, "FLOP/s") + " " + MatmulPeakDtype(program.plan.dtype, Fp8RecipeOf(program.plan)) + " per device";
  const int64_t devices = program.plan.mesh.Product();
  std::ostringstream html;
  html << "<h2>Step</h2>\n<div class=\"cards\">\n"
       << Card("step time", FormatSeconds(s.step_time_s), "simulated (SimGrid)")
       << Card("throughput", FormatCount(s.tokens_per_s) + " tokens/s", "over " + Devices(devices))
       << Card("MFU", FormatPercent(s.mfu), "of " + peak)
       << Card("MFU, PaLM's count", FormatPercent(s.mfu_palm), "masked attention blocks counted")
       << Card("HFU", FormatPercent(s.hfu), "recomputation counted")
       << Card("memory", FormatBinaryBytes(s.memory.peak.total()),
               "of " + FormatBinaryBytes(s.hbm_bytes) +
                   " HBM: " + (s.hbm_fits ? "fits" : "DOES NOT FIT") +
                   (s.host_fits ? "" : "; offloaded activations beyond the host memory"))
       << Card("critical stage", "stage " + std::to_string(s.critical_stage), "the slowest")
       << "</div>\n";
  html << "<p>MFU: "
       << HtmlEscape(FormatSI(s.model_flops_per_step, "FLOP") +
                     " of model FLOPs per step (6N per token plus causal attention) / (" +
                     FormatSeconds(s.step_time_s) + " x " + Devices(devices) + " x " + peak +
                     ", the chip's dense peak)")
       << ".</p>\n";
  if (!s.why.empty()) html << "<p>Limited by: " << HtmlEscape(s.why) << ".</p>\n";
  return html.str();
}

std::string OverviewSection(const sim::SimReport& report) {
  const sim::StepReport& s = report.step;
  const double exposed = ExposedTotal(s);
  const double other = std::max(0.0, s.step_time_s - s.compute_s - exposed - s.bubble_s);
  const std::vector<SvgBar> parts = {
      {"compute", s.compute_s, FormatSeconds(s.compute_s), "k0"},
      {"exposed communication", exposed, FormatSeconds(exposed), "ex"},
      {"pipeline bubble", s.bubble_s, FormatSeconds(s.bubble_s), "b"},
      {"other idle", other, FormatSeconds(other), "ot"}};
  std::ostringstream html;
  html << "<h2>Where the step goes (stage " << s.critical_stage << ", the critical one)</h2>\n"
       << StackedBarSvg(parts) << "<table>\n<tr>" << Th("") << Th("time") << Th("of the step")
       << "</tr>\n";
  for (const SvgBar& part : parts) {
    html << "<tr><td><span class=\"sw " << part.css_class << "\"></span>" << HtmlEscape(part.label)
         << "</td>" << TdN(part.value_text) << TdN(Fraction(part.value, s.step_time_s))
         << "</tr>\n";
  }
  html << "<tr>" << Td("step") << TdN(FormatSeconds(s.step_time_s)) << TdN(FormatPercent(1))
       << "</tr>\n</table>\n";
  if (const sim::DeviceUse* use = CriticalDevice(report)) {
    const double comm = use->overlapped_comm_s + use->exposed_comm_s;
    html << "<p>Communication overlapped with compute on rank " << use->rank << ": "
         << HtmlEscape(FormatSeconds(use->overlapped_comm_s) + " of " + FormatSeconds(comm) + " (" +
                       Fraction(use->overlapped_comm_s, comm) + "), over the simulated timeline")
         << ".</p>\n";
  }
  return html.str();
}

std::string ExposedSection(const sim::SimReport& report) {
  const sim::StepReport& s = report.step;
  std::vector<SvgBar> bars;
  for (const auto& [kind, seconds] : s.exposed_comm_s) {
    if (seconds > 0)
      bars.push_back(
          {kind, seconds,
           FormatSeconds(seconds) + " (" + Fraction(seconds, s.step_time_s) + " of the step)",
           KindClass(kind)});
  }
  std::stable_sort(bars.begin(), bars.end(),
                   [](const SvgBar& a, const SvgBar& b) { return a.value > b.value; });
  std::string html = "<h2>Exposed communication by kind</h2>\n";
  if (bars.empty()) return html + "<p>No communication is exposed: compute hides all of it.</p>\n";
  return html +
         "<p>Time the critical stage's compute stream waits on each kind of collective, per "
         "step.</p>\n" +
         BarsSvg(bars);
}

std::string PipelineSection(const sim::SimReport& report) {
  const sim::StepReport& s = report.step;
  std::ostringstream html;
  html << "<h2>Pipeline</h2>\n<p>Bubble on the critical stage: "
       << HtmlEscape(FormatSeconds(s.bubble_s) + " (" + Fraction(s.bubble_s, s.step_time_s) +
                     " of the step); its last task ends at " + FormatSeconds(s.pipeline_s))
       << ".</p>\n";
  if (s.stage_time_s.size() > 1) {
    std::vector<SvgBar> bars;
    for (size_t i = 0; i < s.stage_time_s.size() && i < kMaxRows; ++i) {
      const bool critical = static_cast<int64_t>(i) == s.critical_stage;
      bars.push_back({"stage " + std::to_string(i) + (critical ? " (critical)" : ""),
                      s.stage_time_s[i], FormatSeconds(s.stage_time_s[i]),
                      critical ? "over" : "k0"});
    }
    html << "<p>Time per stage:</p>\n" << BarsSvg(bars);
  }
  return html.str();
}

std::string MemorySection(const sim::SimReport& report) {
  const sim::StepReport& s = report.step;
  const strategies::MemoryBreakdown& peak = s.memory.peak;
  std::ostringstream html;
  html << "<h2>Memory</h2>\n<p>Peak per device " << HtmlEscape(FormatBinaryBytes(peak.total()))
       << " on stage " << s.memory.peak_stage << " of "
       << HtmlEscape(FormatBinaryBytes(s.hbm_bytes)) << " HBM ("
       << HtmlEscape(Fraction(peak.total(), s.hbm_bytes))
       << "): " << (s.hbm_fits ? "fits" : "does not fit") << "."
       << (peak.host > 0 ? " Offloaded activations in host memory: " + HtmlEscape(FormatBinaryBytes(peak.host)) +
                               (s.host_bytes > 0 ? " of " + HtmlEscape(FormatBinaryBytes(s.host_bytes)) + " per device: " + (s.host_fits ? "fits." : "does not fit.")
                                                 : " (the cluster spec gives no host memory).")
                         : std::string())
       << "</p>\n<table>\n<tr>" << Th("parameters")
       << Th("gradients") << Th("optimizer") << Th("activations") << Th("buffers") << Th("total")
       << "</tr>\n<tr>" << TdN(FormatBinaryBytes(peak.params)) << TdN(FormatBinaryBytes(peak.grads))
       << TdN(FormatBinaryBytes(peak.optimizer)) << TdN(FormatBinaryBytes(peak.activations))
       << TdN(FormatBinaryBytes(peak.buffers)) << TdN(FormatBinaryBytes(peak.total()))
       << "</tr>\n</table>\n";
  std::vector<SvgBar> bars;
  for (const sim::DeviceUse& use : report.devices) {
    if (bars.size() == kMaxRows) break;
    bars.push_back(
        {"rank " + std::to_string(use.rank) + " (stage " + std::to_string(use.stage) + ")",
         use.memory_bytes,
         FormatBinaryBytes(use.memory_bytes) + " (" + Fraction(use.memory_bytes, s.hbm_bytes) + ")",
         use.memory_bytes > s.hbm_bytes ? "over" : "mem"});
  }
  if (!bars.empty())
    html << "<p>Per simulated device, against HBM:</p>\n"
         << BarsSvg(bars, s.hbm_bytes, s.hbm_bytes, "HBM " + FormatBinaryBytes(s.hbm_bytes));
  return html.str();
}

std::string DevicesSection(const sim::SimReport& report) {
  bool used[kStreams] = {};
  for (const sim::DeviceUse& use : report.devices) {
    for (int i = 0; i < kStreams; ++i) used[i] = used[i] || use.stream_busy_s[i] > 0;
  }
  std::ostringstream html;
  html << "<h2>Simulated devices</h2>\n";
  if (report.devices.empty()) return html.str() + "<p>No device use reported.</p>\n";
  html << "<p>Seconds over the simulated timeline ("
       << HtmlEscape(FormatSeconds(report.timeline_end_s)) << ").</p>\n<table>\n<tr>" << Th("rank")
       << Th("stage") << Th("stands for") << Th("compute") << Th("exposed communication")
       << Th("bubble") << Th("overlapped communication");
  for (int i = 0; i < kStreams; ++i) {
    if (used[i])
      html << Th(strategies::ToString(static_cast<strategies::Stream>(i)) + " stream busy");
  }
  html << Th("memory") << "</tr>\n";
  for (size_t d = 0; d < report.devices.size() && d < kMaxRows; ++d) {
    const sim::DeviceUse& use = report.devices[d];
    html << "<tr>" << TdN(std::to_string(use.rank)) << TdN(std::to_string(use.stage))
         << TdN(Devices(use.represents)) << TdN(FormatSeconds(use.compute_s))
         << TdN(FormatSeconds(use.exposed_comm_s)) << TdN(FormatSeconds(use.bubble_s))
         << TdN(FormatSeconds(use.overlapped_comm_s));
    for (int i = 0; i < kStreams; ++i) {
      if (used[i]) html << TdN(FormatSeconds(use.stream_busy_s[i]));
    }
    html << TdN(FormatBinaryBytes(use.memory_bytes)) << "</tr>\n";
  }
  html << "</table>\n";
  if (report.devices.size() > kMaxRows)
    html << "<p>" << report.devices.size() - kMaxRows << " more devices not listed.</p>\n";
  return html.str();
}

std::string LinksSection(const sim::SimReport& report) {
  std::ostringstream html;
  html << "<h2>Busiest links</h2>\n";
  if (report.links.empty()) return html.str() + "<p>No link carried traffic.</p>\n";
  html << "<p>" << report.links.size() << " links carried traffic; the busiest "
       << std::min<size_t>(10, report.links.size())
       << ", utilisation as busy time over the simulated step:</p>\n<table>\n<tr>" << Th("link")
       << Th("utilisation") << Th("busy") << Th("senders") << Th("kinds") << "</tr>\n";
  for (size_t i = 0; i < report.links.size() && i < 10; ++i) {
    const sim::LinkUse& link = report.links[i];
    html << "<tr>" << Td(link.name) << TdN(FormatPercent(link.utilisation))
         << TdN(FormatSeconds(link.busy_s)) << TdN(Devices(link.senders)) << Td(Join(link.kinds))
         << "</tr>\n";
  }
  return html.str() + "</table>\n";
}

std::string ContentionSection(const sim::SimReport& report) {
  std::vector<std::string> items;
  for (const sim::Contention& c : report.contention) {
    std::string item = c.kind + ": " + FormatSeconds(c.simulated_s) + " per step against " +
                       FormatSeconds(c.uncontended_s) + " alone";
    if (c.uncontended_s > 0) {
      char slowdown[32];
      std::snprintf(slowdown, sizeof slowdown, " (%.2fx)", c.simulated_s / c.uncontended_s);
      item += slowdown;
    }
    if (!c.links.empty()) item += ", on " + Join(c.links);
    if (!c.with.empty()) item += ", shared with " + Join(c.with);
    items.push_back(item);
  }
  return "<h2>Contention</h2>\n" + List(items, "No communication ran slower than alone.");
}

std::string FoldingSection(const sim::SimReport& report) {
  std::ostringstream html;
  html << "<h2>What was simulated</h2>\n<table>\n<tr>" << Td("devices simulated")
       << TdN(std::to_string(report.simulated_devices) + " of " +
              Devices(report.represented_devices))
       << "</tr>\n<tr>" << Td("micro-batches simulated")
       << TdN(std::to_string(report.microbatches_simulated) + " of " +
              std::to_string(report.microbatches))
       << "</tr>\n<tr>" << Td("SimGrid transfers")
       << TdN(FormatCount(static_cast<double>(report.flows)) + " flows") << "</tr>\n<tr>"
       << Td("activities")
       << TdN(FormatCount(static_cast<double>(report.activities)) + " activities") << "</tr>\n<tr>"
       << Td("wall time") << TdN(FormatSeconds(report.wall_s)) << "</tr>\n<tr>"
       << Td("peak memory of a simulating process")
       << TdN(FormatBinaryBytes(static_cast<double>(report.peak_rss_bytes))) << "</tr>\n</table>\n";
  html << "<p>Folded (one simulated device or group stands for others):</p>\n"
       << List(report.folded, "Nothing was folded.");
  html << "<p>Simulated explicitly:</p>\n" << List(report.simulated, "Nothing listed.");
  return html.str();
}

}  // namespace shardsim::cli
