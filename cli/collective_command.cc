// `shardsim collective`: how long a collective takes on a group of devices, swept over sizes and
// reported like nccl-tests (time, algbw, busbw, algorithm), from the analytic model or SimGrid.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/text_table.h"
#include "core/error.h"
#include "core/inputs.h"
#include "core/mesh.h"
#include "core/suggest.h"
#include "core/text.h"
#include "core/units.h"
#include "sim/collective_cost.h"
#include "sim/des_collective.h"
#include "topologies/mesh_mapping.h"

namespace shardsim::cli {
namespace {

using nlohmann::json;

struct Groups {
  std::vector<sim::DeviceGroup> all;  // every group that runs at once (the DES simulates them all)
  std::string description;
};

Groups ResolveGroups(const CollectiveOptions& o, const topologies::Cluster& cluster) {
  const int64_t devices = cluster.num_devices();
  if (o.devices > 0 && (!o.mesh.empty() || !o.axes.empty())) {
    throw InputError("--devices", "give either --devices N or --mesh SPEC --axes A, not both", "one of them", "--devices takes the first N devices");
  }
  Groups groups;
  if (o.devices > 0) {
    if (o.devices > devices) {
      throw InputError("--devices " + std::to_string(o.devices), "the group is larger than the cluster (" + cluster.spec().name + " has " +
                                                                      std::to_string(devices) + " devices)",
                       "2 to " + std::to_string(devices), "use a larger cluster or fewer devices");
    }
    if (o.devices < 2) {
      throw InputError("--devices 1", "a group of one device has nothing to communicate", "2 to " + std::to_string(devices), "a group of two or more");
    }
    sim::DeviceGroup g;
    for (int64_t d = 0; d < o.devices; ++d) g.devices.push_back(d);
    groups.all.push_back(g);
    groups.description = "the first " + std::to_string(o.devices) + " devices";
    return groups;
  }
  if (o.mesh.empty() || o.axes.empty()) {
    throw InputError("collective", "no group given", "--devices N, or --mesh SPEC --axes A[,B]",
                     "e.g. --devices 8, or --mesh data=8,tensor=8 --axes tensor");
  }
  const MeshShape shape = ParseMeshSpec(o.mesh, "--mesh " + o.mesh);
  if (shape.Product() != devices) {
    throw InputError("--mesh " + o.mesh, "mesh " + DescribeMesh(shape) + " has " + std::to_string(shape.Product()) + " devices but " +
                                           cluster.spec().name + " has " + std::to_string(devices),
                     "axis sizes whose product is " + std::to_string(devices), "change an axis so the product matches");
  }
  const std::vector<std::string> axes = Split(o.axes, ',');
  std::vector<std::string> in_mesh;
  for (const std::string& a : MeshAxisNames()) {
    if (shape.Size(a) > 1) in_mesh.push_back(a);
  }
  for (size_t i = 0; i < axes.size(); ++i) {
    const std::string& axis = axes[i];
    if (std::find(axes.begin(), axes.begin() + static_cast<std::ptrdiff_t>(i), axis) != axes.begin() + static_cast<std::ptrdiff_t>(i)) {
      throw InputError("--axes " + o.axes, "axis '" + axis + "' is listed twice", "each axis once", "e.g. --axes data,fsdp");
    }
    if (std::find(in_mesh.begin(), in_mesh.end(), axis) == in_mesh.end()) {
      const std::string s = DidYouMean(axis, in_mesh);
      throw InputError("--axes " + o.axes, "axis '" + axis + "' is not in the mesh" + (s.empty() ? "" : "; " + s), JoinNames(in_mesh),
                       "name axes of size > 1 in --mesh");
    }
  }
  const LogicalMesh mesh(shape, DefaultMeshOrder());
  for (const auto& ranks : mesh.Groups(axes)) {
    sim::DeviceGroup g;
    for (int64_t r : ranks) g.devices.push_back(topologies::DeviceOfRank(mesh, r));
    groups.all.push_back(g);
  }
  groups.description = std::to_string(groups.all.size()) + " group(s) of " + std::to_string(groups.all[0].devices.size()) +
                       " along " + o.axes + " of mesh " + DescribeMesh(shape);
  return groups;
}

json DesJson(const sim::DesReport& des, const topologies::Cluster& cluster) {
  json busiest = json::array();
  for (const sim::LinkLoad& l : des.busiest_links.back()) {
    busiest.push_back({{"link", cluster.links()[static_cast<size_t>(l.link)].name},
                       {"busy_s", l.busy_s},
                       {"groups", l.groups}});
  }
  return {{"wall_s", des.wall_s},
          {"messages", des.messages},
          {"peak_rss_bytes", des.peak_rss_bytes},
          {"estimated_wall_s", des.estimate.seconds},
          {"estimated_peak_bytes", WholeBytes(des.estimate.bytes)},
          {"folded", des.folded},
          {"busiest_links_largest_size", busiest}};
}

void PrintDes(const sim::DesReport& des, const topologies::Cluster& cluster, std::ostream& out) {
  out << "# SimGrid (CM02 flow model): " << des.messages << " transfers, " << FormatSeconds(des.wall_s) << " wall, peak memory "
      << FormatBinaryBytes(static_cast<double>(des.peak_rss_bytes)) << " (estimated beforehand: " << FormatSeconds(des.estimate.seconds) << ", "
      << FormatBinaryBytes(des.estimate.bytes) << "); " << des.folded << "\n";
  out << "# busiest links at the largest size (time at full bandwidth x efficiency; groups sharing them):\n";
  for (const sim::LinkLoad& l : des.busiest_links.back()) {
    out << "#   " << cluster.links()[static_cast<size_t>(l.link)].name << ": " << FormatSeconds(l.busy_s) << ", " << l.groups
        << (l.groups == 1 ? " group" : " groups") << "\n";
  }
}

std::string Rate(double bytes_per_s) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f", bytes_per_s / 1e9);
  return buffer;
}

}  // namespace

