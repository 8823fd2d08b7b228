#include "planner/min_devices.h"

#include <algorithm>
#include <bit>
#include <optional>

#include "core/error.h"
#include "core/inputs.h"
#include "core/text.h"

namespace shardsim::planner {
namespace {

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

SmallestFit FindSmallestFit(const ModelSpec& model, const ClusterSpec& cluster, const std::string& cluster_arg, const SearchOptions& options,
                            int64_t max_devices) {
  SmallestFit fit;
  const std::optional<ClusterSizeArg> parts = ClusterSizeOf(cluster_arg, cluster);
  if (!parts) {
    if (cluster.system == "custom") {
      fit.why_not = "the cluster's topology is its file's own (system custom), so there is no larger size to try";
    } else if (cluster_arg.ends_with(".json")) {
      fit.why_not = "the cluster file's name '" + cluster.name + "' does not say its " + cluster.system +
                    " size, so there is no larger size to try (give the file as FILE.json:SIZE)";
    } else if (cluster.name == cluster_arg) {
      fit.why_not = "'" + cluster_arg + "' comes in one size, so there is no larger size to try";
    } else {
      fit.why_not = "the cluster file '" + cluster_arg + "' is not named FILE.json, so FILE.json:SIZE cannot name its larger sizes";
    }
    return fit;
  }
  std::string blocked;  // the last size whose plans a fixed field's rule refused, and why
  SearchOptions o = options;
  o.top = 1;
  o.progress = nullptr;
  // Searches one size; true when a plan fits there.
  auto fits = [&](const std::string& size) {
    const std::string preset = parts->At(size);
    ClusterSpec larger;
    try {
      larger = LoadCluster(preset);
    } catch (const InputError&) {
      return false;  // a size the system does not come in
    }
    if (DeviceCount(larger) > max_devices) return false;
    fit.tried.push_back(preset);
    try {
      const SearchResult result = Search(model, larger, o);
      const RuleRefusal* r = FixedFieldRefusal(result, o.constraints);
      if (r != nullptr && blocked.empty()) {
        blocked = "at " + preset + " the plan rules refused every plan for the fixed " + r->field + " (e.g. " + r->examples.front().why.what + ")";
      }
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
    // A doubled device count the system does not come in (a part of a node, 7 -> 14): the next
    // power of two, which whole nodes of 4 or 8 are.
    std::vector<std::string> candidates = {next};
    if (cluster.topology.kind != TopologyKind::kTorus) candidates.push_back(std::to_string(int64_t{1} << (64 - std::countl_zero(static_cast<uint64_t>(std::stoll(next) - 1)))));
    ClusterSpec probe;
    bool exists = false;
    for (const std::string& candidate : candidates) {
      try {
        probe = LoadCluster(parts->At(candidate));
        size = candidate, exists = true;
        break;
      } catch (const InputError&) {
        // not a size of the system
      }
    }
    if (!exists) break;  // past the largest size the system comes in
    if (DeviceCount(probe) > max_devices) break;
    grew = true;
    if (!fits(size)) last_miss = size;
  }
  if (!fit.found) {
    fit.why_not = grew ? "no plan fits up to " + fit.tried.back() + (blocked.empty() ? "" : "; " + blocked) : "the system comes in no larger size";
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
