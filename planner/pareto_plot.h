// A small self-contained SVG of throughput against memory per device for the Pareto plans.
#pragma once

#include <string>
#include <vector>

#include "planner/search.h"

namespace shardsim::planner {

// An SVG document: each Pareto plan a point (memory per device in GiB across, tokens/s up),
// joined by the frontier, with the device's HBM as a vertical line and axis labels. `title`
// heads the plot.
std::string ParetoSvg(const std::vector<RankedPlan>& pareto, double hbm_bytes, const std::string& title);

}  // namespace shardsim::planner
