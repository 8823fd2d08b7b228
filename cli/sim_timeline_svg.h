// The simulated step's timeline as inline SVG for the report page: for each drawn device one lane
// per stream, one rectangle per op, a time axis.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/simulate.h"

namespace shardsim::cli {

// An <svg class="timeline"> of the report.events of `devices` (ranks, drawn in that order): per
// device a heading and one lane per stream it used (compute first), one <rect class="op K"> per
// event (EventClass) with a <title> giving its key, op name,
// duration and start, and a time axis over the simulated timeline with labelled ticks. Every
// event of those devices is drawn, however short (at least a tenth of a pixel wide).
std::string TimelineSvg(const sim::SimReport& report, const std::vector<int64_t>& devices);

// The geometry every timeline of shardsim's pages shares (pixels), so pages look alike.
struct TimelineGeometry {
  static constexpr double kLeft = 150, kPlot = 1100, kRight = 40, kAxis = 30, kLane = 16, kBar = 12, kHeading = 20, kGap = 8;
};
// The time axis: grid lines and labelled ticks (1, 2 or 5 times a power of ten, about ten) from 0
// to `end_s`, drawn down to `height`.
std::string TimeAxisSvg(double end_s, double height);

// The CSS class of an event's rectangle: "w" for a wait on communication, "b" for a pipeline
// receive on the compute stream (the bubble), else "k" and its stream's number (k0 compute).
std::string EventClass(const sim::TimelineEvent& event);

}  // namespace shardsim::cli
