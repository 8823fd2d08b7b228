#include "cli/sim_timeline_svg.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "cli/html_text.h"
#include "cli/sim_view.h"
#include "core/units.h"
#include "strategies/step_program.h"

namespace shardsim::cli {
namespace {

using G = TimelineGeometry;
constexpr double kLeft = G::kLeft, kPlot = G::kPlot, kRight = G::kRight, kAxis = G::kAxis, kLane = G::kLane, kBar = G::kBar,
                 kHeading = G::kHeading, kGap = G::kGap;
constexpr int kStreams = static_cast<int>(strategies::kStreams);  // strategies::Stream's values

// A tick spacing of 1, 2 or 5 times a power of ten giving at most about ten ticks over `span`.
double TickStep(double span) {
  const double raw = span / 10;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double factor : {1.0, 2.0, 5.0}) {
    if (raw <= factor * power) return factor * power;
  }
  return 10 * power;
}

// "0/3/qkv/5: 1.2 ms at 40 ms"; the op's name after the key only where the key does not hold it
// ("wait ..."), as markup for many thousands of ops adds up.
std::string EventTitle(const sim::TimelineEvent& e) {
  const size_t op_begin = e.key.find('/', e.key.find('/') + 1);
  const bool key_names_op = op_begin != std::string::npos &&
                            e.key.compare(op_begin + 1, e.name.size() + 1, e.name + "/") == 0;
  std::string text = (key_names_op ? e.key : e.key + " " + e.name) + ": " +
                     FormatSeconds(e.end_s - e.start_s) + " at " + FormatSeconds(e.start_s);
  if (e.is_comm) {
    text += ", " + ToString(e.collective) + " of " + FormatBinaryBytes(e.bytes) + " over " +
            std::to_string(e.group.size()) + " ranks";
    if (e.uncontended_s > 0) text += " (alone " + FormatSeconds(e.uncontended_s) + ")";
  }
  return text;
}

}  // namespace

std::string TimeAxisSvg(double end_s, double height) {
  const double scale = kPlot / end_s, step = TickStep(end_s);
  std::ostringstream svg;
  for (int i = 0; i <= 11 && i * step <= end_s * (1 + 1e-9); ++i) {
    const double x = kLeft + i * step * scale;
    svg << "<line class=\"grid\" x1=\"" << Coord(x) << "\" x2=\"" << Coord(x) << "\" y1=\""
        << Coord(kAxis - 6) << "\" y2=\"" << Coord(height - 24) << "\"/><text class=\"tick\" x=\""
        << Coord(x) << "\" y=\"" << Coord(kAxis - 10) << "\" text-anchor=\"middle\">"
        << HtmlEscape(FormatSeconds(i * step)) << "</text>\n";
  }
  return svg.str();
}

std::string EventClass(const sim::TimelineEvent& event) {
  if (EventCategory(event) == "wait") return "w";
  if (IsPipelineReceive(event) && event.stream == strategies::Stream::kCompute) return "b";
  return "k" + std::to_string(static_cast<int>(event.stream));
}

std::string TimelineSvg(const sim::SimReport& report, const std::vector<int64_t>& devices) {
  std::map<int64_t, size_t> index;
  for (size_t i = 0; i < devices.size(); ++i) index.emplace(devices[i], i);
  // lanes[device][stream]: the events, in report order.
  std::vector<std::vector<std::vector<const sim::TimelineEvent*>>> lanes(
      devices.size(), std::vector<std::vector<const sim::TimelineEvent*>>(kStreams));
  double end_s = report.timeline_end_s;
  for (const sim::TimelineEvent& e : report.events) {
    const auto it = index.find(e.device);
    if (it == index.end()) continue;
    lanes[it->second][static_cast<size_t>(e.stream)].push_back(&e);
    end_s = std::max(end_s, e.end_s);
  }
  if (!(end_s > 0) || !std::isfinite(end_s)) end_s = 1e-6;
  const std::map<int64_t, int64_t> stages = DeviceStages(report);
  std::map<int64_t, int64_t> represents;
  for (const sim::DeviceUse& use : report.devices) represents[use.rank] = use.represents;

  double height = kAxis;
  for (size_t d = 0; d < devices.size(); ++d) {
    height += kHeading + kGap;
    for (int s = 0; s < kStreams; ++s) {
      if (s == 0 || !lanes[d][static_cast<size_t>(s)].empty()) height += kLane;
    }
  }
  height += 24;
  const double width = kLeft + kPlot + kRight;
  const double scale = kPlot / end_s;

  std::ostringstream svg;
  svg << "<svg class=\"timeline\" width=\"" << Coord(width) << "\" height=\"" << Coord(height)
      << "\" viewBox=\"0 0 " << Coord(width) << " " << Coord(height) << "\">\n";
  svg << TimeAxisSvg(end_s, height);
  double y = kAxis;
  for (size_t d = 0; d < devices.size(); ++d) {
    const int64_t rank = devices[d];
    std::string heading = "stage " + std::to_string(stages.count(rank) ? stages.at(rank) : 0) +
                          ", rank " + std::to_string(rank);
    if (represents.count(rank) && represents.at(rank) > 1)
      heading += " (stands for " + std::to_string(represents.at(rank)) + " devices)";
    svg << "<text class=\"device\" x=\"4\" y=\"" << Coord(y + kHeading - 6) << "\">"
        << HtmlEscape(heading) << "</text>\n";
    y += kHeading;
    for (int s = 0; s < kStreams; ++s) {
      const std::vector<const sim::TimelineEvent*>& lane = lanes[d][static_cast<size_t>(s)];
      if (s != 0 && lane.empty()) continue;
      svg << "<text class=\"lane\" x=\"" << Coord(kLeft - 6) << "\" y=\"" << Coord(y + kBar - 2)
          << "\" text-anchor=\"end\">"
          << HtmlEscape(strategies::ToString(static_cast<strategies::Stream>(s)))
          << "</text><g transform=\"translate(" << Coord(kLeft) << "," << Coord(y) << ")\">\n";
      for (const sim::TimelineEvent* e : lane) {
        const double x = std::max(0.0, e->start_s) * scale;
        const double w = std::max(0.1, (e->end_s - e->start_s) * scale);
        svg << "<rect class=\"op " << EventClass(*e) << "\" x=\"" << Coord(x) << "\" width=\""
            << Coord(w) << "\" height=\"" << Coord(kBar) << "\"><title>"
            << HtmlEscape(EventTitle(*e)) << "</title></rect>\n";
      }
      svg << "</g>\n";
      y += kLane;
    }
    y += kGap;
  }
  const double end_x = kLeft + report.timeline_end_s * scale;
  if (report.timeline_end_s > 0) {
    svg << "<line class=\"marker\" x1=\"" << Coord(end_x) << "\" x2=\"" << Coord(end_x)
        << "\" y1=\"" << Coord(kAxis - 6) << "\" y2=\"" << Coord(height - 24) << "\"/>\n";
  }
  svg << "<text class=\"note\" x=\"" << Coord(kLeft) << "\" y=\"" << Coord(height - 8)
      << "\">time from the start of the simulated step; dashed line: "
      << HtmlEscape("end of the simulated timeline, " + FormatSeconds(report.timeline_end_s))
      << "</text>\n";
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace shardsim::cli
