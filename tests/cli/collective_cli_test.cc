// `shardsim collective` end to end: the nccl-tests style sweep, its JSON, and its input errors.
#include "tests/cli/cli_test_util.h"

namespace shardsim::cli_test {
namespace {

using nlohmann::json;

TEST(CliCollectiveTest, SweepReportsTimeAndBandwidthsPerSize) {
  json out;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"collective", "--cluster", "dgx-h100:8", "--op", "all-reduce", "--bytes", "8,1M,1G",
                                         "--devices", "8", "--algorithm", "ring", "--json"}),
                            &out));
  ASSERT_EQ(out["results"].size(), 3u);
  const std::vector<int64_t> sizes = {8, 1 << 20, 1 << 30};
  double previous = 0;
  for (size_t i = 0; i < 3; ++i) {
    const json& r = out["results"][i];
    EXPECT_EQ(r["bytes"], sizes[i]);
    EXPECT_EQ(r["algorithm"], "ring");
    EXPECT_GT(r["time_s"].get<double>(), previous);
    previous = r["time_s"].get<double>();
    EXPECT_NEAR(r["algbw_bytes_per_s"].get<double>(), static_cast<double>(sizes[i]) / r["time_s"].get<double>(), 1e-6 * r["algbw_bytes_per_s"].get<double>());
    EXPECT_NEAR(r["busbw_bytes_per_s"].get<double>() / r["algbw_bytes_per_s"].get<double>(), 2.0 * 7 / 8, 1e-9);
  }
  // 1 GiB ring all-reduce on 8 H100s: busbw = 450 GB/s NVLink x 0.8 efficiency (catalogue).
  EXPECT_NEAR(out["results"][2]["busbw_bytes_per_s"].get<double>() / 360e9, 1.0, 0.01);
}

TEST(CliCollectiveTest, MeshAxesAndSimGridEngine) {
  json out;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"collective", "--cluster", "dgx-h100:64", "--op", "all-gather", "--bytes", "64M", "--mesh",
                                         "data=8,tensor=8", "--axes", "tensor", "--engine", "des", "--json"}),
                            &out));
  EXPECT_EQ(out["groups"], 8);
  EXPECT_EQ(out["group_size"], 8);
  const json& r = out["results"][0];
  EXPECT_NEAR(r["time_s"].get<double>() / r["analytic_time_s"].get<double>(), 1.0, 0.02);
  EXPECT_GT(out["des"]["messages"].get<int64_t>(), 0);
}

TEST(CliCollectiveTest, TableLooksLikeNcclTests) {
  const CliResult r = RunShardsim({"collective", "--cluster", "tpu-v5p:4x4x4", "--op", "all-gather", "--bytes", "1M,1G", "--devices", "64"});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.err;
  EXPECT_NE(r.out.find("busbw (GB/s)"), std::string::npos);
  EXPECT_NE(r.out.find("torus"), std::string::npos);
}

TEST(CliCollectiveTest, BadInputIsNamed) {
  const std::vector<std::string> base = {"collective", "--cluster", "dgx-h100:16", "--bytes", "1M"};
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return RunShardsim(args);
  };
  EXPECT_TRUE(IsInputError(run({"--op", "all-reduse", "--devices", "8"}), {"--op", "did you mean 'all-reduce'"}));
  EXPECT_TRUE(IsInputError(run({"--op", "all-reduce", "--devices", "8", "--algorithm", "rng"}), {"--algorithm", "did you mean 'ring'"}));
  EXPECT_TRUE(IsInputError(run({"--op", "all-reduce", "--devices", "32"}), {"--devices 32", "larger than the cluster", "1 to 16"}));
  EXPECT_TRUE(IsInputError(run({"--op", "all-reduce", "--mesh", "data=2,tensor=8", "--axes", "expert"}), {"--axes", "'expert' is not in the mesh"}));
  EXPECT_TRUE(IsInputError(run({"--op", "all-reduce", "--mesh", "data=4,tensor=8", "--axes", "tensor"}), {"--mesh", "32 devices", "16"}));
  EXPECT_TRUE(IsInputError(run({"--op", "all-reduce"}), {"no group given", "--devices"}));
  EXPECT_TRUE(IsInputError(run({"--op", "all-to-all", "--devices", "8", "--algorithm", "ring"}), {"cannot run all-to-all", "direct"}));
  EXPECT_TRUE(IsInputError(run({"--op", "all-reduce", "--devices", "16", "--algorithm", "torus"}), {"not a torus"}));
  EXPECT_TRUE(IsInputError(run({"--op", "all-reduce", "--devices", "8", "--engine", "simgrid"}), {"--engine", "analytic, des"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"collective", "--cluster", "dgx-h100:16", "--op", "all-reduce", "--devices", "8", "--bytes", "0"}),
                           {"--bytes", "must be positive"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"collective", "--cluster", "dgx-h100:16", "--op", "all-reduce", "--devices", "8", "--bytes", "1M,x"}),
                           {"--bytes", "not a byte size"}));
}

}  // namespace
}  // namespace shardsim::cli_test
