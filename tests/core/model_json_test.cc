#include "core/model_json.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model_presets.h"

namespace shardsim {
namespace {

using nlohmann::json;

TEST(ModelJsonTest, EveryPresetRoundTrips) {
  for (const ModelPreset& p : ModelPresets()) {
    const json written = ModelToJson(p.spec);
    const ModelSpec read = ModelFromJson(json::parse(written.dump()), "m.json");
    EXPECT_EQ(read, p.spec) << p.spec.name;
    EXPECT_EQ(ModelToJson(read), written) << p.spec.name;
  }
}

TEST(ModelJsonTest, DefaultsForOptionalFields) {
  const json j = {{"name", "m"}, {"num_layers", 2}, {"hidden_size", 64}, {"num_heads", 4}, {"ffn_hidden_size", 128},
                  {"vocab_size", 50}, {"max_seq_len", 16}};
  const ModelSpec m = ModelFromJson(j, "m.json");
  EXPECT_EQ(m.num_kv_heads, 4);
  EXPECT_EQ(m.head_dim, 16);
  EXPECT_EQ(m.mlp, MlpKind::kSwiGlu);
  EXPECT_FALSE(m.moe.has_value());
}

TEST(ModelJsonTest, ErrorsNameTheField) {
  json j = ModelToJson(FindModelPreset("llama3-8b")->spec);
  j["num_layer"] = 3;
  try {
    ModelFromJson(j, "m.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "m.json:/num_layer");
  }
  j = ModelToJson(FindModelPreset("llama3-8b")->spec);
  j["moe"] = {{"num_experts", 8}, {"top_k", 2}, {"expert_ffn_hidden_size", 0}};
  try {
    ModelFromJson(j, "m.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "m.json:/moe/expert_ffn_hidden_size");
  }
  // Group-limited routing: the groups split the experts evenly, the chosen ones hold top_k.
  for (const auto& [groups, top, field] : {std::tuple{3, 1, "groups"}, std::tuple{4, 0, "group_top_k"}, std::tuple{0, 2, "groups"}, std::tuple{8, 1, "group_top_k"},
                                            std::tuple{4, 5, "group_top_k"}}) {
    j = ModelToJson(FindModelPreset("mixtral-8x7b")->spec);
    j["moe"]["groups"] = groups, j["moe"]["group_top_k"] = top;
    try {
      ModelFromJson(j, "m.json");
      FAIL() << groups << " groups, " << top;
    } catch (const InputError& e) {
      EXPECT_EQ(e.where(), std::string("m.json:/moe/") + field) << groups << " groups, " << top;
    }
  }
  j = ModelToJson(FindModelPreset("mixtral-8x7b")->spec);
  j["moe"]["groups"] = 4, j["moe"]["group_top_k"] = 1;  // 2 experts per group hold top-2
  EXPECT_EQ(ModelFromJson(j, "m.json").moe->group_top_k, 1);
  j["moe"]["groups"] = 1, j["moe"]["group_top_k"] = 1;  // one group: no limit, as n_group 1 imports
  EXPECT_EQ(ModelFromJson(j, "m.json").moe->groups, 1);
}

// Llama-3-8B's published config.json imports to the same model as the preset.
TEST(HfConfigTest, LlamaMatchesPreset) {
  const json config = {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"hidden_size", 4096},
                       {"intermediate_size", 14336}, {"num_hidden_layers", 32}, {"num_attention_heads", 32},
                       {"num_key_value_heads", 8}, {"vocab_size", 128256}, {"max_position_embeddings", 8192},
                       {"tie_word_embeddings", false}, {"rope_theta", 500000.0}, {"hidden_act", "silu"}};
  ModelSpec imported = ModelFromHfConfig(config, "config.json", "llama3-8b");
  ModelSpec preset = FindModelPreset("llama3-8b")->spec;
  imported.source = preset.source;
  EXPECT_EQ(imported, preset);
}

TEST(HfConfigTest, DeepSeekV3MatchesPresetCounts) {
  const json config = {{"model_type", "deepseek_v3"}, {"hidden_size", 7168}, {"intermediate_size", 18432},
                       {"moe_intermediate_size", 2048}, {"num_hidden_layers", 61}, {"num_attention_heads", 128},
                       {"num_key_value_heads", 128}, {"n_shared_experts", 1}, {"n_routed_experts", 256},
                       {"num_experts_per_tok", 8}, {"first_k_dense_replace", 3}, {"moe_layer_freq", 1},
                       {"q_lora_rank", 1536}, {"kv_lora_rank", 512}, {"qk_nope_head_dim", 128}, {"qk_rope_head_dim", 64},
                       {"v_head_dim", 128}, {"vocab_size", 129280}, {"max_position_embeddings", 163840},
                       {"num_nextn_predict_layers", 1}};
  const ModelSpec imported = ModelFromHfConfig(config, "config.json", "dsv3");
  const ParamCounts a = CountParams(imported);
  const ParamCounts b = CountParams(FindModelPreset("deepseek-v3")->spec);
  EXPECT_EQ(a.total, b.total);
  EXPECT_EQ(a.active, b.active);
  // The MTP module beside them: DeepSeek's model card gives 14B for it with its copies of the
  // embedding and head (0.93B each), which shardsim counts once, as the model's.
  EXPECT_EQ(imported.mtp_layers, 1);
  // n_group / topk_group as the config publishes them: node-limited routing, 4 of 8 groups.
  json limited = config;
  limited["n_group"] = 8, limited["topk_group"] = 4;
  const ModelSpec routed = ModelFromHfConfig(limited, "config.json", "dsv3");
  EXPECT_EQ(routed.moe->groups, FindModelPreset("deepseek-v3")->spec.moe->groups);
  EXPECT_EQ(routed.moe->group_top_k, 4);
  EXPECT_EQ(b.mtp, 0);  // the preset leaves it out
  EXPECT_NEAR(static_cast<double>(a.mtp) / (14e9 - 2 * static_cast<double>(a.embedding)), 1.0, 0.05);
}

// A NemotronH config.json (NemotronHConfig's field names) with Nemotron 3 Nano's values imports to
// the preset: the legacy pattern string or the layer-type list, the shared expert as two routed
// widths; a multi-token-prediction layer is left out and said so.
TEST(HfConfigTest, NemotronHMatchesNanoPreset) {
  const ModelSpec preset = FindModelPreset("nemotron-3-nano-30b-a3b")->spec;
  json config = {{"model_type", "nemotron_h"}, {"hybrid_override_pattern", preset.hybrid_pattern}, {"hidden_size", 2688},
                 {"num_attention_heads", 32}, {"num_key_value_heads", 2}, {"head_dim", 128}, {"vocab_size", 131072},
                 {"max_position_embeddings", 8192}, {"mlp_hidden_act", "relu2"}, {"mamba_num_heads", 64}, {"mamba_head_dim", 64},
                 {"ssm_state_size", 128}, {"n_groups", 8}, {"conv_kernel", 4}, {"chunk_size", 128}, {"n_routed_experts", 128},
                 {"n_shared_experts", 1}, {"moe_intermediate_size", 1856}, {"moe_shared_expert_intermediate_size", 3712},
                 {"num_experts_per_tok", 6}, {"moe_latent_size", nullptr}, {"n_group", 1}, {"topk_group", 1},
                 {"intermediate_size", 1856}, {"num_nextn_predict_layers", 0}};
  ModelSpec imported = ModelFromHfConfig(config, "config.json", preset.name);
  imported.source = preset.source;
  EXPECT_EQ(imported, preset);
  // The same as a layer-type list, in the current and the legacy names.
  json listed = config;
  listed.erase("hybrid_override_pattern");
  listed["layers_block_type"] = json::array();
  for (char c : preset.hybrid_pattern) {
    listed["layers_block_type"].push_back(c == 'M' ? "linear_attention" : c == '*' ? "attention" : c == 'E' ? "moe" : "mlp");
  }
  EXPECT_EQ(ModelFromHfConfig(listed, "config.json", preset.name).hybrid_pattern, preset.hybrid_pattern);
  // Multi-token prediction: left out (and said so) where no pattern names the modules' layers;
  // the pattern string or the block-type list, and the repeated layer, where one does.
  json mtp = config;
  mtp["num_nextn_predict_layers"] = 2;
  EXPECT_NE(ModelFromHfConfig(mtp, "config.json", preset.name).source.find("2 multi-token-prediction layer(s) left out"), std::string::npos);
  mtp["mtp_hybrid_override_pattern"] = "*E";
  const ModelSpec with_mtp = ModelFromHfConfig(mtp, "config.json", preset.name);
  EXPECT_EQ(with_mtp.mtp_layers, 2);
  EXPECT_EQ(with_mtp.mtp_pattern, "*E");
  EXPECT_FALSE(with_mtp.mtp_shared_weights);
  mtp.erase("mtp_hybrid_override_pattern");
  mtp["mtp_layers_block_type"] = {"attention", "moe"};
  mtp["mtp_use_repeated_layer"] = true;
  const ModelSpec listed_mtp = ModelFromHfConfig(mtp, "config.json", preset.name);
  EXPECT_EQ(listed_mtp.mtp_pattern, "*E");
  EXPECT_TRUE(listed_mtp.mtp_shared_weights);
  EXPECT_EQ(ModelFromJson(ModelToJson(listed_mtp), "m.json"), listed_mtp);  // the model JSON keeps both
  mtp.erase("mtp_layers_block_type");
  mtp["mtp_hybrid_override_pattern"] = "*X";
  try {
    ModelFromHfConfig(mtp, "config.json", preset.name);
    ADD_FAILURE() << "an unknown MTP layer symbol";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "config.json:/mtp_hybrid_override_pattern");
  }
  // Errors name the config's own fields.
  for (const auto& [key, value, field] : {std::tuple{"mlp_hidden_act", json("silu"), "mlp_hidden_act"}, std::tuple{"num_hidden_layers", json(40), "num_hidden_layers"},
                                          std::tuple{"layers_block_type", json::array({"mamba", "conv"}), "layers_block_type"}}) {
    json bad = key == std::string("layers_block_type") ? listed : config;
    bad[key] = value;
    try {
      ModelFromHfConfig(bad, "config.json", preset.name);
      ADD_FAILURE() << key;
    } catch (const InputError& e) {
      EXPECT_EQ(e.where(), std::string("config.json:/") + field);
    }
  }
  // A check after the import names the key in the spelling the config uses (n_groups, or the
  // legacy mamba_n_groups NemotronHConfig also reads).
  for (const char* key : {"n_groups", "mamba_n_groups"}) {
    json bad = config;
    bad.erase("n_groups");
    bad[key] = 3;  // does not divide mamba_num_heads 64
    try {
      ModelFromHfConfig(bad, "config.json", preset.name);
      ADD_FAILURE() << key;
    } catch (const InputError& e) {
      EXPECT_EQ(e.where(), std::string("config.json:/") + key);
      EXPECT_NE(std::string(e.what()).find(std::string(key) + "=3 must divide mamba_num_heads=64"), std::string::npos) << e.what();
    }
  }
  json unnamed = config;
  unnamed.erase("hybrid_override_pattern");
  try {
    ModelFromHfConfig(unnamed, "config.json", preset.name);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("hybrid_override_pattern"), std::string::npos) << e.what();
  }
  json odd = config;
  odd["moe_shared_expert_intermediate_size"] = 3000;
  try {
    ModelFromHfConfig(odd, "config.json", preset.name);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "config.json:/moe_shared_expert_intermediate_size");
  }
}

