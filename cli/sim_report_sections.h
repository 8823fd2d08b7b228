// The report page's sections (cli/sim_report_html.h), each an HTML fragment from its <h2> on, every
// number with its unit and all text escaped.
#pragma once

#include <string>

#include "sim/simulate.h"

namespace shardsim::cli {

// Step time, tokens/s, MFU, PaLM MFU and HFU against the peak they refer to, memory, the limit.
std::string SummarySection(const sim::SimReport& report, const strategies::StepProgram& program);
// The critical stage's step as compute, exposed communication, bubble and other idle time (a
// stacked bar), and the share of its communication that overlapped with compute.
std::string OverviewSection(const sim::SimReport& report);
// Exposed communication per collective kind, as bars.
std::string ExposedSection(const sim::SimReport& report);
// The pipeline's bubble and each stage's busy time.
std::string PipelineSection(const sim::SimReport& report);
// The peak stage's memory by part, and each simulated device's peak against HBM, as bars.
std::string MemorySection(const sim::SimReport& report);
// Per simulated device: seconds busy per stream, compute, exposed communication, bubble, overlap.
std::string DevicesSection(const sim::SimReport& report);
// The ten busiest links.
std::string LinksSection(const sim::SimReport& report);
// The communication kinds that ran slower than alone, on which links, with which other kinds.
std::string ContentionSection(const sim::SimReport& report);
// What one simulated device or group stood for, what ran explicitly, and the engine's counts.
std::string FoldingSection(const sim::SimReport& report);

}  // namespace shardsim::cli
