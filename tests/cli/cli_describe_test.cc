// Success paths, end to end: `presets`, `describe` (presets, Hugging Face imports, plans), the
// --write-* round trips and every subcommand's --help.
#include <cctype>
#include <cmath>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_test_util.h"

namespace shardsim::cli_test {
namespace {

using nlohmann::json;

json ReadJson(const std::string& path) { return json::parse(std::ifstream(path)); }

double RelativeError(double value, double reference) { return std::fabs(value / reference - 1.0); }

class CliDescribeTest : public CliTest {
 protected:
  // Runs `shardsim describe ARGS --json` and returns its object (empty on failure, recorded).
  json DescribeJson(std::vector<std::string> args) {
    args.insert(args.begin(), "describe");
    args.push_back("--json");
    json parsed = json::object();
    EXPECT_TRUE(IsJsonSuccess(RunShardsim(args), &parsed));
    return parsed;
  }
};

TEST_F(CliDescribeTest, PresetsJsonListsAllModelsAndClusters) {
  json presets;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"presets", "--json"}), &presets));
  std::set<std::string> models, clusters, catalogue;
  for (const json& m : presets.at("models")) models.insert(m.at("name").get<std::string>());
  for (const json& c : presets.at("clusters")) clusters.insert(c.at("name").get<std::string>());
  const json hardware = ReadJson(SHARDSIM_HARDWARE_JSON);
  for (const auto& item : hardware.at("systems").items()) catalogue.insert(item.key());
  EXPECT_EQ(models, (std::set<std::string>{"gpt3-175b", "llama3-8b", "llama3-70b", "llama3-405b", "mixtral-8x7b", "mixtral-8x22b",
                                           "deepseek-v3", "gpt-oss-20b", "gpt-oss-120b", "nemotron-3-nano-30b-a3b", "tiny-dense", "tiny-moe"}));
  EXPECT_EQ(clusters, catalogue);
  EXPECT_FALSE(presets.at("pipeline_schedules").empty());
  EXPECT_FALSE(presets.at("recompute").empty());
  EXPECT_FALSE(presets.at("hf_model_types").empty());
}

TEST_F(CliDescribeTest, PresetsTextSucceeds) {
  const CliResult r = RunShardsim({"presets"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_NE(r.out.find("llama3-8b"), std::string::npos);
  EXPECT_NE(r.out.find("dgx-h100"), std::string::npos);
}

// Published figures come from `presets --json`, so the test follows the presets' own sources.
TEST_F(CliDescribeTest, PresetParamCountsMatchPublishedFigures) {
  json presets;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"presets", "--json"}), &presets));
  int checked = 0;
  for (const json& preset : presets.at("models")) {
    if (!preset.contains("published_params_total")) continue;
    const std::string name = preset.at("name").get<std::string>();
    SCOPED_TRACE(name);
    const json model = DescribeJson({"--model", name}).value("model", json::object());
    ASSERT_TRUE(model.contains("params_total"));
    const double published = preset.at("published_params_total").get<double>();
    EXPECT_LE(RelativeError(model.at("params_total").get<double>(), published), 0.01)
        << model.at("params_total") << " vs published " << published;
    EXPECT_EQ(model.at("params_total"), preset.at("params_total"));
    ++checked;
  }
  EXPECT_GE(checked, 5);
}

