// `shardsim calibrate` and `shardsim validate` end to end (mpirun, shardsim-runtime, the JSON),
// and their bad input: one line, exit status 2, before anything is launched where possible.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_test_util.h"

namespace shardsim::cli_test {
namespace {

using nlohmann::json;

class ValidateCliTest : public CliTest {};

TEST_F(ValidateCliTest, CalibratesThenValidatesATwoRankPlan) {
  const std::string cluster = PathOf("cluster.json");
  json summary;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"calibrate", "--out", cluster, "--repeats", "1", "--json"}), &summary));
  const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  EXPECT_EQ(summary["devices"], cores);
  EXPECT_GT(summary["peak_flop_per_s"].get<double>(), 1e9);  // any core does more than a GFLOP/s of sgemm
  EXPECT_GT(summary["kernels"].get<int>(), 10);              // the runtime's non-matmul ops
  json described;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"describe", "--cluster", cluster, "--json"}), &described));

  json v;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"validate", "--model", "tiny-dense", "--cluster", cluster, "--set", "mesh.data=2", "--set",
                                         "global_batch_size=4", "--set", "seq_len=64", "--steps", "3", "--report", PathOf("validate.html"), "--json"}),
                            &v));
  EXPECT_EQ(v["ranks"], 2);
  // The report page (drawn in Chromium by cli.validate_page_chromium, written here under the sanitizers too).
  std::ifstream page(PathOf("validate.html"));
  const std::string html((std::istreambuf_iterator<char>(page)), std::istreambuf_iterator<char>());
  EXPECT_NE(html.find("</html>"), std::string::npos);
  EXPECT_NE(html.find("tiny-dense"), std::string::npos);
  EXPECT_EQ(v["time_faithful"], cores >= 2);
  EXPECT_EQ(v["plan"]["dtype"], "fp32");  // the runtime trains in fp32: validate says so and predicts that
  EXPECT_EQ(v["steps_compared"], 2);
  const json& step = v["categories"].back();
  EXPECT_EQ(step["category"], "step");
  for (const char* k : {"measured_s", "estimated_s", "simulated_s"}) EXPECT_GT(step[k].get<double>(), 0) << k;
  // Every compute op of the trace is found in the program and predicted.
  bool qkv = false;
  for (const json& op : v["ops"]) {
    EXPECT_GT(op["predicted_s"].get<double>(), 0) << op.dump();
    qkv = qkv || op["op"] == "qkv";
  }
  EXPECT_TRUE(qkv);
  bool params = false;
  for (const json& m : v["memory"]) params = params || (m["category"] == "params" && m["measured_bytes"].get<double>() > 0);
  EXPECT_TRUE(params) << v["memory"].dump();
  // The calibration measured this one machine: a run over two hosts is refused before it starts.
  const std::string two = Write("two-hosts.txt", "10.213.0.1 slots=1\n10.213.0.2 slots=1\n");
  EXPECT_TRUE(IsInputError(RunShardsim({"validate", "--model", "tiny-dense", "--cluster", cluster, "--hostfile", two, "--set", "mesh.data=2", "--set",
                                        "global_batch_size=4", "--set", "seq_len=64"}),
                           {"--hostfile", "on 2 hosts", "puts them on 1 host"}));
}

