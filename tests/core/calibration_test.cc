#include "core/calibration.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/calibration_json.h"
#include "core/cluster_json.h"
#include "core/error.h"
#include "core/inputs.h"
#include "core/json_input.h"

namespace shardsim {
namespace {

// A 2x2x2 grid whose rate depends only on m: 10 at m=16, 40 at m=256.
CalibrationSpec Grid() {
  CalibrationSpec c;
  c.dtype = "fp32";
  c.gemm.m = {16, 256};
  c.gemm.n = {16, 256};
  c.gemm.k = {16, 256};
  for (double m : {10.0, 40.0}) {
    for (int i = 0; i < 4; ++i) c.gemm.flop_per_s.push_back(m);
  }
  return c;
}

TEST(CalibrationTest, GemmInterpolatesInLogSpaceAndClampsAtTheEdges) {
  const CalibrationSpec c = Grid();
  EXPECT_DOUBLE_EQ(GemmFlopPerS(c, 16, 100, 100), 10);
  EXPECT_DOUBLE_EQ(GemmFlopPerS(c, 256, 100, 100), 40);
  EXPECT_DOUBLE_EQ(GemmFlopPerS(c, 64, 100, 100), 25);  // log2: half way from 16 to 256
  EXPECT_DOUBLE_EQ(GemmFlopPerS(c, 1, 1, 1), 10);        // below the grid: its edge
  EXPECT_DOUBLE_EQ(GemmFlopPerS(c, 1 << 20, 1, 1), 40);  // above: its edge, never extrapolated
}

TEST(CalibrationTest, KernelRatesAndCurvesInterpolate) {
  const KernelRate k{true, {{64, 1.0}, {256, 3.0}}};
  EXPECT_DOUBLE_EQ(KernelRateAt(k, 128), 2.0);
  EXPECT_DOUBLE_EQ(KernelRateAt(k, 1), 1.0);
  EXPECT_DOUBLE_EQ(KernelRateAt(k, 4096), 3.0);
  const CollectiveCurve curve{"all-reduce", 2, "shm", {{1000, 1e-5}, {2000, 2e-5}, {4000, 3e-5}}};
  EXPECT_DOUBLE_EQ(CurveSeconds(curve, 1500), 1.5e-5);
  EXPECT_DOUBLE_EQ(CurveSeconds(curve, 8000), 5e-5);  // past the end at the last segment's bandwidth
  EXPECT_DOUBLE_EQ(CurveSeconds(curve, 10), 1e-5);    // below the first point: its time
  CalibrationSpec c = Grid();
  c.collectives.push_back(curve);
  EXPECT_EQ(FindCurve(c, "all-reduce", 2, "shm"), &c.collectives[0]);
  EXPECT_EQ(FindCurve(c, "all-reduce", 2, "tcp"), nullptr);
  EXPECT_EQ(FindCurve(c, "all-gather", 2, "shm"), nullptr);
}

TEST(CalibrationTest, ClusterJsonRoundTripsTheCalibrationAndHosts) {
  ClusterSpec cluster = LoadCluster("local:4");
  cluster.topology.local_hosts = 2;
  cluster.links["tcp"] = LinkSpec{1.25e8, 5e-5, 1, 1.0, "test"};
  cluster.calibration = Grid();
  cluster.calibration.kernels["attention"] = KernelRate{true, {{64, 1e9}, {256, 2e9}}};
  cluster.calibration.collectives.push_back({"all-reduce", 2, "tcp", {{4096, 1e-4}, {65536, 6e-4}}});
  cluster.calibration.measured_at = "2026-11-23T00:00:00Z";
  const ClusterSpec back = ClusterFromJson(ClusterToJson(cluster), "test");
  EXPECT_EQ(back, cluster);
}

TEST(CalibrationTest, BadTablesAreRejectedByField) {
  ClusterSpec cluster = LoadCluster("local:2");
  cluster.calibration = Grid();
  cluster.calibration.gemm.flop_per_s.pop_back();
  try {
    ValidateCluster(cluster, "c.json");
    FAIL() << "a short grid was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("c.json/calibration/gemm/flop_per_s"), std::string::npos) << e.what();
  }
  cluster.calibration = Grid();
  cluster.calibration.kernels["mlp_norm"] = KernelRate{false, {{256, 1e9}, {64, 1e9}}};
  EXPECT_THROW(ValidateCluster(cluster, "c.json"), InputError);
  cluster.calibration = Grid();
  cluster.topology.local_hosts = 3;  // does not divide 2 devices
  EXPECT_THROW(ValidateCluster(cluster, "c.json"), InputError);
  cluster.topology.local_hosts = 2;  // two hosts need a tcp link class
  EXPECT_THROW(ValidateCluster(cluster, "c.json"), InputError);
  nlohmann::json j = ClusterToJson(LoadCluster("local:2"));
  j["calibration"] = {{"dtype", "fp32"}, {"collectives", {{{"op", "all-reduce"}, {"group", 2}, {"link", "nvlink"}, {"points", {{1, 1}}}}}}};
  try {
    ClusterFromJson(j, "c.json");
    FAIL() << "an unknown transport was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("link"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace shardsim