TEST_F(CliDescribeTest, TextOutputSucceeds) {
  const CliResult r = RunShardsim({"describe", "--model", "mixtral-8x7b", "--cluster", "tpu-v5p:4x4x4", "--set", "mesh.data=8",
                                   "--set", "mesh.expert=8", "--set", "global_batch_size=64", "--set", "seq_len=4096"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_NE(r.out.find("Model mixtral-8x7b"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Plan: valid"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("expert_axes"), std::string::npos) << r.out;  // no fold, no line
  // A folded plan says what its experts are split over.
  const CliResult folded = RunShardsim({"describe", "--model", "mixtral-8x7b", "--cluster", "tpu-v5p:4x4x4", "--set", "mesh.data=8", "--set",
                                        "mesh.expert=8", "--set", "expert_axes=data,expert", "--set", "global_batch_size=64", "--set", "seq_len=4096"});
  EXPECT_EQ(folded.exit_code, 2);  // 64 expert ranks for 8 experts: refused, naming the field
  EXPECT_NE(folded.err.find("expert_axes"), std::string::npos) << folded.err;
  const CliResult tensor = RunShardsim({"describe", "--model", "mixtral-8x7b", "--cluster", "tpu-v5p:4x4x4", "--set", "mesh.data=8", "--set",
                                        "mesh.tensor=8", "--set", "sequence_parallel=true", "--set", "expert_axes=tensor", "--set",
                                        "global_batch_size=64", "--set", "seq_len=4096"});
  EXPECT_EQ(tensor.exit_code, 0) << tensor.err;
  EXPECT_NE(tensor.out.find("experts    split over tensor (expert_axes)"), std::string::npos) << tensor.out;
}

// --- Hugging Face config.json import, checked against published parameter counts. ---

struct HfCase {
  std::string name;    // the folder the config.json is written into (becomes the model's name)
  std::string config;  // the released config.json's hyper-parameters (extra keys included on purpose)
  double published;    // published total parameter count
};

class CliHfImportTest : public CliTest, public ::testing::WithParamInterface<HfCase> {};

TEST_P(CliHfImportTest, ParamsMatchPublishedCount) {
  const HfCase& c = GetParam();
  const std::string path = Write(c.name + "/config.json", c.config);
  json report;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"describe", "--model", path, "--json"}), &report));
  const json& model = report.at("model");
  EXPECT_EQ(model.at("name"), c.name);
  EXPECT_LE(RelativeError(model.at("params_total").get<double>(), c.published), 0.02)
      << model.at("params_total") << " vs published " << c.published;
}

std::string HfCaseName(const ::testing::TestParamInfo<HfCase>& info) {
  std::string name;
  for (char ch : info.param.name) name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return name;
}

