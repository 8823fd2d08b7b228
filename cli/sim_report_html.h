// The report page of `shardsim simulate --report`: one self-contained HTML file (inline CSS and
// SVG, no script, nothing fetched) showing where the simulated step's time goes, profiler style.
#pragma once

#include <string>

#include "core/cluster_spec.h"
#include "sim/simulate.h"

namespace shardsim::cli {

// The whole page. Sections: the model, plan and cluster; step time, tokens/s, MFU with the peak
// it refers to; the critical stage's step split into compute, exposed communication, pipeline
// bubble and other idle time, with the share of communication overlapped with compute; exposed
// communication per collective kind; the pipeline's bubble and time per stage; the timeline of
// one device per stage (cli/sim_timeline_svg.h: one rect.op per event); memory per device against
// HBM; each simulated device's use; the ten busiest links; contention; what was folded. Every
// number carries its unit; all text is HTML-escaped.
std::string SimReportHtml(const sim::SimReport& report, const strategies::StepProgram& program,
                          const ClusterSpec& cluster);

}  // namespace shardsim::cli
