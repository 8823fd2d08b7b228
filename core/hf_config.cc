// Hugging Face config.json import (model_json.h). Field names follow the transformers
// configuration classes of each model type (LlamaConfig, MistralConfig, MixtralConfig,
// Qwen2Config, DeepseekV3Config, GPT2Config, GPTNeoXConfig).
#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/json_input.h"
#include "core/model_json.h"
#include "core/suggest.h"

namespace shardsim {
namespace {

using nlohmann::json;

// LLaMA-family attention and MLP (llama, mistral, qwen2, mixtral, deepseek share these keys).
ModelSpec LlamaFamily(JsonReader& r, const std::string& name) {
  ModelSpec m;
  m.name = name;
  m.num_layers = r.Int("num_hidden_layers", 1, kMaxModelLayers);
  m.hidden_size = r.Int("hidden_size", 1, kMaxModelWidth);
  m.num_heads = r.Int("num_attention_heads", 1, kMaxModelHeads);
  m.num_kv_heads = r.IntOr("num_key_value_heads", m.num_heads, 1, kMaxModelHeads);
  if (!r.Has("head_dim") && m.hidden_size % m.num_heads != 0) {
    r.Fail("head_dim", "missing, and hidden_size is not divisible by num_attention_heads");
  }
  m.head_dim = r.IntOr("head_dim", m.hidden_size / m.num_heads, 1, kMaxModelHeads);
  m.ffn_hidden_size = r.Int("intermediate_size", 1, kMaxModelWidth);
  m.vocab_size = r.Int("vocab_size", 1, kMaxModelVocab);
  m.max_seq_len = r.IntOr("max_position_embeddings", 4096, 1, kMaxModelSeqLen);
  m.tied_embeddings = r.BoolOr("tie_word_embeddings", false);
  m.mlp = MlpKind::kSwiGlu;
  m.norm = NormKind::kRmsNorm;
  m.position = PositionKind::kRope;
  return m;
}

ModelSpec Gpt2(JsonReader& r, const std::string& name) {
  ModelSpec m;
  m.name = name;
  m.num_layers = r.Int("n_layer", 1, kMaxModelLayers);
  m.hidden_size = r.Int("n_embd", 1, kMaxModelWidth);
  m.num_heads = r.Int("n_head", 1, kMaxModelHeads);
  m.num_kv_heads = m.num_heads;
  if (m.hidden_size % m.num_heads != 0) r.Fail("n_head", "n_embd is not divisible by n_head");
  m.head_dim = m.hidden_size / m.num_heads;
  m.ffn_hidden_size = r.IntOr("n_inner", 4 * m.hidden_size, 1, kMaxModelWidth);
  m.vocab_size = r.Int("vocab_size", 1, kMaxModelVocab);
  m.max_seq_len = r.IntOr("n_positions", 1024, 1, kMaxModelSeqLen);
  m.tied_embeddings = r.BoolOr("tie_word_embeddings", true);
  m.mlp = MlpKind::kGelu;
  m.norm = NormKind::kLayerNorm;
  m.position = PositionKind::kLearned;
  m.linear_bias = true;
  m.dropout = r.NumberOr("attn_pdrop", 0.1, 0, 1) > 0;
  return m;
}

ModelSpec GptNeoX(JsonReader& r, const std::string& name) {
  ModelSpec m;
  m.name = name;
  m.num_layers = r.Int("num_hidden_layers", 1, kMaxModelLayers);
  m.hidden_size = r.Int("hidden_size", 1, kMaxModelWidth);
  m.num_heads = r.Int("num_attention_heads", 1, kMaxModelHeads);
  m.num_kv_heads = m.num_heads;
  if (m.hidden_size % m.num_heads != 0) r.Fail("num_attention_heads", "hidden_size is not divisible by num_attention_heads");
  m.head_dim = m.hidden_size / m.num_heads;
  m.ffn_hidden_size = r.Int("intermediate_size", 1, kMaxModelWidth);
  m.vocab_size = r.Int("vocab_size", 1, kMaxModelVocab);
  m.max_seq_len = r.IntOr("max_position_embeddings", 2048, 1, kMaxModelSeqLen);
  m.tied_embeddings = r.BoolOr("tie_word_embeddings", false);
  m.mlp = MlpKind::kGelu;
  m.norm = NormKind::kLayerNorm;
  m.position = PositionKind::kRope;
  m.linear_bias = r.BoolOr("attention_bias", true);
  return m;
}

}  // namespace

bool IsHfConfig(const json& value) { return value.is_object() && value.contains("model_type"); }

std::vector<std::string> HfModelTypes() {
  return {"llama", "mistral", "mixtral", "qwen2", "qwen3", "deepseek_v2", "deepseek_v3", "gpt2", "gpt_neox"};
}

ModelSpec ModelFromHfConfig(const json& value, const std::string& where, const std::string& name) {
  JsonReader r(value, where);
  const std::vector<std::string> types = HfModelTypes();
  const std::string type = r.String("model_type");
  if (std::find(types.begin(), types.end(), type) == types.end()) {
    r.Fail("model_type", "unsupported model_type '" + type + "'", JoinNames(types),
           "write the hyper-parameters as a shardsim model JSON (shardsim describe --model llama3-8b --write-model F shows the format)");
  }
  ModelSpec m;
  if (type == "gpt2") {
    m = Gpt2(r, name);
  } else if (type == "gpt_neox") {
    m = GptNeoX(r, name);
  } else {
    m = LlamaFamily(r, name);
    if (type == "qwen2") m.qkv_bias = true;
    if (type == "llama" || type == "qwen3") m.qkv_bias = r.BoolOr("attention_bias", false);
  }
  if (type == "mixtral") {
    const int64_t experts = r.Int("num_local_experts", 1, kMaxModelExperts);
    m.moe = MoeSpec{.num_experts = experts,
                    .top_k = r.Int("num_experts_per_tok", 1, experts),
                    .num_shared_experts = 0,
                    .expert_ffn_hidden_size = m.ffn_hidden_size,
                    .first_dense_layers = 0,
                    .layer_interval = 1};
  }
  if (type == "deepseek_v2" || type == "deepseek_v3") {
    MlaSpec a;
    a.q_lora_rank = r.Has("q_lora_rank") ? r.Int("q_lora_rank", 0, kMaxModelWidth) : 0;  // null: no compression
    a.kv_lora_rank = r.Int("kv_lora_rank", 1, kMaxModelWidth);
    a.qk_nope_head_dim = r.Int("qk_nope_head_dim", 1, kMaxModelHeads);
    a.qk_rope_head_dim = r.Int("qk_rope_head_dim", 1, kMaxModelHeads);
    a.v_head_dim = r.Int("v_head_dim", 1, kMaxModelHeads);
    m.mla = a;
    m.head_dim = a.v_head_dim;
    m.num_kv_heads = m.num_heads;  // MLA: every head has its own (decompressed) K and V
    if (r.Has("n_routed_experts")) {
      const int64_t experts = r.Int("n_routed_experts", 1, kMaxModelExperts);
      m.moe = MoeSpec{.num_experts = experts,
                      .top_k = r.Int("num_experts_per_tok", 1, experts),
                      .num_shared_experts = r.IntOr("n_shared_experts", 0, 0, kMaxModelExperts),
                      .expert_ffn_hidden_size = r.Int("moe_intermediate_size", 1, kMaxModelWidth),
                      .first_dense_layers = r.IntOr("first_k_dense_replace", 0, 0, m.num_layers - 1),
                      .layer_interval = r.IntOr("moe_layer_freq", 1, 1, kMaxModelLayers)};
    }
  }
  m.source = "Hugging Face config.json (" + where + ", model_type " + type + ")";
  ValidateModel(m, where + ":");
  return m;
}

}  // namespace shardsim