// Hyper-parameters are those of the released config.json files on the Hugging Face Hub.
INSTANTIATE_TEST_SUITE_P(
    PublicModels, CliHfImportTest,
    ::testing::Values(
        // meta-llama/Meta-Llama-3-8B: 8.03B parameters (Meta Llama 3 model card).
        HfCase{"Meta-Llama-3-8B",
               R"({"architectures": ["LlamaForCausalLM"], "attention_bias": false, "hidden_act": "silu", "hidden_size": 4096,
                   "intermediate_size": 14336, "max_position_embeddings": 8192, "model_type": "llama", "num_attention_heads": 32,
                   "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_scaling": null,
                   "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16", "vocab_size": 128256})",
               8.03e9},
        // mistralai/Mistral-7B-v0.1: 7.24B parameters (Hugging Face model page, safetensors count).
        HfCase{"Mistral-7B-v0.1",
               R"({"architectures": ["MistralForCausalLM"], "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336,
                   "max_position_embeddings": 32768, "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 32,
                   "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096,
                   "tie_word_embeddings": false, "torch_dtype": "bfloat16", "vocab_size": 32000})",
               7.24e9},
        // mistralai/Mixtral-8x7B-v0.1: 46.7B total parameters (Mistral AI, "Mixtral of experts" release).
        HfCase{"Mixtral-8x7B-v0.1",
               R"({"architectures": ["MixtralForCausalLM"], "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336,
                   "max_position_embeddings": 32768, "model_type": "mixtral", "num_attention_heads": 32, "num_experts_per_tok": 2,
                   "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8, "rms_norm_eps": 1e-05,
                   "rope_theta": 1000000.0, "router_aux_loss_coef": 0.02, "sliding_window": null, "tie_word_embeddings": false,
                   "vocab_size": 32000})",
               46.7e9},
        // Qwen/Qwen2-7B: 7.62B parameters (Hugging Face model page, safetensors count; the same shapes
        // as Qwen2.5-7B, whose model card gives 7.61B).
        HfCase{"Qwen2-7B",
               R"({"architectures": ["Qwen2ForCausalLM"], "hidden_act": "silu", "hidden_size": 3584, "intermediate_size": 18944,
                   "max_position_embeddings": 131072, "max_window_layers": 28, "model_type": "qwen2", "num_attention_heads": 28,
                   "num_hidden_layers": 28, "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
                   "sliding_window": 131072, "tie_word_embeddings": false, "use_sliding_window": false, "vocab_size": 152064})",
               7.62e9},
        // deepseek-ai/DeepSeek-V3: 671B total parameters, excluding the 14B multi-token-prediction
        // module (DeepSeek-V3 Technical Report, abstract and section 4.2).
        HfCase{"DeepSeek-V3",
               R"({"architectures": ["DeepseekV3ForCausalLM"], "first_k_dense_replace": 3, "hidden_act": "silu", "hidden_size": 7168,
                   "intermediate_size": 18432, "kv_lora_rank": 512, "max_position_embeddings": 163840, "model_type": "deepseek_v3",
                   "moe_intermediate_size": 2048, "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1,
                   "norm_topk_prob": true, "num_attention_heads": 128, "num_experts_per_tok": 8, "num_hidden_layers": 61,
                   "num_key_value_heads": 128, "num_nextn_predict_layers": 1, "q_lora_rank": 1536, "qk_nope_head_dim": 128,
                   "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06, "rope_theta": 10000, "tie_word_embeddings": false,
                   "topk_group": 4, "topk_method": "noaux_tc", "v_head_dim": 128, "vocab_size": 129280})",
               671e9},
        // openai-community/gpt2 (GPT-2 small): 124M parameters (124,439,808; Hugging Face model page).
        HfCase{"gpt2",
               R"({"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1, "embd_pdrop": 0.1,
                   "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_inner": null,
                   "n_layer": 12, "n_positions": 1024, "resid_pdrop": 0.1, "vocab_size": 50257})",
               124.44e6},
        // EleutherAI/pythia-1.4b: 1,414,647,808 parameters (Biderman et al. 2023, "Pythia", Table 1
        // and the Pythia README).
        HfCase{"pythia-1.4b",
               R"({"architectures": ["GPTNeoXForCausalLM"], "hidden_act": "gelu", "hidden_size": 2048, "intermediate_size": 8192,
                   "layer_norm_eps": 1e-05, "max_position_embeddings": 2048, "model_type": "gpt_neox", "num_attention_heads": 16,
                   "num_hidden_layers": 24, "rotary_emb_base": 10000, "rotary_pct": 0.25, "tie_word_embeddings": false,
                   "use_parallel_residual": true, "vocab_size": 50304})",
               1414647808.0}),
    HfCaseName);

// The imported Llama-3-8B config and the llama3-8b preset describe the same network.
TEST_F(CliDescribeTest, HfLlamaImportMatchesPreset) {
  const json config = {{"model_type", "llama"},         {"hidden_size", 4096}, {"intermediate_size", 14336},
                       {"max_position_embeddings", 8192}, {"num_attention_heads", 32}, {"num_hidden_layers", 32},
                       {"num_key_value_heads", 8},        {"vocab_size", 128256}};
  const json imported = DescribeJson({"--model", WriteJson("Meta-Llama-3-8B/config.json", config)});
  const json preset = DescribeJson({"--model", "llama3-8b"});
  ASSERT_TRUE(imported.contains("model") && preset.contains("model"));
  EXPECT_EQ(imported["model"]["params_total"], preset["model"]["params_total"]);
  EXPECT_EQ(imported["model"]["flops_per_token"], preset["model"]["flops_per_token"]);
}

// --- --write-model, --write-cluster and --write-plan read back to the identical spec. ---

