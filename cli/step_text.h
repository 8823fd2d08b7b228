// Text lines `estimate` and `simulate` both print about a step report.
#pragma once

#include <ostream>

#include "sim/estimate.h"

namespace shardsim::cli {

// "  heaviest    stage 5: compute 3.17 s, exposed expert all-to-all 3.53 s: 4.4 s more than stage
// 0, the critical one, which waits for it in its bubble", where the report names a heaviest stage
// (StepReport::heaviest_stage); nothing else. Kinds are named from `labels`' collectives.
void PrintHeaviestStage(const sim::StepReport& report, const sim::StepReport& labels, std::ostream& out);

}  // namespace shardsim::cli
