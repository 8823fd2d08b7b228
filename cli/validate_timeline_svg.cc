#include "cli/validate_timeline_svg.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "cli/html_text.h"
#include "cli/sim_timeline_svg.h"
#include "cli/sim_view.h"
#include "core/units.h"

namespace shardsim::cli {
namespace {

// The simulate page's geometry (cli/sim_timeline_svg.h), so the pages look alike.
using G = TimelineGeometry;
constexpr double kLeft = G::kLeft, kPlot = G::kPlot, kRight = G::kRight, kAxis = G::kAxis, kLane = G::kLane, kBar = G::kBar,
                 kHeading = G::kHeading, kGap = G::kGap, kInset = 3;
constexpr int kStreams = static_cast<int>(strategies::kStreams);
constexpr int kMaxDepth = 2;


// "0/3/qkv/5 (compute): 1.2 ms at 40 ms".
std::string SpanTitle(const std::string& what, double start_s, double end_s) {
  return what + ": " + FormatSeconds(end_s - start_s) + " at " + FormatSeconds(start_s);
}

}  // namespace

std::string CategoryClass(const std::string& category) {
  static const std::map<std::string, std::string> kClasses = {
      {"compute", "k0"},  {"tensor", "k1"}, {"data", "k2"},    {"fsdp", "k2"},
      {"pipeline", "k3"}, {"expert", "k4"}, {"context", "k5"}, {"host", "k6"}, {"optimizer", "opt"}};
  const auto it = kClasses.find(category);
  return it == kClasses.end() ? "ot" : it->second;
}

std::vector<Lane> MeasuredLanes(const std::vector<validation::MeasuredSpan>& step_spans) {
  std::map<int, std::vector<const validation::MeasuredSpan*>> by_rank;
  for (const validation::MeasuredSpan& s : step_spans) by_rank[s.rank].push_back(&s);
  std::vector<Lane> lanes;
  for (auto& [rank, spans] : by_rank) {
    // Outer spans before the spans they contain: by start, the longer first.
    std::stable_sort(spans.begin(), spans.end(), [](const validation::MeasuredSpan* a, const validation::MeasuredSpan* b) {
      return a->start_s != b->start_s ? a->start_s < b->start_s : a->duration_s > b->duration_s;
    });
    const double origin = spans.front()->start_s;
    Lane lane{"", "rank " + std::to_string(rank), "rank " + std::to_string(rank), {}};
    std::vector<double> open;  // ends of the spans enclosing the next one, innermost last
    for (const validation::MeasuredSpan* s : spans) {
      const double start = s->start_s - origin, end = start + std::max(0.0, s->duration_s);
      while (!open.empty() && open.back() <= start) open.pop_back();
      const int depth = static_cast<int>(open.size());
      open.push_back(end);
      lane.spans.push_back({start, end, std::min(depth, kMaxDepth), CategoryClass(s->category),
                            SpanTitle(s->key + " (" + s->category + ")", start, end)});
    }
    lanes.push_back(std::move(lane));
  }
  return lanes;
}

std::vector<Lane> SimulatedLanes(const sim::SimReport& report) {
  // lanes[device][stream]: the events, in report order.
  std::map<int64_t, std::vector<std::vector<const sim::TimelineEvent*>>> devices;
  for (const sim::TimelineEvent& e : report.events) {
    auto& streams = devices[e.device];
    if (streams.empty()) streams.resize(kStreams);
    streams[static_cast<size_t>(e.stream)].push_back(&e);
  }
  const std::map<int64_t, int64_t> stages = DeviceStages(report);
  std::map<int64_t, int64_t> represents;
  for (const sim::DeviceUse& use : report.devices) represents[use.rank] = use.represents;
  std::vector<Lane> lanes;
  for (const auto& [rank, streams] : devices) {
    std::string heading = "stage " + std::to_string(stages.count(rank) ? stages.at(rank) : 0) +
                          ", rank " + std::to_string(rank);
    if (represents.count(rank) && represents.at(rank) > 1)
      heading += " (stands for " + std::to_string(represents.at(rank)) + " devices)";
    for (int s = 0; s < kStreams; ++s) {
      const std::vector<const sim::TimelineEvent*>& events = streams[static_cast<size_t>(s)];
      if (s != 0 && events.empty()) continue;
      const std::string stream = strategies::ToString(static_cast<strategies::Stream>(s));
      Lane lane{s == 0 ? heading : "", stream, "rank " + std::to_string(rank) + " " + stream, {}};
      for (const sim::TimelineEvent* e : events) {
        lane.spans.push_back({e->start_s, e->end_s, 0, EventClass(*e),
                              SpanTitle(e->key + " " + e->name, e->start_s, e->end_s)});
      }
      lanes.push_back(std::move(lane));
    }
  }
  return lanes;
}

double LanesEnd(const std::vector<Lane>& lanes) {
  double end = 0;
  for (const Lane& lane : lanes) {
    for (const LaneSpan& span : lane.spans) end = std::max(end, span.end_s);
  }
  return end;
}

std::string LanesSvg(const std::vector<Lane>& lanes, double axis_end_s, double marker_s,
                     const std::string& note) {
  double end_s = std::max(axis_end_s, LanesEnd(lanes));
  if (!(end_s > 0) || !std::isfinite(end_s)) end_s = 1e-6;
  double height = kAxis;
  for (const Lane& lane : lanes) height += (lane.heading.empty() ? 0 : kHeading + kGap) + kLane;
  height += kGap + 24;
  const double width = kLeft + kPlot + kRight;
  const double scale = kPlot / end_s;

  std::ostringstream svg;
  svg << "<svg class=\"timeline\" data-axis-end-s=\"" << end_s << "\" width=\"" << Coord(width)
      << "\" height=\"" << Coord(height) << "\" viewBox=\"0 0 " << Coord(width) << " "
      << Coord(height) << "\">\n";
  svg << TimeAxisSvg(end_s, height);
  double y = kAxis;
  for (const Lane& lane : lanes) {
    if (!lane.heading.empty()) {
      y += kGap;
      svg << "<text class=\"device\" x=\"4\" y=\"" << Coord(y + kHeading - 6) << "\">"
          << HtmlEscape(lane.heading) << "</text>\n";
      y += kHeading;
    }
    svg << "<text class=\"lane\" x=\"" << Coord(kLeft - 6) << "\" y=\"" << Coord(y + kBar - 2)
        << "\" text-anchor=\"end\">" << HtmlEscape(lane.label) << "</text><g data-lane=\""
        << HtmlEscape(lane.lane) << "\" transform=\"translate(" << Coord(kLeft) << "," << Coord(y)
        << ")\">\n";
    for (const LaneSpan& span : lane.spans) {
      const double x = std::max(0.0, span.start_s) * scale;
      const double w = std::max(0.1, (span.end_s - span.start_s) * scale);
      svg << "<rect class=\"op " << HtmlEscape(span.css_class) << "\" x=\"" << Coord(x) << "\" y=\""
          << Coord(span.depth * kInset) << "\" width=\"" << Coord(w) << "\" height=\""
          << Coord(kBar - 2 * span.depth * kInset) << "\"><title>" << HtmlEscape(span.title)
          << "</title></rect>\n";
    }
    svg << "</g>\n";
    y += kLane;
  }
  if (marker_s > 0) {
    const double x = kLeft + marker_s * scale;
    svg << "<line class=\"marker\" x1=\"" << Coord(x) << "\" x2=\"" << Coord(x) << "\" y1=\""
        << Coord(kAxis - 6) << "\" y2=\"" << Coord(height - 24) << "\"/>\n";
  }
  svg << "<text class=\"note\" x=\"" << Coord(kLeft) << "\" y=\"" << Coord(height - 8) << "\">"
      << HtmlEscape(note) << "</text>\n</svg>\n";
  return svg.str();
}

}  // namespace shardsim::cli