TEST_F(CliDescribeTest, WriteModelRoundTrip) {
  const std::string gpt2 = WriteJson("gpt2/config.json", {{"model_type", "gpt2"}, {"n_embd", 768}, {"n_head", 12},
                                                          {"n_layer", 12}, {"n_positions", 1024}, {"vocab_size", 50257}});
  for (const std::string& model : {std::string("llama3-8b"), std::string("gpt3-175b"), std::string("deepseek-v3"),
                                   std::string("tiny-moe"), gpt2}) {
    SCOPED_TRACE(model);
    const std::string written = PathOf("written_model.json");
    const json first = DescribeJson({"--model", model, "--write-model", written});
    const json second = DescribeJson({"--model", written});
    ASSERT_TRUE(first.contains("model") && second.contains("model"));
    EXPECT_EQ(first["model"]["spec"], second["model"]["spec"]);
    EXPECT_EQ(first["model"]["spec"], ReadJson(written));
    EXPECT_EQ(first["model"]["params_total"], second["model"]["params_total"]);
  }
}

// Whatever --write-model writes must read back, even for an imported config beyond the model
// JSON's own size limits (the import must then reject it, or the reader accept it).
TEST_F(CliDescribeTest, WriteModelOfLargeHfImportReadsBack) {
  const json config = {{"model_type", "llama"},   {"num_hidden_layers", 200000}, {"hidden_size", 64},
                       {"num_attention_heads", 1}, {"intermediate_size", 64},     {"vocab_size", 100000000}};
  const std::string written = PathOf("written_model.json");
  const CliResult first = RunShardsim({"describe", "--model", WriteJson("deep/config.json", config), "--write-model", written});
  ASSERT_TRUE(first.exited) << first.command;
  if (first.exit_code == 2) {  // the import rejects it: fine, if it does so properly
    EXPECT_TRUE(IsInputError(first, {"deep/config.json"}));
    return;
  }
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const CliResult second = RunShardsim({"describe", "--model", written});
  EXPECT_EQ(second.exit_code, 0) << second.command << "\n" << second.err;
}

TEST_F(CliDescribeTest, WriteClusterRoundTrip) {
  for (const std::string cluster : {"dgx-h100:64", "dgx-a100:1024,fabric=fat-tree,oversubscription=2", "tpu-v5p:8x8x8,slices=2",
                                    "tpu-v5e:16x16", "gb200-nvl72:144", "dgx-b300:16", "gb300-nvl72:128,domain=64", "local:4"}) {
    SCOPED_TRACE(cluster);
    const std::string written = PathOf("written_cluster.json");
    const json first = DescribeJson({"--cluster", cluster, "--write-cluster", written});
    const json second = DescribeJson({"--cluster", written});
    ASSERT_TRUE(first.contains("cluster") && second.contains("cluster"));
    EXPECT_EQ(first["cluster"]["spec"], second["cluster"]["spec"]);
    EXPECT_EQ(first["cluster"]["devices"], second["cluster"]["devices"]);
  }
}

