// Measured training runs with their configurations (docs/accuracy.md, "The runs file"): what
// `shardsim calibrate --from-runs` fits efficiencies to and the accuracy report tests against.
#pragma once

#include <string>
#include <vector>

#include "core/model_spec.h"
#include "core/plan_spec.h"

namespace shardsim::validation {

struct PublishedRun {
  std::string id;
  std::string group;      // runs fitted together (one set of efficiencies); default: the cluster's system
  std::string source;     // where the figures come from
  std::string source_family;  // for the per-source summary; default: "runs"
  std::string framework;  // what ran it, as written (information)
  bool fit = true;        // split: "fit" (calibrate fits on it) or "test" (only predicted)
  ModelSpec model;
  std::string cluster;    // a preset ("dgx-h100:64") or a cluster JSON path
  PlanSpec plan;
  double step_time_s = 0;       // measured, or tokens per step / (tokens/s per device x devices)
  double peak_memory_gib = 0;   // published peak memory per device; 0: none
  std::vector<std::string> assumed;
};

// Reads a runs file strictly: {"runs": [...]} (plus optional "_about" and "skipped"). Each run has
// id, model (a preset name, a shardsim model JSON object, or a Hugging Face config object), cluster,
// plan (a plan JSON object) and measured {step_time_s | tokens_per_s_per_device}. Throws InputError
// naming `path`, the run and the field for anything missing, unknown or out of range, for duplicate
// ids and for plans the model or cluster cannot run.
std::vector<PublishedRun> ReadMeasuredRuns(const std::string& path);

}  // namespace shardsim::validation
