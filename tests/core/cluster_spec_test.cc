#include "core/cluster_spec.h"

#include <fstream>
#include <optional>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/cluster_json.h"
#include "core/cluster_presets.h"
#include "core/error.h"
#include "core/inputs.h"

namespace shardsim {
namespace {

TEST(ClusterPresetsTest, EverySystemExampleBuildsAndRoundTrips) {
  const auto systems = ClusterSystems();
  EXPECT_GE(systems.size(), 11u);
  for (const SystemInfo& s : systems) {
    const ClusterSpec c = ParseClusterPreset(s.example, "--cluster");
    EXPECT_GT(DeviceCount(c), 0) << s.example;
    EXPECT_FALSE(c.chip.source.empty()) << s.example;
    for (const auto& [name, link] : c.links) EXPECT_FALSE(link.source.empty()) << s.example << " " << name;
    const ClusterSpec back = ClusterFromJson(nlohmann::json::parse(ClusterToJson(c).dump()), "c.json");
    EXPECT_EQ(back, c) << s.example;
  }
}

TEST(ClusterPresetsTest, GpuNodes) {
  const ClusterSpec c = ParseClusterPreset("dgx-h100:64", "--cluster");
  EXPECT_EQ(DeviceCount(c), 64);
  EXPECT_EQ(c.topology.nodes, 8);
  EXPECT_EQ(c.topology.devices_per_node, 8);
  EXPECT_DOUBLE_EQ(c.chip.peak_flop_per_s.at("bf16"), 9.894e14);
  EXPECT_EQ(c.links.at("nvlink").links_per_device, 18);
  const ClusterSpec nvl = ParseClusterPreset("gb200-nvl72:144,oversubscription=2,fabric=fat-tree", "--cluster");
  EXPECT_EQ(nvl.topology.nodes, 2);
  EXPECT_EQ(nvl.topology.devices_per_node, 72);
  EXPECT_DOUBLE_EQ(nvl.topology.oversubscription, 2);
  EXPECT_EQ(nvl.topology.fabric, "fat-tree");
  EXPECT_TRUE(nvl.topology.nvls);
  EXPECT_FALSE(nvl.topology.sharp);
  EXPECT_TRUE(ParseClusterPreset("dgx-h100:16,sharp=true", "--cluster").topology.sharp);
  EXPECT_FALSE(ParseClusterPreset("dgx-a100:16", "--cluster").topology.nvls);
}

// A system taking another's fitted compute figures (data/hardware.json fitted_from) has that
// system's compute: the same peaks and compute units, a system with figures of its own.
TEST(ClusterPresetsTest, FittedFromNamesASystemOfTheSameCompute) {
  int carried = 0;
  for (const SystemInfo& s : ClusterSystems()) {
    if (s.fitted_from.empty()) continue;
    ++carried;
    EXPECT_TRUE(s.fitted) << s.name;
    EXPECT_TRUE(FittedFromSystem(s.fitted_from).empty()) << s.name << " takes figures carried from elsewhere";
    const ClusterSpec own = ParseClusterPreset(s.example, "--cluster");
    const ClusterSpec from = ParseClusterPreset(s.fitted_from + ":8", "--cluster");
    EXPECT_EQ(own.chip.peak_flop_per_s, from.chip.peak_flop_per_s) << s.name;
    EXPECT_EQ(own.chip.compute_units, from.chip.compute_units) << s.name;
    EXPECT_EQ(own.efficiency.matmul, from.efficiency.matmul) << s.name;
    EXPECT_EQ(own.efficiency.backward, from.efficiency.backward) << s.name;
  }
  EXPECT_GE(carried, 1);
}

// Blackwell Ultra: the catalogue's figures, each from the sources its entries name.
TEST(ClusterPresetsTest, BlackwellUltraSystems) {
  const ClusterSpec b300 = ParseClusterPreset("dgx-b300:16", "--cluster");
  EXPECT_EQ(b300.topology.devices_per_node, 8);
  EXPECT_DOUBLE_EQ(b300.chip.peak_flop_per_s.at("bf16"), 2.25e15);
  EXPECT_DOUBLE_EQ(b300.chip.peak_flop_per_s.at("fp8"), 4.5e15);
  EXPECT_EQ(b300.chip.hbm_bytes, 270000000000);  // usable, as the B200 entries
  EXPECT_DOUBLE_EQ(b300.links.at("infiniband").bandwidth_bytes_per_s, 1e11);  // 800 Gb/s ConnectX-8
  const ClusterSpec gb300 = ParseClusterPreset("gb300-nvl72:128,domain=64", "--cluster");
  EXPECT_EQ(DeviceCount(gb300), 128);
  EXPECT_DOUBLE_EQ(gb300.chip.peak_flop_per_s.at("bf16"), 2.5e15);
  EXPECT_EQ(gb300.chip.hbm_bytes, 279000000000);
  EXPECT_NE(gb300.efficiency.source.find("not measured on GB300"), std::string::npos);
}

// FP8 products in any layout: the Blackwell systems' chips (B200, B300 and their GB variants), no
// other; written to a cluster JSON only where set, read back.
TEST(ClusterPresetsTest, Fp8AnyLayoutOnBlackwellChipsOnly) {
  for (const SystemInfo& s : ClusterSystems()) {
    const ClusterSpec c = ParseClusterPreset(s.example, "--cluster");
    const bool blackwell = c.chip.name.rfind("B200", 0) == 0 || c.chip.name.rfind("B300", 0) == 0;
    EXPECT_EQ(c.chip.fp8_any_layout, blackwell) << s.example << " " << c.chip.name;
    EXPECT_EQ(ClusterToJson(c)["chip"].contains("fp8_any_layout"), blackwell) << s.example;
    if (blackwell) EXPECT_NE(c.chip.source.find("is_non_tn_fp8_gemm_supported"), std::string::npos) << s.example;
  }
  nlohmann::json j = ClusterToJson(ParseClusterPreset("dgx-b200:8", "--cluster"));
  j["chip"]["fp8_any_layout"] = "yes";
  EXPECT_THROW(ClusterFromJson(j, "c.json"), InputError);
}

TEST(ClusterPresetsTest, TorusWraparoundFollowsSliceShape) {
  const ClusterSpec cube = ParseClusterPreset("tpu-v5p:16x16x16", "--cluster");
  EXPECT_EQ(DeviceCount(cube), 4096);
  EXPECT_EQ(cube.topology.wraparound, (std::vector<bool>{true, true, true}));
  const ClusterSpec small = ParseClusterPreset("tpu-v5p:2x2x1", "--cluster");
  EXPECT_EQ(small.topology.wraparound, (std::vector<bool>{false, false, false}));
  const ClusterSpec v5e = ParseClusterPreset("tpu-v5e:8x16", "--cluster");
  EXPECT_EQ(v5e.topology.wraparound, (std::vector<bool>{false, true}));
  const ClusterSpec multi = ParseClusterPreset("tpu-v5e:16x16,slices=4", "--cluster");
  EXPECT_EQ(DeviceCount(multi), 1024);
  EXPECT_TRUE(multi.links.count("dcn"));
  EXPECT_EQ(DeviceCount(ParseClusterPreset("tpu-v5p:16x16x24", "--cluster")), 6144);
}

TEST(ClusterPresetsTest, LocalUsesThisMachine) {
  EXPECT_GE(DeviceCount(ParseClusterPreset("local", "--cluster")), 1);
  EXPECT_EQ(DeviceCount(ParseClusterPreset("local:4", "--cluster")), 4);
}

void ExpectRejected(const std::string& text, const std::string& word) {
  try {
    ParseClusterPreset(text, "--cluster " + text);
    ADD_FAILURE() << "accepted " << text;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << text << ": " << e.what();
  }
}

TEST(ClusterPresetsTest, BadStringsAreNamed) {
  ExpectRejected("dgx-h100:1001", "whole nodes");
  ExpectRejected("dgx-h100:1001", "dgx-h100:1000");
  ExpectRejected("dgx-h100:12", "dgx-h100:8 or dgx-h100:16");
  ExpectRejected("gb200-nvl72:100", "whole nodes");
  ExpectRejected("dgx-h100", "needs a GPU count");
  ExpectRejected("dgx-h10:8", "dgx-h100");
  ExpectRejected("dgx-h100:abc", "not a whole number");
  ExpectRejected("dgx-h100:64,oversub=2", "oversubscription");
  ExpectRejected("dgx-h100:64,oversubscription=0.5", "ratio");
  ExpectRejected("dgx-h100:64,", "key=value");
  ExpectRejected("dgx-h100:64,sharp=yes", "true or false");
  ExpectRejected("tpu-v5p:8x8", "3 axes");
  ExpectRejected("tpu-v5p:6x6x6", "whole 4x4x4 cubes");
  ExpectRejected("tpu-v5p:3x1x1", "1, 2 or 4");
  ExpectRejected("tpu-v5p:32x32x32", "largest slice");
  ExpectRejected("tpu-v5e:32x32", "largest slice");
  ExpectRejected("tpu-v5e:12x16", "slice shape");
  ExpectRejected("tpu-v5e:16x16,slices=0", "out of range");
}

// The stated bound on devices (kMaxClusterDevices = 2^18): the largest presets of that size are
// accepted, one node more is refused by every way of giving a cluster, naming the bound and why.
TEST(ClusterPresetsTest, SizeBoundIsStatedAndEnforced) {
  EXPECT_EQ(kMaxClusterDevices, 262144);
  EXPECT_EQ(DeviceCount(ParseClusterPreset("dgx-h100:262144", "--cluster")), kMaxClusterDevices);
  EXPECT_EQ(DeviceCount(ParseClusterPreset("tpu-v5p:16x16x16,slices=64", "--cluster")), kMaxClusterDevices);
  ExpectRejected("dgx-h100:262152", "at most 262144 devices");
  ExpectRejected("dgx-h100:10000000", "10000000 devices");
  ExpectRejected("dgx-h100:10000000", "100k-200k GPUs");
  ExpectRejected("gb200-nvl72:262224", "at most 262144");
  ExpectRejected("tpu-v5p:16x16x16,slices=65", "266240 devices");
  ExpectRejected("dgx-h100:99999999999999999999", "out of range");
  nlohmann::json j = ClusterToJson(ParseClusterPreset("dgx-h100:16", "--cluster"));
  j["topology"]["nodes"] = 32769;  // 262,152 GPUs
  try {
    ClusterFromJson(j, "c.json");
    ADD_FAILURE() << "accepted 262152 devices";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "c.json:/topology");
    EXPECT_NE(e.valid().find("at most 262144"), std::string::npos) << e.what();
  }
  j = ClusterToJson(ParseClusterPreset("local:4", "--cluster"));
  j["topology"]["local_devices"] = 1 << 20;
  EXPECT_THROW(ClusterFromJson(j, "c.json"), InputError);
  j = ClusterToJson(ParseClusterPreset("tpu-v5p:4x4x4", "--cluster"));
  j["topology"]["slices"] = 5000;  // 320,000 chips
  EXPECT_THROW(ClusterFromJson(j, "c.json"), InputError);
}

TEST(ClusterJsonTest, MissingLinkClassIsNamed) {
  nlohmann::json j = ClusterToJson(ParseClusterPreset("dgx-h100:16", "--cluster"));
  j["links"].erase("infiniband");
  try {
    ClusterFromJson(j, "c.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "c.json:/links");
    EXPECT_NE(e.problem().find("infiniband"), std::string::npos);
  }
  j = ClusterToJson(ParseClusterPreset("dgx-h100:16", "--cluster"));
  j["links"]["nvlinc"] = j["links"]["nvlink"];
  EXPECT_THROW(ClusterFromJson(j, "c.json"), InputError);
  j = ClusterToJson(ParseClusterPreset("dgx-h100:16", "--cluster"));
  j["efficiency"]["matmul"] = 1.5;
  EXPECT_THROW(ClusterFromJson(j, "c.json"), InputError);
}

// The SMs a collective's kernel holds (chip.collective_units): read and written back with their
// source, absent where none are given (TPUs); refused without compute_units, at or above them,
// negative, or with an unknown key, naming the field.
TEST(ClusterJsonTest, CollectiveUnits) {
  const ClusterSpec h100 = ParseClusterPreset("dgx-h100:16", "--cluster");
  EXPECT_EQ(h100.chip.collective_units.in_node, 24);
  EXPECT_EQ(h100.chip.collective_units.across_nodes, 16);
  EXPECT_EQ(h100.chip.collective_units.nvls, 16);
  EXPECT_NE(h100.chip.collective_units.source.find("NVIDIA/nccl"), std::string::npos);
  EXPECT_EQ(ClusterFromJson(nlohmann::json::parse(ClusterToJson(h100).dump()), "c.json"), h100);
  EXPECT_FALSE(ClusterToJson(ParseClusterPreset("tpu-v5p:2x2x2", "--cluster"))["chip"].contains("collective_units"));
  const nlohmann::json good = ClusterToJson(h100);
  auto refused = [&](nlohmann::json j, const std::string& what) {
    try {
      ClusterFromJson(j, "c.json");
    } catch (const InputError& e) {
      return e.where().find("collective_units") != std::string::npos && (e.problem() + e.valid()).find(what) != std::string::npos;
    }
    return false;
  };
  nlohmann::json j = good;
  j["chip"].erase("compute_units");
  EXPECT_TRUE(refused(j, "compute_units"));
  j = good;
  j["chip"]["collective_units"]["in_node"] = 132;
  EXPECT_TRUE(refused(j, "131"));
  j = good;
  j["chip"]["collective_units"]["nvls"] = -1;
  EXPECT_TRUE(refused(j, "0"));
  j = good;
  j["chip"]["collective_units"]["per_peer"] = 2;
  EXPECT_TRUE(refused(j, "per_peer"));
}

// An attention kernel's own efficiency: read, written back, and used for that kernel only (the
// others take `attention`); flash's figure is `attention` itself, so a "flash" key is refused,
// as is an unknown kernel or a share above 1.
TEST(ClusterJsonTest, AttentionKernelEfficiencies) {
  nlohmann::json j = ClusterToJson(ParseClusterPreset("dgx-h100:16", "--cluster"));
  j["efficiency"]["attention"] = 0.5;
  j["efficiency"]["attention_kernels"] = {{"triton", 0.2}};
  const ClusterSpec c = ClusterFromJson(j, "c.json");
  EXPECT_DOUBLE_EQ(c.efficiency.Attention("triton"), 0.2);
  EXPECT_DOUBLE_EQ(c.efficiency.Attention("flex"), 0.5);
  EXPECT_DOUBLE_EQ(c.efficiency.Attention(), 0.5);
  EXPECT_DOUBLE_EQ(c.efficiency.Attention(std::string(kUnfusedAttention)), c.efficiency.matmul);  // batched products
  EXPECT_EQ(ClusterFromJson(nlohmann::json::parse(ClusterToJson(c).dump()), "c.json"), c);
  for (const nlohmann::json& bad : {nlohmann::json{{"flash", 0.4}}, nlohmann::json{{"xformers", 0.4}}, nlohmann::json{{"triton", 1.5}}}) {
    j["efficiency"]["attention_kernels"] = bad;
    EXPECT_THROW(ClusterFromJson(j, "c.json"), InputError) << bad.dump();
  }
}

// efficiency.backward: the gradient passes' share of the forward rates, in (0, 1], 1 when absent
// (and then not written: the kernels' figures have none); a share above 1 or at 0 is refused
// naming the field.
TEST(ClusterJsonTest, BackwardShareOfTheForwardRates) {
  nlohmann::json j = ClusterToJson(ParseClusterPreset("dgx-h100:16,efficiency=catalogue", "--cluster"));
  EXPECT_FALSE(j["efficiency"].contains("backward"));
  EXPECT_DOUBLE_EQ(ClusterFromJson(j, "c.json").efficiency.backward, 1);
  j["efficiency"]["backward"] = 0.6;
  const ClusterSpec c = ClusterFromJson(j, "c.json");
  EXPECT_DOUBLE_EQ(c.efficiency.backward, 0.6);
  EXPECT_EQ(ClusterFromJson(nlohmann::json::parse(ClusterToJson(c).dump()), "c.json"), c);
  for (double bad : {0.0, 1.5}) {
    j["efficiency"]["backward"] = bad;
    try {
      ClusterFromJson(j, "c.json");
      FAIL() << bad;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("backward"), std::string::npos) << e.what();
    }
  }
}

// What --cluster ARG is at another size: a preset with its options, FILE.json:SIZE, and a file
// alone whose name is its preset's (as calibrate writes them); nothing for a custom topology, a
// file whose name does not say its size, or "local".
TEST(ClusterInputsTest, ClusterSizeOfKeepsWhatWasGiven) {
  const ClusterSpec preset = ParseClusterPreset("dgx-h100:64,fabric=fat-tree", "--cluster");
  std::optional<ClusterSizeArg> parts = ClusterSizeOf("dgx-h100:64,fabric=fat-tree", preset);
  ASSERT_TRUE(parts.has_value());
  EXPECT_EQ(parts->size, "64");
  EXPECT_EQ(parts->At("128"), "dgx-h100:128,fabric=fat-tree");

  ClusterSpec fitted = ParseClusterPreset("tpu-v5p:8x8x8,slices=2", "--cluster");
  fitted.efficiency.matmul = 0.5;
  const std::string path = testing::TempDir() + "/size_of_fitted.cluster.json";
  std::ofstream(path) << ClusterToJson(fitted).dump();
  parts = ClusterSizeOf(path, LoadCluster(path));
  ASSERT_TRUE(parts.has_value());
  EXPECT_EQ(parts->size, "8x8x8");
  EXPECT_EQ(parts->At("8x8x16"), path + ":8x8x16");
  const ClusterSpec larger = LoadCluster(parts->At("8x8x16"));
  EXPECT_EQ(DeviceCount(larger), 2 * 1024);  // the file name's slices=2 kept
  EXPECT_EQ(larger.efficiency, fitted.efficiency);
  parts = ClusterSizeOf(path + ":8x8x16", larger);
  ASSERT_TRUE(parts.has_value());
  EXPECT_EQ(parts->At("8x16x16"), path + ":8x16x16");

  for (const char* name : {"my pod", "tpu-v5p:abc", "tpu-v5p:"}) {
    fitted.name = name;
    std::ofstream(path) << ClusterToJson(fitted).dump();
    EXPECT_FALSE(ClusterSizeOf(path, LoadCluster(path)).has_value()) << name;
  }
  // A file not named .json: FILE.json:SIZE cannot name it.
  fitted.name = "tpu-v5p:8x8x8,slices=2";
  const std::string bare = testing::TempDir() + "/size_of_fitted_cluster";
  std::ofstream(bare) << ClusterToJson(fitted).dump();
  EXPECT_FALSE(ClusterSizeOf(bare, LoadCluster(bare)).has_value());
  EXPECT_FALSE(ClusterSizeOf(path + ":8x8xa", fitted).has_value());
  fitted.system = "custom";
  EXPECT_FALSE(ClusterSizeOf(path, fitted).has_value());
  EXPECT_FALSE(ClusterSizeOf("local", ParseClusterPreset("local", "--cluster")).has_value());
  // A preset's name on a topology of another size is refused, naming the file's /name.
  fitted.system = "tpu-v5p";
  fitted.name = "tpu-v5p:8x8x8";
  std::ofstream(path) << ClusterToJson(fitted).dump();
  try {
    LoadCluster(path);
    ADD_FAILURE() << "a name of 512 chips on a topology of 1024 was taken";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), path + ":/name");
    EXPECT_NE(std::string(e.what()).find("names 512 devices but the file's topology holds 1024"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace shardsim
