// The two timelines of the `shardsim validate --report` page: one measured step from the
// runtime's trace (one row per rank, op spans coloured by category) and the simulated step (one
// lane per stream of each simulated device, as the simulate page draws it), each an inline SVG
// drawn on the same time axis so the two can be compared by eye.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/simulate.h"
#include "validation/compare.h"

namespace shardsim::cli {

// One rectangle on a lane; `depth` > 0 draws it inset (a span inside another span of its rank).
struct LaneSpan {
  double start_s = 0, end_s = 0;
  int depth = 0;
  std::string css_class, title;
};

// One row of a timeline; `heading` (when not empty) is a line above it naming a device, `lane`
// a stable name written as the row group's data-lane ("rank 1", "rank 0 compute").
struct Lane {
  std::string heading, label, lane;
  std::vector<LaneSpan> spans;
};

// The lanes of one measured step: one per rank in rank order, times relative to the rank's first
// span of the step, spans nested in another span of the same rank drawn inset.
std::vector<Lane> MeasuredLanes(const std::vector<validation::MeasuredSpan>& step_spans);

// The lanes of the simulated step: per simulated device in rank order a heading and one lane per
// stream it used (compute first), classes as the simulate page's (EventClass).
std::vector<Lane> SimulatedLanes(const sim::SimReport& report);

// The latest end of any span on `lanes` (0 when none).
double LanesEnd(const std::vector<Lane>& lanes);

// The CSS class of a measured span's category: the simulate page's stream colours (k0 compute,
// k1 tensor, k2 data, k3 pipeline, k4 expert, k5 context), "opt" optimizer, "ot" anything else.
std::string CategoryClass(const std::string& category);

// An <svg class="timeline" data-axis-end-s="..."> of `lanes` on a time axis from 0 to
// `axis_end_s` (the same width for every call, so equal ends give equal scales): per lane a
// <g data-lane> of <rect class="op K"> with a <title>; a dashed line at `marker_s` when > 0, and
// `note` under the axis.
std::string LanesSvg(const std::vector<Lane>& lanes, double axis_end_s, double marker_s,
                     const std::string& note);

}  // namespace shardsim::cli
