#include "topologies/cluster.h"

#include <array>
#include <limits>
#include <map>
#include <numeric>
#include <optional>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/dijkstra_shortest_paths.hpp>

#include "core/error.h"

namespace shardsim::topologies {

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, boost::no_property,
                                    boost::property<boost::edge_index_t, int64_t>>;

struct Cluster::Impl {
  ClusterSpec spec;
  std::vector<Node> nodes;
  std::vector<Link> links;
  Graph graph;
  int64_t devices = 0;
  // Torus: link id leaving each chip along each axis (+ then -), -1 where there is none.
  std::vector<int64_t> torus_links;
  std::vector<int64_t> dcn_up, dcn_down;  // per chip, for slices joined over DCN
  std::vector<double> weights;  // per link: latency, plus a tiny per-hop term (fewest hops on ties)
  // Switched and local fabrics: each device's links, so routes can be read off the structure
  // (checked against Dijkstra on a sample of pairs when the cluster is built; see Route()).
  std::vector<int64_t> up, down;          // device -> NVSwitch (or shared memory) and back
  std::vector<int64_t> nic_up, nic_down;  // device -> leaf and back
  std::vector<int64_t> leaf_of;           // device -> its leaf's node id
  std::map<int64_t, std::pair<int64_t, int64_t>> leaf_links;  // leaf node -> (to core, from core); local: host -> its NIC
  bool structural = false;

  int64_t AddNode(NodeKind kind, std::string name) {
    nodes.push_back({kind, std::move(name)});
    return static_cast<int64_t>(nodes.size()) - 1;
  }

  int64_t AddLink(int64_t from, int64_t to, const std::string& link_class, double bandwidth, double latency,
                  const std::string& label) {
    const LinkSpec& s = spec.links.at(link_class);
    const int64_t id = static_cast<int64_t>(links.size());
    links.push_back({from, to, link_class, bandwidth, latency, s.efficiency,
                     nodes[static_cast<size_t>(from)].name + " -> " + nodes[static_cast<size_t>(to)].name + " " + label});
    return id;
  }

  // Both directions of a link between a and b.
  void AddDuplex(int64_t a, int64_t b, const std::string& link_class, double bandwidth, double latency,
                 const std::string& label) {
    AddLink(a, b, link_class, bandwidth, latency, label);
    AddLink(b, a, link_class, bandwidth, latency, label);
  }

