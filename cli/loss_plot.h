// Loss curves people can look at (`shardsim run --plot FILE.svg`): the loss of every step of one
// or several runs, overlaid, from the runtime's report (`shardsim run --json`), so that "sharded
// equals one rank" can be seen, with the largest relative difference between the runs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace shardsim::cli {

struct LossRun {
  std::string label;          // the plan (its mesh axes above 1, schedule, ZeRO stage) or the file
  std::string model;          // the model's name in the report
  std::vector<double> losses;  // nats, one per step
  int64_t first_step = 0;      // the step of losses[0] (0-based; after a --resume, the steps done before)
};

// The run in a report of `shardsim run --json` / `shardsim-runtime train --json` read from
// `source` (a file name, for messages). Throws InputError naming the source and field when it has
// no `losses` array of finite numbers.
LossRun LossRunFromReport(const nlohmann::json& report, const std::string& source);
// The same from a file. Throws InputError naming the file when it cannot be read or parsed.
LossRun ReadLossRun(const std::string& path);

// The largest |loss - first run's loss| / first run's loss over the steps (by absolute step) that a
// run shares with the first, and where: the step (0-based, absolute) and the run; {0, -1, -1}
// when no other run shares a step with the first.
struct LossDifference {
  double relative = 0;
  int step = -1, run = -1;
};
LossDifference LargestRelativeDifference(const std::vector<LossRun>& runs);

// A self-contained SVG: loss (nats) against step, a line per run with its label in a legend, the
// axes with their units, the title, and the largest relative difference when there are several
// runs. REQUIRES: at least one run with a step.
std::string LossPlotSvg(const std::vector<LossRun>& runs);

}  // namespace shardsim::cli