// FILE.json:SIZE: a cluster file (fitted or calibrated at one size) on its system at another, its
// chip, links and efficiencies kept; the catalogue's preset at that size with the same figures is
// the same cluster. A file whose system is no preset, or a size the system cannot take, is refused.
TEST_F(CliDescribeTest, ClusterFileAtAnotherSize) {
  const std::string written = PathOf("fitted.cluster.json");
  (void)DescribeJson({"--cluster", "dgx-h100:1024", "--write-cluster", written});
  json fitted = ReadJson(written);
  fitted["efficiency"]["matmul"] = 0.5;
  fitted["links"]["infiniband"]["efficiency"] = 0.7;
  const std::string path = WriteJson("fitted.cluster.json", fitted);
  const json resized = DescribeJson({"--cluster", path + ":64"});
  EXPECT_EQ(resized["cluster"]["devices"], 64);
  EXPECT_EQ(resized["cluster"]["spec"]["efficiency"]["matmul"], 0.5);
  EXPECT_EQ(resized["cluster"]["spec"]["links"]["infiniband"]["efficiency"], 0.7);
  json preset = DescribeJson({"--cluster", "dgx-h100:64"})["cluster"]["spec"];
  preset["efficiency"] = fitted["efficiency"], preset["links"]["infiniband"]["efficiency"] = 0.7;
  json got = resized["cluster"]["spec"];
  got.erase("name"), preset.erase("name");
  EXPECT_EQ(got, preset);
  // A size the system cannot take: the hint names sizes on the file, not the bare preset.
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--cluster", path + ":65"}), {"--cluster " + path + ":65", "use " + path + ":64"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--cluster", PathOf("missing.json") + ":64"}), {"no file " + PathOf("missing.json")}));
  // The file's options (its name's) come along unless SIZE gives its own.
  const std::string oversubscribed = PathOf("oversubscribed.cluster.json");
  (void)DescribeJson({"--cluster", "dgx-h100:1024,oversubscription=2", "--write-cluster", oversubscribed});
  json kept = DescribeJson({"--cluster", oversubscribed + ":64"})["cluster"]["spec"];
  json preset_kept = DescribeJson({"--cluster", "dgx-h100:64,oversubscription=2"})["cluster"]["spec"];
  kept.erase("name"), preset_kept.erase("name");
  EXPECT_EQ(kept, preset_kept);
  EXPECT_EQ(DescribeJson({"--cluster", oversubscribed + ":64,oversubscription=1"})["cluster"]["spec"]["topology"],
            DescribeJson({"--cluster", "dgx-h100:64"})["cluster"]["spec"]["topology"]);
  json custom = fitted;
  custom["system"] = "custom";
  const std::string custom_path = WriteJson("custom.cluster.json", custom);
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--cluster", custom_path + ":64"}), {"system 'custom' is no catalogue system", "FILE.json:SIZE"}));
}

TEST_F(CliDescribeTest, WritePlanRoundTrip) {
  const std::string written = PathOf("written_plan.json");
  const json first = DescribeJson({"--model", "llama3-70b", "--cluster", "dgx-h100:64", "--set", "mesh.data=2", "--set",
                                   "mesh.tensor=8", "--set", "mesh.pipeline=4", "--set", "global_batch_size=64", "--set",
                                   "seq_len=8192", "--set", "pipeline_schedule=interleaved-1f1b", "--set", "virtual_stages=5",
                                   "--set", "recompute=selective", "--set", "sequence_parallel=true", "--set", "zero_stage=1",
                                   "--set", "overlap.tensor=true", "--write-plan", written});
  const json second = DescribeJson({"--model", "llama3-70b", "--cluster", "dgx-h100:64", "--plan", written});
  ASSERT_TRUE(first.contains("plan") && second.contains("plan"));
  EXPECT_EQ(first["plan"]["spec"], second["plan"]["spec"]);
  EXPECT_EQ(first["plan"]["spec"], ReadJson(written));
  EXPECT_EQ(second["plan"]["spec"]["virtual_stages"], 5);
  EXPECT_EQ(second["plan"]["spec"]["recompute"], "selective");
}

// --- Valid plans. ---

TEST_F(CliDescribeTest, ValidPlanFromFile) {
  const json plan = {{"mesh", {{"data", 4}, {"tensor", 8}, {"pipeline", 2}}}, {"global_batch_size", 256}, {"seq_len", 8192},
                     {"micro_batch_size", 2}};
  const json report = DescribeJson({"--model", "llama3-8b", "--cluster", "dgx-h100:64", "--plan", WriteJson("plan.json", plan)});
  ASSERT_TRUE(report.contains("plan"));
  EXPECT_EQ(report["plan"]["valid"], true);
  EXPECT_EQ(report["plan"]["devices"], 64);
  EXPECT_EQ(report["plan"]["batch_replicas"], 4);
  EXPECT_EQ(report["plan"]["num_microbatches"], 32);
  EXPECT_EQ(report["plan"]["tokens_per_step"], 256 * 8192);
  EXPECT_TRUE(report.contains("model") && report.contains("cluster"));
}