  void BuildTorus();
  void BuildSwitched();
  void BuildLocal();
  void BuildGraph();
  void TorusRoute(int64_t src, int64_t dst, std::vector<int64_t>& route) const;
  std::vector<int64_t> StructuralRoute(int64_t src, int64_t dst) const;
  void CheckStructuralRoutes();
  std::vector<std::vector<int64_t>> ShortestRoutes(int64_t src, const std::vector<int64_t>& dsts) const;
};

namespace {

std::string CoordinateName(const std::vector<int64_t>& coordinates) {
  std::string name = "chip(";
  for (size_t i = 0; i < coordinates.size(); ++i) name += (i ? "," : "") + std::to_string(coordinates[i]);
  return name + ")";
}

// Torus dimensions a route can walk (TPU slices have 2 or 3).
constexpr size_t kMaxTorusRank = 8;

// Coordinates of chip `index` within a slice, dimension 0 fastest.
std::vector<int64_t> ChipCoordinates(int64_t index, const std::vector<int64_t>& dims) {
  std::vector<int64_t> c(dims.size());
  for (size_t a = 0; a < dims.size(); ++a) {
    c[a] = index % dims[a];
    index /= dims[a];
  }
  return c;
}

int64_t ChipIndex(const std::vector<int64_t>& c, const std::vector<int64_t>& dims) {
  int64_t index = 0;
  for (size_t a = dims.size(); a-- > 0;) index = index * dims[a] + c[a];
  return index;
}

}  // namespace

void Cluster::Impl::BuildTorus() {
  const TopologySpec& t = spec.topology;
  const std::vector<int64_t>& dims = t.torus_dims;
  const int64_t rank = static_cast<int64_t>(dims.size());
  int64_t per_slice = 1;
  for (int64_t d : dims) per_slice *= d;
  devices = per_slice * t.slices;
  for (int64_t s = 0; s < t.slices; ++s) {
    for (int64_t i = 0; i < per_slice; ++i) {
      std::vector<int64_t> c = ChipCoordinates(i, dims);
      if (t.slices > 1) c.push_back(s);
      AddNode(NodeKind::kDevice, CoordinateName(c));
    }
  }
  const LinkSpec& ici = spec.links.at("ici");
  // Each chip's ICI links are spread evenly over the axes' two directions.
  const double links_per_direction = std::max<double>(1.0, static_cast<double>(ici.links_per_device) / (2.0 * rank));
  torus_links.assign(static_cast<size_t>(devices * 2 * rank), -1);
  for (int64_t s = 0; s < t.slices; ++s) {
    for (int64_t i = 0; i < per_slice; ++i) {
      const int64_t chip = s * per_slice + i;
      const std::vector<int64_t> c = ChipCoordinates(i, dims);
      for (int64_t a = 0; a < rank; ++a) {
        if (dims[a] == 1) continue;
        for (int dir = 0; dir < 2; ++dir) {
          std::vector<int64_t> n = c;
          n[a] += dir == 0 ? 1 : -1;
          if (n[a] < 0 || n[a] >= dims[a]) {
            if (!t.wraparound[a] || dims[a] <= 2) continue;  // a 2-ring's neighbour is already linked
            n[a] = (n[a] + dims[a]) % dims[a];
          }
          const int64_t neighbour = s * per_slice + ChipIndex(n, dims);
          const std::string label = std::string("ici ") + (dir == 0 ? "+" : "-") + "axis" + std::to_string(a);
          torus_links[static_cast<size_t>((chip * rank + a) * 2 + dir)] =
              AddLink(chip, neighbour, "ici", ici.bandwidth_bytes_per_s * links_per_direction, ici.latency_s, label);
        }
      }
    }
  }
  if (t.slices > 1) {
    const LinkSpec& dcn = spec.links.at("dcn");
    const int64_t core = AddNode(NodeKind::kSwitch, "dcn core");
    dcn_up.resize(static_cast<size_t>(devices));
    dcn_down.resize(static_cast<size_t>(devices));
    const double bandwidth = dcn.bandwidth_bytes_per_s * static_cast<double>(dcn.links_per_device);
    for (int64_t chip = 0; chip < devices; ++chip) {
      dcn_up[static_cast<size_t>(chip)] = AddLink(chip, core, "dcn", bandwidth, dcn.latency_s / 2, "dcn");
      dcn_down[static_cast<size_t>(chip)] = AddLink(core, chip, "dcn", bandwidth, dcn.latency_s / 2, "dcn");
    }
  }
}

void Cluster::Impl::BuildSwitched() {
  const TopologySpec& t = spec.topology;
  devices = t.devices_per_node * t.nodes;
  for (int64_t d = 0; d < devices; ++d) AddNode(NodeKind::kDevice, "gpu " + std::to_string(d));
  const LinkSpec& nvlink = spec.links.at("nvlink");
  const LinkSpec& ib = spec.links.at("infiniband");
  const double nvlink_bandwidth = nvlink.bandwidth_bytes_per_s * static_cast<double>(nvlink.links_per_device);
  for (int64_t n = 0; n < t.nodes; ++n) {
    const int64_t nvswitch = AddNode(NodeKind::kSwitch, "nvswitch " + std::to_string(n));
    for (int64_t g = 0; g < t.devices_per_node; ++g) {
      const int64_t d = n * t.devices_per_node + g;
      up.push_back(static_cast<int64_t>(links.size()));
      down.push_back(static_cast<int64_t>(links.size()) + 1);
      AddDuplex(d, nvswitch, "nvlink", nvlink_bandwidth, nvlink.latency_s / 2, "nvlink");
    }
  }
  if (t.nodes == 1) return;  // one NVSwitch domain: the NICs carry nothing between its GPUs
  const double nic_bandwidth = ib.bandwidth_bytes_per_s * static_cast<double>(ib.links_per_device);
  const int64_t core = AddNode(NodeKind::kSwitch, "core");
  // Leaf of each GPU's NIC.
  leaf_of.assign(static_cast<size_t>(devices), -1);
  nic_up.assign(static_cast<size_t>(devices), -1);
  nic_down.assign(static_cast<size_t>(devices), -1);
  std::map<int64_t, int64_t> leaf_node;     // leaf index -> node id
  std::map<int64_t, int64_t> leaf_members;  // leaf index -> NICs attached
  for (int64_t d = 0; d < devices; ++d) {
    int64_t leaf = 0;
    if (t.fabric == "rail-optimized") {
      const int64_t rail = d % t.devices_per_node, group = (d / t.devices_per_node) / t.leaf_ports;
      leaf = group * t.devices_per_node + rail;
    } else {
      leaf = d / t.leaf_ports;
    }
    if (!leaf_node.count(leaf)) {
      const std::string name = t.fabric == "rail-optimized"
                                   ? "leaf " + std::to_string(leaf) + " (rail " + std::to_string(d % t.devices_per_node) + ")"
                                   : "leaf " + std::to_string(leaf);
      leaf_node[leaf] = AddNode(NodeKind::kSwitch, name);
    }
    leaf_of[static_cast<size_t>(d)] = leaf_node[leaf];
    ++leaf_members[leaf];
    nic_up[static_cast<size_t>(d)] = static_cast<int64_t>(links.size());
    nic_down[static_cast<size_t>(d)] = static_cast<int64_t>(links.size()) + 1;
    AddDuplex(d, leaf_node[leaf], "infiniband", nic_bandwidth, ib.latency_s / 2, "nic");
  }
  for (const auto& [leaf, node_id] : leaf_node) {
    const double uplink = static_cast<double>(leaf_members[leaf]) * nic_bandwidth / t.oversubscription;
    leaf_links[node_id] = {static_cast<int64_t>(links.size()), static_cast<int64_t>(links.size()) + 1};
    AddDuplex(node_id, core, "infiniband", uplink, 0.0, "spine");
  }
}

// Each host's cores meet in its shared memory; hosts meet over one TCP NIC each at a switch.
void Cluster::Impl::BuildLocal() {
  const TopologySpec& t = spec.topology;
  devices = t.local_devices;
  for (int64_t d = 0; d < devices; ++d) AddNode(NodeKind::kDevice, "core " + std::to_string(d));
  const LinkSpec& shm = spec.links.at("shm");
  const int64_t per_host = devices / t.local_hosts;
  std::vector<int64_t> hubs;
  for (int64_t h = 0; h < t.local_hosts; ++h) {
    hubs.push_back(AddNode(NodeKind::kSwitch, t.local_hosts > 1 ? "host " + std::to_string(h) + " shared memory" : "shared memory"));
  }
  for (int64_t d = 0; d < devices; ++d) {
    up.push_back(static_cast<int64_t>(links.size()));
    down.push_back(static_cast<int64_t>(links.size()) + 1);
    AddDuplex(d, hubs[static_cast<size_t>(d / per_host)], "shm", shm.bandwidth_bytes_per_s * static_cast<double>(shm.links_per_device),
              shm.latency_s / 2, "shm");
  }
  if (t.local_hosts == 1) return;
  const LinkSpec& tcp = spec.links.at("tcp");
  const int64_t network = AddNode(NodeKind::kSwitch, "TCP network");
  for (int64_t h = 0; h < t.local_hosts; ++h) {
    leaf_links[h] = {static_cast<int64_t>(links.size()), static_cast<int64_t>(links.size()) + 1};
    AddDuplex(hubs[static_cast<size_t>(h)], network, "tcp", tcp.bandwidth_bytes_per_s * static_cast<double>(tcp.links_per_device),
              tcp.latency_s / 2, "nic");
  }
}

void Cluster::Impl::BuildGraph() {
  for (size_t i = 0; i < nodes.size(); ++i) boost::add_vertex(graph);
  constexpr double kHopTieBreak_s = 1e-15;  // far below any real latency: only breaks ties
  weights.resize(links.size());
  for (size_t i = 0; i < links.size(); ++i) weights[i] = links[i].latency_s + kHopTieBreak_s;
  for (size_t i = 0; i < links.size(); ++i) {
    boost::add_edge(static_cast<size_t>(links[i].from), static_cast<size_t>(links[i].to), static_cast<int64_t>(i), graph);
  }
}

void Cluster::Impl::TorusRoute(int64_t src, int64_t dst, std::vector<int64_t>& route) const {
  const TopologySpec& t = spec.topology;
  const std::vector<int64_t>& dims = t.torus_dims;
  const int64_t rank = static_cast<int64_t>(dims.size());
  int64_t per_slice = 1;
  for (int64_t d : dims) per_slice *= d;
  route.clear();
  if (src / per_slice != dst / per_slice) {
    route.push_back(dcn_up[static_cast<size_t>(src)]);
    route.push_back(dcn_down[static_cast<size_t>(dst)]);
    return;
  }
  const int64_t slice_base = src / per_slice * per_slice;
  // Walk dimension by dimension, keeping the chip's index in step with its coordinates (the
  // planner routes millions of flows: no coordinate vectors per hop).
  std::array<int64_t, kMaxTorusRank> c{}, target{}, stride{};
  SHARDSIM_CHECK(rank <= static_cast<int64_t>(kMaxTorusRank), "torus rank above kMaxTorusRank");
  int64_t from = src - slice_base, to = dst - slice_base, s = 1;
  for (size_t a = 0; a < dims.size(); ++a) {
    c[a] = from % dims[a], target[a] = to % dims[a], stride[a] = s;
    from /= dims[a], to /= dims[a], s *= dims[a];
  }
  int64_t chip = src;
  for (int64_t a = 0; a < rank; ++a) {
    const int64_t n = dims[static_cast<size_t>(a)];
    const int64_t forward = ((target[a] - c[a]) % n + n) % n;
    int dir = 0;
    int64_t steps = 0;
    if (t.wraparound[static_cast<size_t>(a)] && n > 2) {
      // Half-way round, both ways are equally short: alternate by the source's position so
      // the + and - links share that traffic.
      dir = forward < n - forward ? 0 : forward > n - forward ? 1 : static_cast<int>(c[a] % 2);
      steps = dir == 0 ? forward : n - forward;
    } else {
      dir = target[a] >= c[a] ? 0 : 1;
      steps = std::abs(target[a] - c[a]);
    }
    for (int64_t k = 0; k < steps; ++k) {
      const int64_t link = torus_links[static_cast<size_t>((chip * rank + a) * 2 + dir)];
      SHARDSIM_CHECK(link >= 0, "torus route left the slice");
      route.push_back(link);
      const int64_t next = dir == 0 ? (c[a] + 1 == n ? 0 : c[a] + 1) : (c[a] == 0 ? n - 1 : c[a] - 1);
      chip += (next - c[a]) * stride[a];
      c[a] = next;
    }
  }
}

namespace {

// Ends a Dijkstra search once every target is settled (boost's documented way to stop early).
struct TargetsSettled {};
class StopAtTargets : public boost::default_dijkstra_visitor {
 public:
  StopAtTargets(std::vector<char>* pending, size_t count) : pending_(pending), remaining_(count) {}
  void examine_vertex(size_t v, const Graph&) {
    if ((*pending_)[v]) {
      (*pending_)[v] = 0;
      if (--remaining_ == 0) throw TargetsSettled{};
    }
  }

