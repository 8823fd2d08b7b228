// Shared helpers for the collective tests: clusters from presets, groups, and one-call costs.
#pragma once

#include <string>

#include "core/cluster_presets.h"
#include "sim/collective_cost.h"

namespace shardsim::sim {

inline topologies::Cluster MakeCluster(const std::string& preset) { return topologies::Cluster(ParseClusterPreset(preset, "--cluster")); }

inline DeviceGroup FirstDevices(int64_t n) {
  DeviceGroup g;
  for (int64_t d = 0; d < n; ++d) g.devices.push_back(d);
  return g;
}

inline CollectiveModel Model(const topologies::Cluster& cluster, const DeviceGroup& group, CollectiveOp op, Algorithm algorithm) {
  return std::move(BuildCollectiveModels(cluster, group, op, algorithm, "test").front());
}

inline double Seconds(const topologies::Cluster& cluster, const DeviceGroup& group, CollectiveOp op, Algorithm algorithm,
                      double bytes) {
  return Model(cluster, group, op, algorithm).Cost(bytes).time_s;
}

}  // namespace shardsim::sim
