#include "core/cluster_spec.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "core/suggest.h"
#include "core/units.h"

namespace shardsim {

double HostCopyBytesPerS(const ClusterSpec& cluster) {
  const auto host = cluster.links.find("host");
  if (host == cluster.links.end()) return 0;
  const LinkSpec& link = host->second;
  return link.bandwidth_bytes_per_s * link.efficiency * static_cast<double>(std::max<int64_t>(1, link.links_per_device));
}

int64_t DeviceCount(const ClusterSpec& cluster) {
  const TopologySpec& t = cluster.topology;
  switch (t.kind) {
    case TopologyKind::kTorus: {
      int64_t chips = t.slices;
      for (int64_t d : t.torus_dims) chips *= d;
      return chips;
    }
    case TopologyKind::kSwitched: return t.devices_per_node * t.nodes;
    case TopologyKind::kLocal: return t.local_devices;
  }
  return 0;
}

int64_t NodeOf(const TopologySpec& t, int64_t device) {
  switch (t.kind) {
    case TopologyKind::kSwitched: return device / t.devices_per_node;
    case TopologyKind::kLocal: return device / (t.local_devices / t.local_hosts);
    case TopologyKind::kTorus: return -1;
  }
  return -1;
}

void CheckClusterSize(int64_t devices, const std::string& what, const std::string& where) {
  if (devices <= kMaxClusterDevices) return;
  throw InputError(where, what + " has " + std::to_string(devices) + " devices, more than shardsim accepts",
                   "at most " + std::to_string(kMaxClusterDevices) +
                       " devices (2^18: the largest training clusters today are 100k-200k GPUs; this bound keeps every static command "
                       "within seconds and a few hundred MiB)",
                   "model one job's share of the cluster, e.g. a smaller size");
}

std::vector<std::string> RequiredLinks(const TopologySpec& topology) {
  switch (topology.kind) {
    case TopologyKind::kTorus:
      return topology.slices > 1 ? std::vector<std::string>{"ici", "dcn"} : std::vector<std::string>{"ici"};
    case TopologyKind::kSwitched: return {"nvlink", "infiniband"};
    case TopologyKind::kLocal: return topology.local_hosts > 1 ? std::vector<std::string>{"shm", "tcp"} : std::vector<std::string>{"shm"};
  }
  return {};
}

std::string ToString(TopologyKind kind) {
  switch (kind) {
    case TopologyKind::kTorus: return "torus";
    case TopologyKind::kSwitched: return "switched";
    case TopologyKind::kLocal: return "local";
  }
  return "switched";
}

std::string DescribeShape(const TopologySpec& t) {
  switch (t.kind) {
    case TopologyKind::kTorus: {
      std::string shape;
      for (size_t i = 0; i < t.torus_dims.size(); ++i) shape += (i ? "x" : "") + std::to_string(t.torus_dims[i]);
      std::string wrap;
      for (size_t i = 0; i < t.wraparound.size(); ++i) wrap += t.wraparound[i] ? "T" : "M";
      shape += " torus (axes " + wrap + ": T wraps around, M is a mesh line)";
      if (t.slices > 1) shape += " x " + std::to_string(t.slices) + " slices over DCN";
      return shape;
    }
    case TopologyKind::kSwitched: {
      char over[32];
      std::snprintf(over, sizeof over, "%g", t.oversubscription);
      return std::to_string(t.nodes) + " nodes x " + std::to_string(t.devices_per_node) + " devices (NVSwitch), " + t.fabric +
             " InfiniBand, oversubscription " + over + ":1";
    }
    case TopologyKind::kLocal:
      if (t.local_hosts > 1) return std::to_string(t.local_hosts) + " hosts x " + std::to_string(t.local_devices / t.local_hosts) + " CPU cores (TCP between hosts)";
      return std::to_string(t.local_devices) + " CPU cores";
  }
  return "";
}

void ValidateCluster(const ClusterSpec& c, const std::string& where) {
  const TopologySpec& t = c.topology;
  const std::string tw = where + "/topology";
  if (t.kind == TopologyKind::kTorus) {
    if (t.torus_dims.empty() || t.torus_dims.size() > 4) {
      throw InputError(tw + "/dims", "a torus needs 1 to 4 axes, got " + std::to_string(t.torus_dims.size()), "e.g. [16, 16, 16]");
    }
    if (t.wraparound.size() != t.torus_dims.size()) {
      throw InputError(tw + "/wraparound", "needs one entry per axis (" + std::to_string(t.torus_dims.size()) + ")",
                       "an array of booleans as long as dims");
    }
    if (t.slices < 1) throw InputError(tw + "/slices", "must be positive", "1 or more");
  } else if (t.kind == TopologyKind::kSwitched) {
    if (t.devices_per_node < 1) throw InputError(tw + "/devices_per_node", "must be positive", "e.g. 8 or 72");
    if (t.nodes < 1) throw InputError(tw + "/nodes", "must be positive", "1 or more");
    if (t.fabric != "fat-tree" && t.fabric != "rail-optimized") {
      throw InputError(tw + "/fabric", "unknown fabric '" + t.fabric + "'", "fat-tree, rail-optimized", "the scale-out network of a switched topology");
    }
    if (t.leaf_ports < 1) throw InputError(tw + "/leaf_ports", "must be positive", "e.g. 32 (a 64-port switch, half down)");
    if (!(t.oversubscription >= 1)) throw InputError(tw + "/oversubscription", "must be at least 1", "1 (non-blocking) or more");
  } else if (t.local_devices < 1) {
    throw InputError(tw + "/local_devices", "must be positive", "1 or more");
  } else if (t.local_hosts < 1 || t.local_devices % t.local_hosts != 0) {
    throw InputError(tw + "/local_hosts", std::to_string(t.local_hosts) + " does not divide the " + std::to_string(t.local_devices) + " devices",
                     "a divisor of local_devices (every host has as many cores)");
  }
  // Device counts multiply: check they cannot overflow, then the bound (kMaxClusterDevices).
  int64_t devices = 1;
  for (int64_t d : t.torus_dims) devices = CheckedMul(devices, d, tw);
  if (t.kind == TopologyKind::kTorus) devices = CheckedMul(devices, t.slices, tw);
  if (t.kind == TopologyKind::kSwitched) devices = CheckedMul(t.devices_per_node, t.nodes, tw);
  if (t.kind == TopologyKind::kLocal) devices = t.local_devices;
  CheckClusterSize(devices, c.name.empty() ? "the cluster" : c.name, tw);
  if (c.chip.peak_flop_per_s.empty()) {
    throw InputError(where + "/chip/peak_flop_per_s", "no peak given", "an object such as {\"bf16\": 9.894e14}");
  }
  ValidateCalibration(c.calibration, where + "/calibration");
  for (const std::string& link : RequiredLinks(t)) {
    if (!c.links.count(link)) {
      std::vector<std::string> have;
      for (const auto& [name, spec] : c.links) have.push_back(name);
      throw InputError(where + "/links", "a " + ToString(t.kind) + " cluster needs a '" + link + "' link class",
                       "present: " + (have.empty() ? std::string("none") : JoinNames(have)),
                       "add \"" + link + "\": {\"bandwidth_bytes_per_s\": ..., \"latency_s\": ..., \"links_per_device\": ..., \"efficiency\": ...}");
    }
  }
}

}  // namespace shardsim