// gpt-oss-120b's published config.json imports to the preset: local and global layers alternate.
TEST(HfConfigTest, GptOssMatchesPreset) {
  json layer_types = json::array();
  for (int i = 0; i < 36; ++i) layer_types.push_back(i % 2 == 0 ? "sliding_attention" : "full_attention");
  json config = {{"model_type", "gpt_oss"}, {"hidden_size", 2880}, {"intermediate_size", 2880}, {"num_hidden_layers", 36},
                 {"num_attention_heads", 64}, {"num_key_value_heads", 8}, {"head_dim", 64}, {"num_local_experts", 128},
                 {"num_experts_per_tok", 4}, {"vocab_size", 201088}, {"max_position_embeddings", 131072}, {"sliding_window", 128},
                 {"layer_types", layer_types}, {"attention_bias", true}, {"tie_word_embeddings", false}};
  ModelSpec imported = ModelFromHfConfig(config, "config.json", "gpt-oss-120b");
  const ModelSpec preset = FindModelPreset("gpt-oss-120b")->spec;
  imported.source = preset.source;
  EXPECT_EQ(imported, preset);
  // Without layer_types, GptOssConfig's default alternation.
  config.erase("layer_types");
  imported = ModelFromHfConfig(config, "config.json", "gpt-oss-120b");
  imported.source = preset.source;
  EXPECT_EQ(imported, preset);
  // A pattern that is not local layers closed by a global one is refused, naming the layer.
  layer_types[3] = "sliding_attention";
  config["layer_types"] = layer_types;
  try {
    ModelFromHfConfig(config, "config.json", "x");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "config.json:/layer_types");
    EXPECT_NE(std::string(e.what()).find("layer 3"), std::string::npos) << e.what();
  }
}

