// When nothing fits: the smallest cluster of the same system, larger than the given one, on which
// the search finds a plan that fits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/cluster_spec.h"
#include "core/model_spec.h"
#include "planner/search.h"

namespace shardsim::planner {

struct SmallestFit {
  bool found = false;
  std::string cluster;              // what --cluster takes for it: "dgx-h100:48", "my.json:48"
  ClusterSpec spec;                 // that cluster
  int64_t devices = 0;
  RankedPlan plan;                  // the best plan there
  std::vector<std::string> tried;   // every size searched, as --cluster takes it, in order
  std::string why_not;              // when not found: why (not a catalogue system, none up to the bound)
};

// Larger sizes of `cluster`'s system are searched with `options` (top 1): doubling the devices
// (a torus doubles its shortest dimension) until a plan fits, then, on switched systems, the node
// counts in between by bisection. At most `max_devices` devices. `cluster_arg` is what --cluster
// was given (a preset, FILE.json:SIZE or a file): each size is that at another size
// (ClusterSizeOf), so a cluster file's figures (a calibration, fitted efficiencies) are kept.
SmallestFit FindSmallestFit(const ModelSpec& model, const ClusterSpec& cluster, const std::string& cluster_arg, const SearchOptions& options,
                            int64_t max_devices = 65536);

}  // namespace shardsim::planner
