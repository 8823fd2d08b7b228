#include "topologies/cluster.h"

#include <gtest/gtest.h>

#include "core/cluster_presets.h"

namespace shardsim::topologies {
namespace {

Cluster Make(const std::string& preset) { return Cluster(ParseClusterPreset(preset, "--cluster")); }

std::vector<std::string> Classes(const Cluster& c, const std::vector<int64_t>& route) {
  std::vector<std::string> out;
  for (int64_t id : route) out.push_back(c.links()[static_cast<size_t>(id)].link_class);
  return out;
}

int64_t OutDegree(const Cluster& c, int64_t node) {
  int64_t n = 0;
  for (const Link& l : c.links()) n += l.from == node ? 1 : 0;
  return n;
}

TEST(TorusTest, WrappedCubeHasSixNeighboursOneHopAway) {
  const Cluster c = Make("tpu-v5p:4x4x4");
  ASSERT_EQ(c.num_devices(), 64);
  for (int64_t chip = 0; chip < 64; ++chip) EXPECT_EQ(OutDegree(c, chip), 6);
  // 6 links per chip over 6 directions: one 9e10 B/s link each way (scaling book, v5p).
  EXPECT_DOUBLE_EQ(c.links()[0].bandwidth_bytes_per_s, 9e10);
  for (int64_t chip = 0; chip < 64; ++chip) {
    const auto xyz = c.TorusCoordinates(chip);
    for (int64_t other = 0; other < 64; ++other) {
      const auto o = c.TorusCoordinates(other);
      int64_t ring_distance = 0;
      for (int a = 0; a < 3; ++a) {
        const int64_t d = std::abs(xyz[a] - o[a]);
        ring_distance += std::min(d, 4 - d);
      }
      EXPECT_EQ(static_cast<int64_t>(c.Route(chip, other).size()), ring_distance) << chip << "->" << other;
    }
  }
}

TEST(TorusTest, RoutesInDimensionOrderAndEndWhereTheyShould) {
  const Cluster c = Make("tpu-v5p:4x4x4");
  // (0,0,0) -> (3,2,1): -x once (wraparound), +y twice, +z once.
  const auto route = c.Route(0, 3 + 2 * 4 + 1 * 16);
  ASSERT_EQ(route.size(), 4u);
  EXPECT_NE(c.links()[static_cast<size_t>(route[0])].name.find("-axis0"), std::string::npos);
  EXPECT_NE(c.links()[static_cast<size_t>(route[1])].name.find("+axis1"), std::string::npos);
  EXPECT_NE(c.links()[static_cast<size_t>(route[3])].name.find("+axis2"), std::string::npos);
  int64_t at = 0;
  for (int64_t id : route) {
    EXPECT_EQ(c.links()[static_cast<size_t>(id)].from, at);
    at = c.links()[static_cast<size_t>(id)].to;
  }
  EXPECT_EQ(at, 3 + 2 * 4 + 16);
}

TEST(TorusTest, SubCubeSlicesHaveNoWraparound) {
  const Cluster c = Make("tpu-v5p:2x4x4");
  EXPECT_EQ(OutDegree(c, 0), 3);                 // a corner: +x, +y, +z only
  EXPECT_EQ(c.Route(0, 3 * 2).size(), 3u);       // (0,0,0) -> (0,3,0) walks the line
  const Cluster v5e = Make("tpu-v5e:8x16");      // axis 1 is a full pod axis: it wraps
  EXPECT_EQ(v5e.Route(0, 15 * 8).size(), 1u);    // (0,0) -> (0,15) over the wraparound
  EXPECT_EQ(v5e.Route(0, 7).size(), 7u);         // (0,0) -> (7,0) along a line of 8
}

// The direction labels ("+axis0", "-axis2") of a route's links, in order.
std::vector<std::string> Directions(const Cluster& c, int64_t src, int64_t dst) {
  std::vector<std::string> out;
  for (int64_t id : c.Route(src, dst)) {
    const std::string& name = c.links()[static_cast<size_t>(id)].name;
    out.push_back(name.substr(name.rfind(' ') + 1));
  }
  return out;
}

TEST(TorusTest, TranslatedGroupsRouteTheSameWay) {
  // Wrapped (8x8x8, even and odd lengths on v5e) and partly unwrapped (2x4x4) tori.
  for (const std::string preset : {"tpu-v5p:8x8x8", "tpu-v5p:2x4x4", "tpu-v5e:8x16", "tpu-v5p:4x4x12"}) {
    const Cluster c = Make(preset);
    const int64_t n = c.num_devices();
    for (int64_t first = 0; first < n; first += 7) {
      const std::vector<int64_t> group = {first, (first * 5 + 3) % n, (first * 11 + 17) % n, (first + n / 2) % n};
      const std::vector<int64_t> moved = c.Translated(group);
      ASSERT_EQ(moved.size(), group.size());
      // Every member moves by the same even amount along each axis, and none crosses the
      // wraparound (coordinates only decrease, by at most the smallest one).
      const std::vector<int64_t> from = c.TorusCoordinates(group.front()), to = c.TorusCoordinates(moved.front());
      for (size_t i = 0; i < group.size(); ++i) {
        const std::vector<int64_t> a = c.TorusCoordinates(group[i]), b = c.TorusCoordinates(moved[i]);
        for (size_t axis = 0; axis < a.size(); ++axis) {
          EXPECT_EQ(a[axis] - b[axis], from[axis] - to[axis]) << preset << " axis " << axis;
          EXPECT_LE(b[axis], a[axis]);  // moved down, never across the wraparound
          EXPECT_EQ((a[axis] - b[axis]) % 2, 0);
        }
      }
      for (size_t i = 0; i < group.size(); ++i) {
        for (size_t j = 0; j < group.size(); ++j) {
          EXPECT_EQ(Directions(c, moved[i], moved[j]), Directions(c, group[i], group[j])) << preset << " " << group[i] << " -> " << group[j];
        }
      }
    }
  }
}

TEST(TorusTest, OnlyTorusSlicesTranslate) {
  const std::vector<int64_t> group = {300, 301, 302};
  EXPECT_EQ(Make("tpu-v5e:16x16,slices=2").Translated(group), group);  // slices meet over DCN: no symmetry used
  EXPECT_EQ(Make("dgx-h100:64").Translated(group), group);
  EXPECT_NE(Make("tpu-v5p:8x8x8").Translated(group), group);
}

TEST(TorusTest, SlicesMeetOverDcn) {
  const Cluster c = Make("tpu-v5e:16x16,slices=2");
  EXPECT_EQ(c.num_devices(), 512);
  EXPECT_EQ(Classes(c, c.Route(0, 256)), (std::vector<std::string>{"dcn", "dcn"}));
  EXPECT_EQ(Classes(c, c.Route(0, 1)), (std::vector<std::string>{"ici"}));
  EXPECT_EQ(c.TorusCoordinates(257), (std::vector<int64_t>{1, 0, 1}));
}

TEST(SwitchedTest, NvlinkInsideANodeInfinibandAcross) {
  const Cluster c = Make("dgx-h100:64");
  EXPECT_EQ(Classes(c, c.Route(0, 7)), (std::vector<std::string>{"nvlink", "nvlink"}));
  // NVLink bundle: 18 links x 25 GB/s one way.
  EXPECT_DOUBLE_EQ(c.links()[static_cast<size_t>(c.Route(0, 7)[0])].bandwidth_bytes_per_s, 18 * 25e9);
  // Rail-optimised: GPU 0 of node 0 and of node 1 share the rail-0 leaf.
  EXPECT_EQ(Classes(c, c.Route(0, 8)), (std::vector<std::string>{"infiniband", "infiniband"}));
  // Different rails meet through the core.
  EXPECT_EQ(c.Route(0, 9).size(), 4u);
}

TEST(SwitchedTest, FatTreeLeavesAndOversubscribedUplinks) {
  const Cluster c = Make("dgx-h100:64,fabric=fat-tree,oversubscription=2");
  EXPECT_EQ(c.Route(0, 8).size(), 2u);   // same leaf (32 NICs: nodes 0-3)
  const auto far = c.Route(0, 32);       // next leaf: nic, uplink, downlink, nic
  ASSERT_EQ(far.size(), 4u);
  const Link& uplink = c.links()[static_cast<size_t>(far[1])];
  EXPECT_NE(uplink.name.find("spine"), std::string::npos);
  EXPECT_DOUBLE_EQ(uplink.bandwidth_bytes_per_s, 32 * 50e9 / 2);
}

TEST(SwitchedTest, SingleNodeHasNoFabric) {
  const Cluster c = Make("dgx-h100:8");
  for (const Link& l : c.links()) EXPECT_EQ(l.link_class, "nvlink");
}

// The structural fast path gives exactly Dijkstra's routes, for every pair of a small cluster of
// each fabric; a cluster whose latencies break the structure's assumption falls back.
TEST(SwitchedTest, StructuralRoutesEqualDijkstra) {
  for (const char* preset : {"dgx-h100:64", "dgx-h100:128,fabric=fat-tree", "gb200-nvl72:144", "local:4"}) {
    const Cluster c = Make(preset);
    EXPECT_TRUE(c.structural_routes()) << preset;
    for (int64_t a = 0; a < c.num_devices(); ++a) {
      for (int64_t b = 0; b < c.num_devices(); b += 3) EXPECT_EQ(c.Route(a, b), c.ReferenceRoute(a, b)) << preset << " " << a << "->" << b;
    }
  }
  ClusterSpec odd = ParseClusterPreset("dgx-h100:64,fabric=fat-tree", "--cluster");
  odd.links.at("nvlink").latency_s = 20e-6;  // slower than InfiniBand: in-node traffic goes over the NICs
  const Cluster c(odd);
  EXPECT_FALSE(c.structural_routes());
  EXPECT_EQ(Classes(c, c.Route(0, 1)), (std::vector<std::string>{"infiniband", "infiniband"}));
}

TEST(LocalTest, CoresMeetInSharedMemory) {
  const Cluster c = Make("local:4");
  EXPECT_EQ(c.num_devices(), 4);
  EXPECT_EQ(Classes(c, c.Route(1, 3)), (std::vector<std::string>{"shm", "shm"}));
}

TEST(LocalTest, HostsMeetOverTcp) {
  ClusterSpec spec = ParseClusterPreset("local:4", "--cluster");
  spec.topology.local_hosts = 2;
  spec.links["tcp"] = LinkSpec{1.25e8, 5e-5, 1, 1.0, "test"};
  const Cluster c(spec);
  EXPECT_TRUE(c.structural_routes());
  EXPECT_EQ(Classes(c, c.Route(0, 1)), (std::vector<std::string>{"shm", "shm"}));  // cores 0 and 1: host 0
  EXPECT_EQ(Classes(c, c.Route(1, 2)), (std::vector<std::string>{"shm", "tcp", "tcp", "shm"}));
  for (int64_t a = 0; a < 4; ++a) {
    for (int64_t b = 0; b < 4; ++b) EXPECT_EQ(c.Route(a, b), c.ReferenceRoute(a, b)) << a << "->" << b;
  }
}

}  // namespace
}  // namespace shardsim::topologies