 private:
  std::vector<char>* pending_;
  size_t remaining_;
};

}  // namespace

std::vector<std::vector<int64_t>> Cluster::Impl::ShortestRoutes(int64_t src, const std::vector<int64_t>& dsts) const {
  const size_t n = boost::num_vertices(graph);
  std::vector<double> distance(n);
  std::vector<size_t> parent(n);
  std::vector<char> pending(n, 0);
  size_t count = 0;
  for (int64_t d : dsts) {
    if (d != src && !pending[static_cast<size_t>(d)]) {
      pending[static_cast<size_t>(d)] = 1;
      ++count;
    }
  }
  if (count > 0) {
    auto index = boost::get(boost::vertex_index, graph);
    try {
      boost::dijkstra_shortest_paths(graph, static_cast<size_t>(src),
                                     boost::weight_map(boost::make_iterator_property_map(weights.begin(), boost::get(boost::edge_index, graph)))
                                         .distance_map(boost::make_iterator_property_map(distance.begin(), index))
                                         .predecessor_map(boost::make_iterator_property_map(parent.begin(), index))
                                         .visitor(StopAtTargets(&pending, count)));
    } catch (const TargetsSettled&) {
    }
  }
  std::vector<std::vector<int64_t>> routes;
  for (int64_t dst : dsts) {
    std::vector<int64_t> route;
    for (size_t v = static_cast<size_t>(dst); v != static_cast<size_t>(src);) {
      SHARDSIM_CHECK(parent[v] != v, "no route between devices " + std::to_string(src) + " and " + std::to_string(dst));
      int64_t best = -1;
      for (auto [e, end] = boost::out_edges(parent[v], graph); e != end; ++e) {
        if (boost::target(*e, graph) != v) continue;
        const int64_t id = boost::get(boost::edge_index, graph, *e);
        if (best < 0 || weights[static_cast<size_t>(id)] < weights[static_cast<size_t>(best)]) best = id;
      }
      route.push_back(best);
      v = parent[v];
    }
    routes.emplace_back(route.rbegin(), route.rend());
  }
  return routes;
}

// Through the NVSwitch (or shared memory) inside a node; else NIC, leaf, (core, leaf,) NIC.
std::vector<int64_t> Cluster::Impl::StructuralRoute(int64_t src, int64_t dst) const {
  const TopologySpec& t = spec.topology;
  const size_t s = static_cast<size_t>(src), d = static_cast<size_t>(dst);
  if (t.kind == TopologyKind::kLocal) {
    const int64_t per_host = t.local_devices / t.local_hosts, hs = src / per_host, hd = dst / per_host;
    if (hs == hd) return {up[s], down[d]};
    return {up[s], leaf_links.at(hs).first, leaf_links.at(hd).second, down[d]};
  }
  if (src / t.devices_per_node == dst / t.devices_per_node) return {up[s], down[d]};
  if (leaf_of[s] == leaf_of[d]) return {nic_up[s], nic_down[d]};
  return {nic_up[s], leaf_links.at(leaf_of[s]).first, leaf_links.at(leaf_of[d]).second, nic_down[d]};
}

namespace {

// A copy of a switched or local spec cut to a few leaves (or hosts): every kind of pair the full
// fabric has (same node, same leaf, other leaves; same host, other hosts) with the same link
// latencies, so Dijkstra picks the same kind of route. nullopt when the spec is small already.
std::optional<ClusterSpec> RouteCheckReplica(const ClusterSpec& spec) {
  ClusterSpec small = spec;
  TopologySpec& t = small.topology;
  if (t.kind == TopologyKind::kSwitched) {
    // fat-tree: 3 x leaf_ports nodes fill at least 3 leaves; rail-optimized: 3 groups of
    // leaf_ports nodes.
    t.nodes = std::min(t.nodes, 3 * t.leaf_ports);
  } else if (t.kind == TopologyKind::kLocal) {
    const int64_t per_host = std::min<int64_t>(t.local_devices / t.local_hosts, 64);
    t.local_hosts = std::min<int64_t>(t.local_hosts, 3);
    t.local_devices = per_host * t.local_hosts;
  }
  if (DeviceCount(small) >= DeviceCount(spec)) return std::nullopt;
  return small;
}

}  // namespace

// The structural routes are used only if they agree with Dijkstra on a spread of pairs (same
// node, same leaf, other leaves); a cluster JSON with unusual latencies falls back to Dijkstra.
// On a large fabric the check runs on a replica cut to a few leaves (RouteCheckReplica): one
// Dijkstra search costs O(devices), and 97 of them over 262,144 GPUs took 3 s.
void Cluster::Impl::CheckStructuralRoutes() {
  if (spec.topology.kind == TopologyKind::kTorus || devices < 2) return;
  if (const std::optional<ClusterSpec> replica = RouteCheckReplica(spec)) {
    structural = Cluster(*replica).structural_routes();
    return;
  }
  structural = true;
  const int64_t step = std::max<int64_t>(1, devices / 97);
  for (int64_t src = 0; src < devices && structural; src += step) {
    std::vector<int64_t> dsts;
    for (int64_t k = 1; k <= 64 && k < devices; k *= 2) dsts.push_back((src + k * step + k) % devices);
    dsts.push_back((src + 1) % devices);
    dsts.push_back(devices - 1 - src);
    const auto reference = ShortestRoutes(src, dsts);
    for (size_t i = 0; i < dsts.size() && structural; ++i) {
      if (dsts[i] != src && StructuralRoute(src, dsts[i]) != reference[i]) structural = false;
    }
  }
}

Cluster::Cluster(const ClusterSpec& spec) : impl_(std::make_unique<Impl>()) {
  impl_->spec = spec;
  switch (spec.topology.kind) {
    case TopologyKind::kTorus: impl_->BuildTorus(); break;
    case TopologyKind::kSwitched: impl_->BuildSwitched(); break;
    case TopologyKind::kLocal: impl_->BuildLocal(); break;
  }
  impl_->BuildGraph();
  impl_->CheckStructuralRoutes();
}

Cluster::~Cluster() = default;
Cluster::Cluster(Cluster&&) noexcept = default;
Cluster& Cluster::operator=(Cluster&&) noexcept = default;

const ClusterSpec& Cluster::spec() const { return impl_->spec; }
int64_t Cluster::num_devices() const { return impl_->devices; }
int64_t Cluster::num_nodes() const { return static_cast<int64_t>(impl_->nodes.size()); }
const Node& Cluster::node(int64_t id) const { return impl_->nodes.at(static_cast<size_t>(id)); }
const std::vector<Link>& Cluster::links() const { return impl_->links; }

std::vector<int64_t> Cluster::Route(int64_t src, int64_t dst) const {
  SHARDSIM_CHECK(src >= 0 && src < num_devices() && dst >= 0 && dst < num_devices(), "device out of range");
  if (src == dst) return {};
  std::vector<int64_t> route;
  Route(src, dst, &route);
  return route;
}

void Cluster::Route(int64_t src, int64_t dst, std::vector<int64_t>* route) const {
  SHARDSIM_CHECK(src >= 0 && src < num_devices() && dst >= 0 && dst < num_devices(), "device out of range");
  route->clear();
  if (src == dst) return;
  if (impl_->spec.topology.kind == TopologyKind::kTorus) return impl_->TorusRoute(src, dst, *route);
  *route = impl_->structural ? impl_->StructuralRoute(src, dst) : std::move(impl_->ShortestRoutes(src, {dst}).front());
}

std::vector<int64_t> Cluster::ReferenceRoute(int64_t src, int64_t dst) const {
  SHARDSIM_CHECK(src >= 0 && src < num_devices() && dst >= 0 && dst < num_devices(), "device out of range");
  if (src == dst) return {};
  return std::move(impl_->ShortestRoutes(src, {dst}).front());
}

bool Cluster::structural_routes() const { return impl_->structural; }
bool Cluster::fast_routes() const { return impl_->structural || impl_->spec.topology.kind == TopologyKind::kTorus; }

std::vector<std::vector<int64_t>> Cluster::RoutesFrom(int64_t src, const std::vector<int64_t>& dsts) const {
  for (int64_t d : dsts) SHARDSIM_CHECK(d >= 0 && d < num_devices(), "device out of range");
  SHARDSIM_CHECK(src >= 0 && src < num_devices(), "device out of range");
  if (impl_->spec.topology.kind == TopologyKind::kTorus) {
    std::vector<std::vector<int64_t>> routes;
    for (int64_t d : dsts) {
      routes.emplace_back();
      if (d != src) impl_->TorusRoute(src, d, routes.back());
    }
    return routes;
  }
  if (impl_->structural) {
    std::vector<std::vector<int64_t>> routes;
    for (int64_t d : dsts) routes.push_back(d == src ? std::vector<int64_t>{} : impl_->StructuralRoute(src, d));
    return routes;
  }
  return impl_->ShortestRoutes(src, dsts);
}

std::vector<int64_t> Cluster::TorusCoordinates(int64_t device) const {
  const TopologySpec& t = impl_->spec.topology;
  if (t.kind != TopologyKind::kTorus) return {};
  int64_t per_slice = 1;
  for (int64_t d : t.torus_dims) per_slice *= d;
  std::vector<int64_t> c = ChipCoordinates(device % per_slice, t.torus_dims);
  if (t.slices > 1) c.push_back(device / per_slice);
  return c;
}

std::vector<int64_t> Cluster::Translated(const std::vector<int64_t>& devices) const {
  const TopologySpec& t = impl_->spec.topology;
  if (t.kind != TopologyKind::kTorus || t.slices > 1 || devices.empty()) return devices;
  const std::vector<int64_t>& dims = t.torus_dims;
  SHARDSIM_CHECK(dims.size() <= kMaxTorusRank, "torus rank above kMaxTorusRank");
  // Each movable axis shifts by its smallest member coordinate rounded down to even: no member
  // crosses the wraparound, so a group that is a box stays one (FindBox does not wrap).
  std::array<int64_t, kMaxTorusRank> shift{}, stride{};
  bool moves = false;
  int64_t s = 1;
  for (size_t a = 0; a < dims.size(); ++a) {
    stride[a] = s, s *= dims[a];
    if (!t.wraparound[a] || dims[a] <= 2) continue;
    int64_t lowest = dims[a];
    for (int64_t d : devices) lowest = std::min(lowest, ChipCoordinates(d, dims)[a]);
    shift[a] = lowest - lowest % 2;
    moves = moves || shift[a] != 0;
  }
  if (!moves) return devices;
  std::vector<int64_t> moved;
  moved.reserve(devices.size());
  for (int64_t d : devices) {
    int64_t index = d;
    for (size_t a = 0; a < dims.size(); ++a) index -= shift[a] * stride[a];
    moved.push_back(index);
  }
  return moved;
}

}  // namespace shardsim::topologies