int RunCollective(const CollectiveOptions& o, std::ostream& out) {
  if (o.cluster.empty()) throw InputError("collective", "needs --cluster", "--cluster C (shardsim presets)", "e.g. --cluster dgx-h100:8");
  if (o.op.empty()) throw InputError("collective", "needs --op", JoinNames(sim::CollectiveOpNames()));
  if (o.bytes.empty()) throw InputError("collective", "needs --bytes", "sizes such as 8,1M,1G");
  const sim::CollectiveOp op = sim::ParseCollectiveOp(o.op, "--op");
  const sim::Algorithm algorithm = sim::ParseAlgorithm(o.algorithm, "--algorithm");
  if (o.engine != "analytic" && o.engine != "des") {
    const std::string s = DidYouMean(o.engine, {"analytic", "des"});
    throw InputError("--engine", "unknown engine '" + o.engine + "'" + (s.empty() ? "" : "; " + s), "analytic, des");
  }
  const std::vector<int64_t> sizes = ParseByteSizeList(o.bytes, "--bytes");
  sim::DesLimits limits;
  if (o.max_seconds > 0) limits.max_seconds = o.max_seconds;
  if (!o.max_host_memory.empty()) limits.max_memory_bytes = sim::ParseHostMemoryLimit(o.max_host_memory, "--max-host-memory");
  const topologies::Cluster cluster(LoadCluster(o.cluster));
  const Groups groups = ResolveGroups(o, cluster);
  const int64_t n = static_cast<int64_t>(groups.all.front().devices.size());
  sim::CheckScheduleSize(op, n, o.devices > 0 ? "--devices " + std::to_string(o.devices) : "--mesh " + o.mesh + " --axes " + o.axes);
  if (o.engine == "des") sim::CheckCollectivesFit(groups.all, op, sizes.size(), limits);  // before any schedule is built
  const sim::GroupCollective collective(cluster, groups.all, op, algorithm, "--algorithm");

  struct Row {
    int64_t bytes;
    double time_s;
    double analytic_s;
    sim::GroupCollective::Choice choice;
  };
  std::vector<Row> rows;
  std::vector<sim::DesRequest> requests;
  for (int64_t bytes : sizes) {
    const sim::GroupCollective::Choice choice = collective.Fastest(static_cast<double>(bytes));
    rows.push_back({bytes, choice.estimate.time_s, choice.estimate.time_s, choice});
    sim::DesRequest request{{}, static_cast<double>(bytes), choice.estimate.chunks};
    for (const sim::Schedule& s : collective.candidates()[choice.candidate].schedules) request.schedules.push_back(&s);
    requests.push_back(std::move(request));
  }
  auto algorithm_of = [&](const Row& r) { return collective.candidates()[r.choice.candidate].algorithm; };
  auto description_of = [&](const Row& r) {
    return collective.candidates()[r.choice.candidate].schedules[r.choice.slowest_group].description;
  };
  std::optional<sim::DesReport> des;
  if (o.engine == "des") {
    des = sim::SimulateCollectives(cluster, groups.all, requests, limits);
    for (size_t i = 0; i < rows.size(); ++i) rows[i].time_s = des->times_s[i];
  }

  const double factor = sim::BusBandwidthFactor(op, n);
  if (o.json) {
    json results = json::array();
    for (const Row& r : rows) {
      const double algbw = r.time_s > 0 ? static_cast<double>(r.bytes) / r.time_s : 0;
      json row = {{"bytes", r.bytes},
                  {"time_s", r.time_s},
                  {"algbw_bytes_per_s", algbw},
                  {"busbw_bytes_per_s", algbw * factor},
                  {"algorithm", sim::ToString(algorithm_of(r))},
                  {"chunks", r.choice.estimate.chunks},
                  {"slowest_group", r.choice.slowest_group}};
      if (des) row["analytic_time_s"] = r.analytic_s;
      results.push_back(row);
    }
    json j = {{"cluster", cluster.spec().name},
              {"op", sim::ToString(op)},
              {"engine", o.engine},
              {"group_size", n},
              {"groups", groups.all.size()},
              {"groups_modelled", collective.candidates().front().modelled.size()},
              {"group", groups.description},
              {"busbw_factor", factor},
              {"results", results}};
    if (des) j["des"] = DesJson(*des, cluster);
    out << j.dump(2) << "\n";
    return 0;
  }
  out << "# shardsim collective: " << sim::ToString(op) << " over " << groups.description << " of " << cluster.spec().name << " ("
      << n << " devices per group), engine " << o.engine << "\n";
  out << "# busbw = algbw x " << factor << " (nccl-tests); link bandwidths x efficiency from the cluster spec\n";
  std::vector<std::string> header = {"size", "bytes", "time", "algbw (GB/s)", "busbw (GB/s)", "algorithm"};
  if (des) header.insert(header.begin() + 3, "analytic");
  TextTable table(header);
  std::vector<std::string> descriptions;
  for (const Row& r : rows) {
    const double algbw = r.time_s > 0 ? static_cast<double>(r.bytes) / r.time_s : 0;
    std::string name = sim::ToString(algorithm_of(r));
    if (r.choice.estimate.chunks > 1) name += " (" + std::to_string(r.choice.estimate.chunks) + " chunks)";
    std::vector<std::string> row = {FormatBinaryBytes(static_cast<double>(r.bytes)), std::to_string(r.bytes), FormatSeconds(r.time_s),
                                    Rate(algbw), Rate(algbw * factor), name};
    if (des) row.insert(row.begin() + 3, FormatSeconds(r.analytic_s));
    table.AddRow(row);
    const std::string d = sim::ToString(algorithm_of(r)) + ": " + description_of(r);
    if (std::find(descriptions.begin(), descriptions.end(), d) == descriptions.end()) descriptions.push_back(d);
  }
  table.Print(out);
  for (const std::string& d : descriptions) out << "# " << d << "\n";
  if (groups.all.size() > 1) {
    out << "# analytic: the slowest of " << collective.candidates().front().modelled.size() << " modelled groups (of "
        << groups.all.size() << ")\n";
  }
  if (des) PrintDes(*des, cluster, out);
  return 0;
}

}  // namespace shardsim::cli