TEST_F(ValidateCliTest, BadInputIsOneLine) {
  EXPECT_TRUE(IsInputError(RunShardsim({"validate", "--set", "mesh.data=2"}), {"validate", "--model"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"validate", "--model", "tiny-dense", "--set", "mesh.data=2", "--set", "global_batch_size=4", "--set",
                                        "seq_len=64", "--steps", "1"}),
                           {"--steps", "2 to 1000"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"validate", "--model", "tiny-dense", "--cluster", "dgx-h100:8", "--set", "mesh.data=2", "--set",
                                        "global_batch_size=4", "--set", "seq_len=64"}),
                           {"dgx-h100:8", "calibrate"}));
  // An FP8 plan's own fields go with its dtype (the runtime trains in fp32): the same error as
  // above, not one about them.
  EXPECT_TRUE(IsInputError(RunShardsim({"validate", "--model", "tiny-dense", "--cluster", "dgx-h100:8", "--set", "mesh.fsdp=2", "--set", "zero_stage=3",
                                        "--set", "dtype=fp8", "--set", "fp8_recipe=tensorwise", "--set", "param_gather_dtype=fp8", "--set",
                                        "saved_input_dtype=fp8", "--set", "mesh.tensor=2", "--set", "sequence_parallel=true", "--set",
                                        "tensor_gather_dtype=fp8", "--set", "global_batch_size=4", "--set", "seq_len=64"}),
                           {"dgx-h100:8", "calibrate"}));
  // So does a deduplicating dispatcher (the runtime sends every copy): the same error again.
  EXPECT_TRUE(IsInputError(RunShardsim({"validate", "--model", "tiny-moe", "--cluster", "dgx-h100:8", "--set", "mesh.expert=2", "--set",
                                        "ep_dispatcher=deepep", "--set", "global_batch_size=4", "--set", "seq_len=64"}),
                           {"dgx-h100:8", "calibrate"}));
  // And eager elementwise kernels (the runtime's own read and write each tensor once).
  EXPECT_TRUE(IsInputError(RunShardsim({"validate", "--model", "tiny-dense", "--cluster", "dgx-h100:8", "--set", "mesh.data=2", "--set",
                                        "elementwise_kernels=eager", "--set", "global_batch_size=4", "--set", "seq_len=64"}),
                           {"dgx-h100:8", "calibrate"}));
  // And round-robin routing (the runtime's router picks by score).
  EXPECT_TRUE(IsInputError(RunShardsim({"validate", "--model", "tiny-moe", "--cluster", "dgx-h100:8", "--set", "mesh.expert=2", "--set",
                                        "expert_routing=round-robin", "--set", "global_batch_size=4", "--set", "seq_len=64"}),
                           {"dgx-h100:8", "calibrate"}));
  const std::string small = Write("hosts.txt", "10.0.0.1 slots=1  # one core\n");
  EXPECT_TRUE(IsInputError(RunShardsim({"validate", "--model", "tiny-dense", "--hostfile", small, "--set", "mesh.data=2", "--set",
                                        "global_batch_size=4", "--set", "seq_len=64"}),
                           {"hosts.txt", "1 slots", "2 ranks"}));
  const std::string bad = Write("bad.txt", "a slots=two\n");
  EXPECT_TRUE(IsInputError(RunShardsim({"calibrate", "--hostfile", bad}), {"bad.txt:1", "slots=two"}));
  const std::string uneven = Write("uneven.txt", "a slots=2\nb slots=1\n");
  EXPECT_TRUE(IsInputError(RunShardsim({"calibrate", "--hostfile", uneven}), {"uneven.txt", "same slots"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"calibrate", "--hostfile", PathOf("missing.txt")}), {"missing.txt", "cannot be read"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"calibrate", "--repeats", "0"}), {"--repeats", "1 to 20"}));
  // A preset of this machine's cores has rates from the catalogue, not a calibration.
  EXPECT_TRUE(IsInputError(RunShardsim({"validate", "--model", "tiny-dense", "--cluster", "local:2", "--set", "mesh.data=2", "--set",
                                        "global_batch_size=4", "--set", "seq_len=64"}),
                           {"local:2", "not a calibrated cluster"}));
  const std::string typo = Write("typo.txt", "localhost slot=2\n");
  EXPECT_TRUE(IsInputError(RunShardsim({"calibrate", "--hostfile", typo}), {"typo.txt:1", "slot=2"}));
  // An output nobody can write stops at once (the ranks do not wait for each other).
  EXPECT_TRUE(IsInputError(RunShardsim({"calibrate", "--out", PathOf("no/such/folder/c.json")}), {"--out", "cannot be written"}));
}

}  // namespace
}  // namespace shardsim::cli_test
