// The text form of the `shardsim-runtime ring-attention` report (ring_attention_bench.h), for a
// person at a terminal; --json prints the report itself.
#pragma once

#include <nlohmann/json.hpp>

namespace shardsim::validation {

// One shape's report on `ranks` ranks.
void PrintShapeText(const nlohmann::json& report, int ranks);
// A --sweep report: per block size and pass, then the crossovers.
void PrintSweepText(const nlohmann::json& report);

}  // namespace shardsim::validation