// Mistral 7B v0.1's window covers every layer; a null window (v0.2 on) is none.
TEST(HfConfigTest, MistralWindow) {
  json config = {{"model_type", "mistral"}, {"hidden_size", 4096}, {"intermediate_size", 14336}, {"num_hidden_layers", 32},
                 {"num_attention_heads", 32}, {"num_key_value_heads", 8}, {"vocab_size", 32000}, {"sliding_window", 4096}};
  ModelSpec m = ModelFromHfConfig(config, "config.json", "mistral");
  ASSERT_TRUE(m.sliding_window.has_value());
  EXPECT_EQ(m.sliding_window->window, 4096);
  EXPECT_EQ(NumLocalAttentionLayers(m), 32);
  config["sliding_window"] = nullptr;
  EXPECT_FALSE(ModelFromHfConfig(config, "config.json", "mistral").sliding_window.has_value());
  // Qwen2's window from max_window_layers on is no repeating pattern: refused by name.
  config["model_type"] = "qwen2";
  config["use_sliding_window"] = true;
  try {
    ModelFromHfConfig(config, "config.json", "q");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "config.json:/use_sliding_window");
  }
}

// Importing `config` fails at `config.json:/key`, its message holding each of `has` and none of
// `lacks`.
void ExpectConfigError(const json& config, const std::string& key, const std::vector<std::string>& has, const std::vector<std::string>& lacks = {}) {
  try {
    ModelFromHfConfig(config, "config.json", "x");
    ADD_FAILURE() << key;
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "config.json:/" + key);
    for (const std::string& words : has) EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    for (const std::string& words : lacks) EXPECT_EQ(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

// The consistency checks run after the import (ValidateModel) name the config's keys too, in
// the path and the message, not shardsim's field names.
TEST(HfConfigTest, ConsistencyErrorsNameTheConfigKeys) {
  const json llama = {{"model_type", "llama"}, {"hidden_size", 1024}, {"intermediate_size", 4096}, {"num_hidden_layers", 4},
                      {"num_attention_heads", 16}, {"num_key_value_heads", 5}, {"vocab_size", 32000}};
  const json gpt2 = {{"model_type", "gpt2"}, {"n_layer", 4}, {"n_embd", 1024}, {"n_head", 16}, {"vocab_size", 50257}, {"n_inner", 0}};
  json deepseek = {{"model_type", "deepseek_v3"}, {"hidden_size", 1024}, {"intermediate_size", 4096}, {"num_hidden_layers", 4},
                   {"num_attention_heads", 16}, {"vocab_size", 32000}, {"kv_lora_rank", 64}, {"qk_nope_head_dim", 32},
                   {"qk_rope_head_dim", 16}, {"v_head_dim", 32}, {"n_routed_experts", 12}, {"num_experts_per_tok", 2},
                   {"moe_intermediate_size", 256}, {"n_group", 5}, {"topk_group", 2}};
  ExpectConfigError(llama, "num_key_value_heads", {"num_key_value_heads=5 must divide num_attention_heads=16"}, {"num_kv_heads"});
  ExpectConfigError(deepseek, "n_group", {"n_group=5 does not split n_routed_experts=12"}, {"moe/groups"});
  // GPT-2's n_inner of 0 is refused by the reader's own range, under its name.
  ExpectConfigError(gpt2, "n_inner", {});
  // A shardsim model JSON keeps shardsim's names.
  ModelSpec m = FindModelPreset("llama3-8b")->spec;
  m.num_kv_heads = 5;
  try {
    ValidateModel(m, "m.json:");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "m.json:/num_kv_heads");
  }
}

// Values a config implies by leaving a key out (head_dim, GPT-2's n_inner) are checked under the
// keys it has; a one-layer gpt-oss has its only layer local.
TEST(HfConfigTest, ImpliedSizesNameTheKeysTheConfigHas) {
  const json llama = {{"model_type", "llama"}, {"hidden_size", 1 << 24}, {"intermediate_size", 4096}, {"num_hidden_layers", 4},
                      {"num_attention_heads", 2}, {"vocab_size", 32000}};
  json uneven = llama;
  uneven["hidden_size"] = 1000, uneven["num_attention_heads"] = 3;
  const json gpt2 = {{"model_type", "gpt2"}, {"n_layer", 4}, {"n_embd", 1 << 23}, {"n_head", 128}, {"vocab_size", 50257}};
  ExpectConfigError(llama, "num_attention_heads", {"hidden_size / num_attention_heads = 8388608", "valid: a head width of 1 to 65536, or a head_dim key", "(hint: "});
  ExpectConfigError(uneven, "num_attention_heads",
                    {"hidden_size=1000 is not divisible by num_attention_heads=3", "valid: a divisor of hidden_size, or a head_dim key", "(hint: "});
  ExpectConfigError(gpt2, "n_embd", {"4 x n_embd = 33554432", "valid: n_embd of 1 to 4194304, or an n_inner", "(hint: "});
  json with_head_dim = llama;
  with_head_dim["head_dim"] = 128;
  EXPECT_EQ(ModelFromHfConfig(with_head_dim, "config.json", "x").head_dim, 128);
  const json gpt_oss = {{"model_type", "gpt_oss"}, {"hidden_size", 256}, {"intermediate_size", 512}, {"num_hidden_layers", 1},
                        {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 64}, {"vocab_size", 1000},
                        {"num_local_experts", 4}, {"num_experts_per_tok", 2}, {"sliding_window", 128}};
  const ModelSpec one_layer = ModelFromHfConfig(gpt_oss, "config.json", "x");
  ASSERT_TRUE(one_layer.sliding_window.has_value());
  EXPECT_EQ(one_layer.sliding_window->global_every, 0);
  EXPECT_TRUE(IsLocalAttentionLayer(one_layer, 0));
}

TEST(HfConfigTest, UnsupportedTypeListsSupported) {
  try {
    ModelFromHfConfig({{"model_type", "bert"}}, "config.json", "x");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "config.json:/model_type");
    EXPECT_NE(e.valid().find("llama"), std::string::npos);
  }
}

}  // namespace
}  // namespace shardsim
