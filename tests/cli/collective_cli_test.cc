// `shardsim collective` end to end: the nccl-tests style sweep, its JSON, and its input errors;
// and the stated limits it shares with `simulate` (docs/cli.md "Limits"): the cluster size bound,
// the all-to-all group bound, and SimGrid runs refused before they start.
#include <chrono>

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
  EXPECT_TRUE(IsInputError(run({"--op", "all-reduce", "--devices", "32"}), {"--devices 32", "larger than the cluster", "2 to 16"}));
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

// Runs shardsim and returns how long it took (seconds) in `*seconds`.
CliResult Timed(const std::vector<std::string>& args, double* seconds) {
  const auto start = std::chrono::steady_clock::now();
  CliResult r = RunShardsim(args);
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

// The tester's case: 10M GPUs took 11.5 GB and over a minute. Refused at once, with the bound and
// why; the bound itself answers quickly.
TEST(CliLimitsTest, ClusterSizeBoundIsStatedAndFast) {
  double seconds = 0;
  EXPECT_TRUE(IsInputError(Timed({"collective", "--cluster", "dgx-h100:10000000", "--op", "all-reduce", "--bytes", "1GiB", "--devices", "8"}, &seconds),
                           {"--cluster dgx-h100:10000000", "10000000 devices", "at most 262144 devices", "100k-200k GPUs"}));
  EXPECT_LT(seconds, 2.0);
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--cluster", "tpu-v5p:16x16x16,slices=128"}), {"524288 devices", "at most 262144"}));
  json out;
  ASSERT_TRUE(IsJsonSuccess(Timed({"collective", "--cluster", "dgx-h100:262144", "--op", "all-reduce", "--bytes", "1GiB", "--devices", "8", "--json"},
                                  &seconds),
                            &out));
  EXPECT_LT(seconds, 20.0);  // about 0.5 s in a release build
  EXPECT_GT(out["results"][0]["time_s"].get<double>(), 0);
}

TEST(CliLimitsTest, AllToAllGroupBound) {
  EXPECT_TRUE(IsInputError(RunShardsim({"collective", "--cluster", "dgx-h100:8192", "--op", "all-to-all", "--bytes", "1M", "--devices", "8192"}),
                           {"--devices 8192", "67100672 flows", "at most 4096 devices"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"collective", "--cluster", "dgx-h100:16384", "--op", "all-to-all", "--bytes", "1M", "--mesh",
                                        "data=2,expert=8192", "--axes", "expert"}),
                           {"--mesh data=2,expert=8192 --axes expert", "at most 4096 devices"}));
}

// The tester's case: the SimGrid all-to-all over 4,096 chips ran 34 minutes and took 24 GiB.
TEST(CliLimitsTest, SimGridRunsTooBigAreRefusedBeforeStarting) {
  double seconds = 0;
  EXPECT_TRUE(IsInputError(Timed({"collective", "--cluster", "tpu-v5p:16x16x16", "--op", "all-to-all", "--bytes", "1GiB", "--devices", "4096",
                                  "--engine", "des"},
                                 &seconds),
                           {"--max-host-memory", "16773120 flows", "refused before starting", "analytic engine"}));
  EXPECT_LT(seconds, 2.0);
  EXPECT_TRUE(IsInputError(Timed({"collective", "--cluster", "tpu-v5p:8x8x8", "--op", "all-to-all", "--bytes", "1GiB", "--devices", "512",
                                  "--engine", "des", "--max-seconds", "10"},
                                 &seconds),
                           {"--max-seconds", "would take about", "at most 10 s (--max-seconds)"}));
  EXPECT_LT(seconds, 2.0);
  EXPECT_TRUE(IsInputError(Timed({"collective", "--cluster", "dgx-h100:64", "--op", "all-to-all", "--bytes", "1GiB", "--devices", "64", "--engine",
                                  "des", "--max-host-memory", "1MiB"},
                                 &seconds),
                           {"--max-host-memory", "would need about", "at most 1 MiB (--max-host-memory)"}));
  // The same on the step simulation: every device of 1,024 simulated, with 10 ms to do it.
  EXPECT_TRUE(IsInputError(Timed({"simulate", "--model", "gpt3-175b", "--cluster", "dgx-a100:1024", "--set", "mesh.tensor=8", "--set",
                                  "mesh.pipeline=16", "--set", "mesh.data=8", "--set", "global_batch_size=64", "--set", "seq_len=2048", "--no-fold",
                                  "--max-seconds", "0.01"},
                                 &seconds),
                           {"--max-seconds", "the SimGrid step simulation (1024 actor sets", "refused before starting", "leave folding on"}));
  EXPECT_LT(seconds, 10.0);
}

TEST(CliLimitsTest, LimitFlagsAreChecked) {
  const std::vector<std::string> base = {"collective", "--cluster", "dgx-h100:8", "--op", "all-reduce", "--bytes", "1M", "--devices", "8", "--engine", "des"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return RunShardsim(args);
  };
  EXPECT_TRUE(IsInputError(with({"--max-seconds", "0"}), {"--max-seconds", "greater than 0"}));
  EXPECT_TRUE(IsInputError(with({"--max-seconds", "nan"}), {"--max-seconds"}));
  EXPECT_TRUE(IsInputError(with({"--max-host-memory", "1.5"}), {"--max-host-memory", "fraction"}));
  EXPECT_TRUE(IsInputError(with({"--max-host-memory", "lots"}), {"--max-host-memory", "byte size"}));
  json out;
  ASSERT_TRUE(IsJsonSuccess(with({"--max-seconds", "60", "--max-host-memory", "0.5", "--json"}), &out));
  EXPECT_GT(out["des"]["estimated_wall_s"].get<double>(), 0);
  EXPECT_GT(out["des"]["estimated_peak_bytes"].get<double>(), 0);
}

}  // namespace
}  // namespace shardsim::cli_test
