// `shardsim estimate` of MoE plans' expert all-to-alls: the deduplicating dispatcher
// (ep_dispatcher deepep) and the routing it lays its rows out from (expert_routing).
#include "tests/cli/cli_test_util.h"

namespace shardsim::cli_test {
namespace {

using nlohmann::json;

// `estimate` of Llama 3 8B (dense) on 8 H100s with `extra` arguments.
CliResult Llama8bWith(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--set", "mesh.data=8", "--set", "global_batch_size=8", "--set", "seq_len=4096"};
  args.insert(args.end(), extra.begin(), extra.end());
  return RunShardsim(args);
}

// The deduplicating dispatcher: its rows per token printed, a faster step across nodes; refused
// on a torus (no nodes), for a dense model, and by `plan` at once when fixed for a dense model.
TEST(CliEstimateTest, DeepEpDispatcherIsCheckedAndSendsLess) {
  const std::vector<std::string> moe = {"estimate", "--model", "deepseek-v3", "--cluster", "dgx-h100:16", "--set", "mesh.expert=16", "--set",
                                        "global_batch_size=16", "--set", "seq_len=2048"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = moe;
    args.insert(args.end(), extra.begin(), extra.end());
    return RunShardsim(args);
  };
  const CliResult text = with({"--set", "ep_dispatcher=deepep"});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("rows per token leave its node over the network"), std::string::npos) << text.out;
  json copies, deduplicated;
  ASSERT_TRUE(IsJsonSuccess(with({"--json"}), &copies));
  ASSERT_TRUE(IsJsonSuccess(with({"--set", "ep_dispatcher=deepep", "--json"}), &deduplicated));
  EXPECT_LT(deduplicated["step_time_s"].get<double>(), copies["step_time_s"].get<double>());
  EXPECT_FALSE(copies.contains("expert_dispatch"));
  ASSERT_TRUE(deduplicated.contains("expert_dispatch"));
  EXPECT_EQ(deduplicated["expert_dispatch"]["nodes"], 2);
  EXPECT_LT(deduplicated["expert_dispatch"]["network_rows_per_token"].get<double>(), deduplicated["expert_dispatch"]["routed_copies_per_token"].get<double>());
  EXPECT_TRUE(IsInputError(with({"--set", "ep_dispatcher=deep-ep"}), {"ep_dispatcher", "alltoall, deepep"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"estimate", "--model", "mixtral-8x7b", "--cluster", "tpu-v5p:4x4x1", "--set", "mesh.expert=8", "--set", "mesh.data=2",
                                        "--set", "global_batch_size=16", "--set", "seq_len=2048", "--set", "ep_dispatcher=deepep"}),
                           {"ep_dispatcher", "torus"}));
  EXPECT_TRUE(IsInputError(Llama8bWith({"--set", "ep_dispatcher=deepep"}), {"ep_dispatcher", "dense"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"plan", "--model", "llama3-8b", "--cluster", "dgx-h100:16", "--global-batch-tokens", "1M", "--seq-len", "4096",
                                        "--set", "ep_dispatcher=deepep"}),
                           {"ep_dispatcher", "none of"}));
}

// Round-robin routing (expert_routing): a token's experts on neighbouring GPUs, so the
// deduplicating dispatcher sends fewer rows over the network and the step is shorter; the
// all-to-all that sends every copy costs the same; bad values and dense models refused.
TEST(CliEstimateTest, RoundRobinRoutingSendsFewerRows) {
  const std::vector<std::string> moe = {"estimate", "--model", "deepseek-v3", "--cluster", "dgx-h100:64", "--set", "mesh.expert=64", "--set",
                                        "global_batch_size=64", "--set", "seq_len=2048", "--json"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = moe;
    args.insert(args.end(), extra.begin(), extra.end());
    json out;
    EXPECT_TRUE(IsJsonSuccess(RunShardsim(args), &out));
    return out;
  };
  const json uniform = with({"--set", "ep_dispatcher=deepep"});
  const json round_robin = with({"--set", "ep_dispatcher=deepep", "--set", "expert_routing=round-robin"});
  EXPECT_NEAR(round_robin["expert_dispatch"]["network_rows_per_token"].get<double>(), 7.0 / 8, 1e-9);  // one node a token, 7 in 8 not its own
  EXPECT_GT(uniform["expert_dispatch"]["network_rows_per_token"].get<double>(), 2);  // 4 of 8 groups (node-limited)
  EXPECT_LT(round_robin["step_time_s"].get<double>(), uniform["step_time_s"].get<double>());
  EXPECT_DOUBLE_EQ(with({"--set", "expert_routing=round-robin"})["step_time_s"].get<double>(), with({})["step_time_s"].get<double>());
  const CliResult text = RunShardsim({"estimate", "--model", "deepseek-v3", "--cluster", "dgx-h100:64", "--set", "mesh.expert=64", "--set", "global_batch_size=64",
                                      "--set", "seq_len=2048", "--set", "ep_dispatcher=deepep", "--set", "expert_routing=round-robin"});
  EXPECT_NE(text.out.find("round-robin routing"), std::string::npos) << text.out;
  EXPECT_TRUE(IsInputError(RunShardsim({"estimate", "--model", "deepseek-v3", "--cluster", "dgx-h100:64", "--set", "mesh.expert=64", "--set",
                                        "global_batch_size=64", "--set", "seq_len=2048", "--set", "expert_routing=roundrobin"}),
                           {"expert_routing", "uniform, round-robin"}));
  EXPECT_TRUE(IsInputError(Llama8bWith({"--set", "expert_routing=round-robin"}), {"expert_routing", "dense"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"plan", "--model", "llama3-8b", "--cluster", "dgx-h100:16", "--global-batch-tokens", "1M", "--seq-len", "4096",
                                        "--set", "expert_routing=round-robin"}),
                           {"expert_routing", "none of"}));
}

// `plan --json` reports each plan's dispatch rows as `estimate --json` does for the same plan.
TEST(CliEstimateTest, PlanReportsTheDispatchRowsEstimateDoes) {
  json planned;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"plan", "--model", "mixtral-8x7b", "--cluster", "dgx-h100:16", "--global-batch-tokens", "1M", "--seq-len", "4096", "--set",
                                         "ep_dispatcher=deepep", "--set", "mesh.expert=8", "--top", "2", "--json"}),
                            &planned));
  ASSERT_FALSE(planned["plans"].empty());
  const TempDir dir;
  for (const json& p : planned["plans"]) {
    ASSERT_TRUE(p.contains("expert_dispatch")) << p["plan"].dump();
    json estimated;
    ASSERT_TRUE(IsJsonSuccess(RunShardsim({"estimate", "--model", "mixtral-8x7b", "--cluster", "dgx-h100:16", "--plan", dir.Write("p.json", p["plan"].dump()), "--json"}),
                              &estimated));
    EXPECT_EQ(p["expert_dispatch"], estimated["expert_dispatch"]);
  }
}

}  // namespace
}  // namespace shardsim::cli_test
