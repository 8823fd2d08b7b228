// Every file in examples/ works with the command it is meant for; the JSON it produces is
// checked field by field against what the file says.
#include <fstream>

#include "tests/cli/cli_test_util.h"

namespace shardsim::cli_test {
namespace {

using nlohmann::json;

std::string Example(const std::string& name) { return std::string(SHARDSIM_EXAMPLES_DIR) + "/" + name; }

json ReadExample(const std::string& name) {
  std::ifstream in(Example(name));
  return json::parse(in);
}

TEST(CliExamplesTest, ModelFileDescribes) {
  json out;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"describe", "--model", Example("my-1b.model.json"), "--json"}), &out));
  const json file = ReadExample("my-1b.model.json");
  EXPECT_EQ(out["model"]["spec"], file);
  // Llama 3.2 1B, whose shape this example copies, has 1.24B parameters (Meta's model card).
  EXPECT_NEAR(out["model"]["params_total"].get<double>() / 1.24e9, 1.0, 0.01);
}

TEST(CliExamplesTest, ClusterFileDescribes) {
  json out;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"describe", "--cluster", Example("a100-32-oversubscribed.cluster.json"), "--json"}), &out));
  const json file = ReadExample("a100-32-oversubscribed.cluster.json");
  EXPECT_EQ(out["cluster"]["devices"], file["topology"]["devices_per_node"].get<int>() * file["topology"]["nodes"].get<int>());
  EXPECT_DOUBLE_EQ(out["cluster"]["spec"]["efficiency"]["matmul"].get<double>(), file["efficiency"]["matmul"].get<double>());
  EXPECT_DOUBLE_EQ(out["cluster"]["spec"]["topology"]["oversubscription"].get<double>(), 2.0);
}

struct PlanExample {
  const char* file;
  const char* model;
  const char* cluster;
};

TEST(CliExamplesTest, PlanFilesAreValidForTheirModelAndCluster) {
  for (const PlanExample& e : {PlanExample{"llama3-70b-dgx-h100-64.plan.json", "llama3-70b", "dgx-h100:64"},
                               PlanExample{"mixtral-8x7b-tpu-v5p-128.plan.json", "mixtral-8x7b", "tpu-v5p:4x4x8"}}) {
    json out;
    ASSERT_TRUE(IsJsonSuccess(
        RunShardsim({"describe", "--model", e.model, "--cluster", e.cluster, "--plan", Example(e.file), "--json"}), &out))
        << e.file;
    const json file = ReadExample(e.file);
    int64_t product = 1, replicas = 1;
    for (const auto& [axis, size] : file["mesh"].items()) {
      product *= size.get<int64_t>();
      if (axis == "data" || axis == "fsdp" || axis == "expert") replicas *= size.get<int64_t>();
    }
    EXPECT_EQ(out["plan"]["devices"], product) << e.file;
    EXPECT_EQ(out["cluster"]["devices"], product) << e.file;
    EXPECT_EQ(out["plan"]["batch_replicas"], replicas) << e.file;
    EXPECT_EQ(out["plan"]["tokens_per_step"], file["global_batch_size"].get<int64_t>() * file["seq_len"].get<int64_t>()) << e.file;
    for (const auto& [key, value] : file.items()) {
      if (key == "mesh") continue;  // axes the file leaves out are written back as 1
      EXPECT_EQ(out["plan"]["spec"][key], value) << e.file << " " << key;
    }
    for (const auto& [axis, size] : file["mesh"].items()) EXPECT_EQ(out["plan"]["spec"]["mesh"][axis], size) << e.file;
  }
}

}  // namespace
}  // namespace shardsim::cli_test