TEST_F(CliDescribeTest, ValidPlanFromSetOnly) {
  const json report = DescribeJson({"--model", "mixtral-8x7b", "--cluster", "tpu-v5p:4x4x4", "--set", "mesh.data=2", "--set",
                                    "mesh.expert=8", "--set", "mesh.tensor=4", "--set", "global_batch_size=64", "--set",
                                    "seq_len=4096"});
  ASSERT_TRUE(report.contains("plan"));
  EXPECT_EQ(report["plan"]["valid"], true);
  EXPECT_EQ(report["plan"]["devices"], 64);
  EXPECT_EQ(report["plan"]["spec"]["mesh"]["expert"], 8);
  EXPECT_EQ(report["plan"]["batch_replicas"], 16);
}

TEST_F(CliDescribeTest, SetOverridesPlanFile) {
  const json plan = {{"mesh", {{"data", 8}}}, {"global_batch_size", 64}, {"seq_len", 4096}};
  const json report = DescribeJson({"--model", "llama3-8b", "--cluster", "dgx-h100:8", "--plan", WriteJson("plan.json", plan),
                                    "--set", "mesh.data=4", "--set", "mesh.tensor=2"});
  ASSERT_TRUE(report.contains("plan"));
  EXPECT_EQ(report["plan"]["spec"]["mesh"]["data"], 4);
  EXPECT_EQ(report["plan"]["spec"]["mesh"]["tensor"], 2);
}

// --- --help of the tool and of every subcommand. ---

class CliHelpTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CliHelpTest, ExitsZeroWithUsage) {
  std::vector<std::string> args;
  if (!GetParam().empty()) args.push_back(GetParam());
  args.push_back("--help");
  const CliResult r = RunShardsim(args);
  EXPECT_TRUE(r.exited);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_NE(r.out.find("Usage"), std::string::npos) << r.out;
}

std::string HelpCaseName(const ::testing::TestParamInfo<std::string>& info) {
  return info.param.empty() ? std::string("Tool") : info.param;
}

INSTANTIATE_TEST_SUITE_P(Subcommands, CliHelpTest,
                         ::testing::Values("", "presets", "describe", "collective", "estimate", "simulate", "plan", "run",
                                           "calibrate", "validate"),
                         HelpCaseName);

TEST(CliVersionTest, PrintsVersion) {
  const CliResult r = RunShardsim({"--version"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("shardsim ", 0), 0u) << r.out;
}

// --mesh places the mesh on the cluster: the innermost axis on NVLink, the outer on InfiniBand.
TEST(CliMeshAxesTest, DescribeShowsTheLinksOfEachAxis) {
  json out;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"describe", "--cluster", "dgx-h100:64", "--mesh", "data=8,tensor=8", "--json"}), &out));
  ASSERT_EQ(out["mesh_axes"].size(), 2u);
  EXPECT_EQ(out["mesh_axes"][0]["axis"], "tensor");
  EXPECT_EQ(out["mesh_axes"][0]["path"][0], "nvlink");
  EXPECT_EQ(out["mesh_axes"][1]["axis"], "data");
  EXPECT_EQ(out["mesh_axes"][1]["path"][0], "infiniband (nic)");
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"describe", "--cluster", "tpu-v5p:4x4x4", "--mesh", "data=4,fsdp=4,tensor=4", "--json"}), &out));
  for (const auto& axis : out["mesh_axes"]) EXPECT_EQ(axis["closing_hops"], 1) << axis.dump();
}

TEST(CliMeshAxesTest, BadMeshesAreInputErrors) {
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--cluster", "dgx-h100:64", "--mesh", "data=8,tensr=8"}), {"--mesh", "did you mean 'tensor'"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--cluster", "dgx-h100:64", "--mesh", "data=4,tensor=8"}), {"--mesh", "32 devices", "64"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--model", "llama3-8b", "--mesh", "data=8"}), {"--mesh", "needs --cluster"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--cluster", "dgx-h100:64", "--mesh", "data=0,tensor=8"}), {"--mesh", "data"}));
}

}  // namespace
}  // namespace shardsim::cli_test
