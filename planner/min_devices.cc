#include "planner/min_devices.h"

#include <algorithm>
#include <optional>

#include "core/cluster_presets.h"
#include "core/error.h"
#include "core/text.h"

namespace shardsim::planner {
namespace {

// "dgx-h100:64,fabric=fat-tree" -> size "64", options ",fabric=fat-tree".
struct PresetParts {
  std::string system, size, options;
};

std::optional<PresetParts> Parts(const ClusterSpec& c) {
  const size_t colon = c.name.find(':');
  if (c.system == "custom" || colon == std::string::npos || c.name.substr(0, colon) != c.system) return std::nullopt;
  const size_t comma = c.name.find(',', colon);
  return PresetParts{c.system, c.name.substr(colon + 1, comma == std::string::npos ? std::string::npos : comma - colon - 1),
                     comma == std::string::npos ? "" : c.name.substr(comma)};
}

// The next larger size: devices doubled, or a torus's shortest dimension doubled.
std::string Doubled(const ClusterSpec& c, const std::string& size) {
  if (c.topology.kind != TopologyKind::kTorus) return std::to_string(std::stoll(size) * 2);
  std::vector<std::string> dims = Split(size, 'x');
  size_t shortest = 0;
  for (size_t i = 1; i < dims.size(); ++i) {
    if (std::stoll(dims[i]) < std::stoll(dims[shortest])) shortest = i;
  }
  dims[shortest] = std::to_string(std::stoll(dims[shortest]) * 2);
  std::string text;
  for (const std::string& d : dims) text += (text.empty() ? "" : "x") + d;
  return text;
}

}  // namespace

SmallestFit FindSmallestFit(const ModelSpec& model, const ClusterSpec& cluster, const SearchOptions& options, int64_t max_devices) {
  SmallestFit fit;
  const std::optional<PresetParts> parts = Parts(cluster);
  if (!parts) {
    fit.why_not = "the cluster is not a catalogue system's preset, so there is no larger size to try";
    return fit;
  }
  SearchOptions o = options;
  o.top = 1;
  o.progress = nullptr;
  // Searches one size; true when a plan fits there.
  auto fits = [&](const std::string& size) {
    const std::string preset = parts->system + ":" + size + parts->options;
    ClusterSpec larger;
    try {
      larger = ParseClusterPreset(preset, "--cluster");
    } catch (const InputError&) {
      return false;  // a size the system does not come in
    }
    if (DeviceCount(larger) > max_devices) return false;
    fit.tried.push_back(preset);
    try {
      const SearchResult result = Search(model, larger, o);
      if (result.best.empty()) return false;
      if (!fit.found || DeviceCount(larger) < fit.devices) {
        fit.found = true, fit.cluster = preset, fit.spec = larger, fit.devices = DeviceCount(larger), fit.plan = result.best.front();
      }
      return true;
    } catch (const InputError&) {
      return false;  // no mesh of these devices splits the batch
    }
  };
  std::string size = parts->size, last_miss = parts->size;
  bool grew = false;
  for (int i = 0; i < 24 && !fit.found; ++i) {
    const std::string next = Doubled(cluster, size);
    if (next == size) break;
    size = next;
    ClusterSpec probe;
    try {
      probe = ParseClusterPreset(parts->system + ":" + size + parts->options, "--cluster");
    } catch (const InputError&) {
      break;  // past the largest size the system comes in
    }
    if (DeviceCount(probe) > max_devices) break;
    grew = true;
    if (!fits(size)) last_miss = size;
  }
  if (!fit.found) {
    fit.why_not = grew ? "no plan fits up to " + fit.tried.back() : "the system comes in no larger size";
    return fit;
  }
  // Switched systems come in whole nodes: bisect the node counts between the last miss and the fit.
  if (cluster.topology.kind == TopologyKind::kSwitched) {
    const int64_t node = std::max<int64_t>(1, cluster.topology.devices_per_node);
    int64_t lo = std::stoll(last_miss) / node, hi = fit.devices / node;
    while (hi - lo > 1) {
      const int64_t mid = (lo + hi) / 2;
      if (fits(std::to_string(mid * node))) {
        hi = mid;
      } else {
        lo = mid;
      }
    }
  }
  return fit;
}

}  // namespace shardsim::planner
