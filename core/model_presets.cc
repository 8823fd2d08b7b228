#include "core/model_presets.h"

namespace shardsim {
namespace {

// LLaMA-style dense decoder: SwiGLU, RMSNorm, RoPE, untied embeddings, no biases.
ModelSpec Llama(std::string name, int64_t layers, int64_t d, int64_t heads, int64_t kv_heads, int64_t ffn,
                int64_t vocab, int64_t max_seq, std::string source) {
  ModelSpec m;
  m.name = std::move(name);
  m.num_layers = layers;
  m.hidden_size = d;
  m.num_heads = heads;
  m.num_kv_heads = kv_heads;
  m.head_dim = d / heads;
  m.ffn_hidden_size = ffn;
  m.mlp = MlpKind::kSwiGlu;
  m.norm = NormKind::kRmsNorm;
  m.position = PositionKind::kRope;
  m.vocab_size = vocab;
  m.max_seq_len = max_seq;
  m.source = std::move(source);
  return m;
}

ModelPreset Gpt3() {
  ModelSpec m;
  m.name = "gpt3-175b";
  m.num_layers = 96;
  m.hidden_size = 12288;
  m.num_heads = 96;
  m.num_kv_heads = 96;
  m.head_dim = 128;
  m.ffn_hidden_size = 4 * 12288;
  m.mlp = MlpKind::kGelu;
  m.norm = NormKind::kLayerNorm;
  m.position = PositionKind::kLearned;
  m.vocab_size = 50257;
  m.max_seq_len = 2048;
  m.tied_embeddings = true;
  m.linear_bias = true;
  m.source = "Brown et al. 2020, 'Language Models are Few-Shot Learners', Table 2.1 (n_layers 96, d_model 12288, n_heads 96, d_head 128, n_ctx 2048); GPT-2 vocabulary of 50257, FFN 4*d_model";
  return {m, 175.0e9, 175.0e9, 0.01, "Brown et al. 2020, Table 2.1: 175.0B parameters"};
}

ModelPreset Mixtral(std::string name, int64_t layers, int64_t d, int64_t heads, int64_t ffn, int64_t vocab,
                    int64_t max_seq, std::string source, double total, double active, std::string published) {
  ModelSpec m = Llama(std::move(name), layers, d, heads, 8, ffn, vocab, max_seq, std::move(source));
  m.moe = MoeSpec{.num_experts = 8, .top_k = 2, .num_shared_experts = 0, .expert_ffn_hidden_size = ffn,
                  .first_dense_layers = 0, .layer_interval = 1};
  return {m, total, active, 0.01, std::move(published)};
}

ModelPreset DeepSeekV3() {
  ModelSpec m;
  m.name = "deepseek-v3";
  m.num_layers = 61;
  m.hidden_size = 7168;
  m.num_heads = 128;
  m.num_kv_heads = 128;
  m.head_dim = 128;
  m.ffn_hidden_size = 18432;
  m.mlp = MlpKind::kSwiGlu;
  m.norm = NormKind::kRmsNorm;
  m.position = PositionKind::kRope;
  m.vocab_size = 129280;
  m.max_seq_len = 4096;
  m.moe = MoeSpec{.num_experts = 256, .top_k = 8, .num_shared_experts = 1, .expert_ffn_hidden_size = 2048,
                  .first_dense_layers = 3, .layer_interval = 1, .groups = 8, .group_top_k = 4};
  m.mla = MlaSpec{.q_lora_rank = 1536, .kv_lora_rank = 512, .qk_nope_head_dim = 128, .qk_rope_head_dim = 64,
                  .v_head_dim = 128};
  m.source = "DeepSeek-AI 2024, 'DeepSeek-V3 Technical Report' section 4.2 and the released config.json (61 layers, hidden 7168, 128 heads, MLA ranks 1536/512, 256 routed + 1 shared expert of width 2048, top-8, first 3 layers dense with width 18432, vocabulary 129280; node-limited routing, section 3.2.2: each token's experts within 4 of 8 groups, n_group 8 and topk_group 4 in config.json); pre-training sequence length 4096; mtp_layers counts its multi-token-prediction modules (section 2.2 trains D = 1; the preset has 0, as frameworks without MTP run it; the released config.json has num_nextn_predict_layers 1)";
  return {m, 671e9, 37e9, 0.02, "DeepSeek-V3 Technical Report, abstract: 671B total parameters, 37B activated per token"};
}

// OpenAI's gpt-oss: every layer MoE (SwiGLU experts of width 2880, top-4), biased projections,
// 64 query heads of 64 over 8 K/V heads on a width of 2880, local layers (128-token window)
// alternating with global ones, untied o200k vocabulary; each head's attention sink (one logit)
// is left out of the counts.
ModelPreset GptOss(std::string name, int64_t layers, int64_t experts, double total, double active, std::string published) {
  ModelSpec m = Llama(std::move(name), layers, 2880, 64, 8, 2880, 201088, 131072,
                      "OpenAI gpt-oss config.json (hidden 2880, 64 heads of dim 64, 8 K/V heads, intermediate 2880, " + std::to_string(experts) +
                          " local experts, 4 per token, vocabulary 201088, sliding_window 128 on alternate layers, attention_bias) and the "
                          "gpt-oss model card (2025) Table 1");
  m.head_dim = 64;
  m.linear_bias = true;
  m.moe = MoeSpec{.num_experts = experts, .top_k = 4, .num_shared_experts = 0, .expert_ffn_hidden_size = 2880, .first_dense_layers = 0, .layer_interval = 1};
  m.sliding_window = SlidingWindowSpec{.window = 128, .global_every = 2};
  return {m, total, active, 0.01, std::move(published)};
}

ModelPreset TinyDense() {
  ModelSpec m = Llama("tiny-dense", 4, 256, 8, 4, 768, 256, 1024,
                      "shardsim's own CPU-sized LLaMA-style model for the MPI runtime: byte-level vocabulary of 256");
  return {m, 0, 0, 0.0, ""};
}

ModelPreset TinyMoe() {
  ModelSpec m = Llama("tiny-moe", 4, 256, 8, 4, 768, 256, 1024,
                      "shardsim's own CPU-sized MoE model for the MPI runtime: 8 experts, top-2, one shared expert, byte-level vocabulary");
  m.moe = MoeSpec{.num_experts = 8, .top_k = 2, .num_shared_experts = 1, .expert_ffn_hidden_size = 256,
                  .first_dense_layers = 0, .layer_interval = 1};
  return {m, 0, 0, 0.0, ""};
}

// NVIDIA Nemotron 3 Nano 30B-A3B: a hybrid of 23 Mamba-2 mixers, 23 MoE blocks and 6 attention
// blocks (no positional embedding), squared-ReLU experts.
ModelPreset Nemotron3Nano() {
  ModelSpec m;
  m.name = "nemotron-3-nano-30b-a3b";
  m.hybrid_pattern = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME";
  m.num_layers = static_cast<int64_t>(m.hybrid_pattern.size());
  m.hidden_size = 2688;
  m.num_heads = 32;
  m.num_kv_heads = 2;
  m.head_dim = 128;
  m.ffn_hidden_size = 1856;
  m.mlp = MlpKind::kRelu2;
  m.norm = NormKind::kRmsNorm;
  m.position = PositionKind::kNone;
  m.vocab_size = 131072;
  m.max_seq_len = 8192;
  // The shared expert's 3712 columns are two of the routed experts' 1856.
  m.moe = MoeSpec{.num_experts = 128, .top_k = 6, .num_shared_experts = 2, .expert_ffn_hidden_size = 1856, .first_dense_layers = 0, .layer_interval = 1};
  m.mamba = MambaSpec{.num_heads = 64, .head_dim = 64, .state_size = 128, .groups = 8, .conv_kernel = 4, .chunk_size = 128};
  m.source =
      "NVIDIA/Megatron-LM examples/post_training/modelopt/conf/nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.sh at d98e8a64dd (hidden 2688, 32 heads, "
      "2 query groups, kv_channels 128, ffn 1856, 128 experts top-6, shared expert 3712, mamba 64 heads x 64, --hybrid-layer-pattern, "
      "--squared-relu, --position-embedding-type none); Megatron-core's defaults for what it leaves out (mamba_state_dim 128, "
      "mamba_num_groups 8, d_conv 4, chunk_size 128); the nemotron_h tokenizer's 131072 tokens (NemotronHConfig's vocab_size)";
  return {m, 31.6e9, 3.6e9, 0.01,
          "NVIDIA 2025, 'Nemotron 3 Nano' technical report (arXiv 2512.20848): 31.6B total, 3.2B active per token without the "
          "embedding, 3.6B with it"};
}

}  // namespace

std::vector<ModelPreset> ModelPresets() {
  const std::string hf_llama3 =
      "Meta 2024, 'The Llama 3 Herd of Models' Table 3 and the released config.json (vocabulary 128256, RoPE, SwiGLU, GQA with 8 K/V heads)";
  return {
      Gpt3(),
      {Llama("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, hf_llama3), 8.03e9, 8.03e9, 0.01,
       "Meta Llama 3 model card: 8.03B parameters (8B)"},
      {Llama("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192, hf_llama3), 70.6e9, 70.6e9, 0.01,
       "Meta Llama 3 model card: 70.6B parameters (70B)"},
      {Llama("llama3-405b", 126, 16384, 128, 8, 53248, 128256, 8192, hf_llama3), 405e9, 405e9, 0.01,
       "Meta 2024, 'The Llama 3 Herd of Models' Table 3: 405B parameters"},
      Mixtral("mixtral-8x7b", 32, 4096, 32, 14336, 32000, 32768,
              "Jiang et al. 2024, 'Mixtral of Experts' Table 1 (32 layers, dim 4096, 32 heads, 8 K/V heads, hidden 14336, 8 experts, top-2, vocabulary 32000)",
              46.7e9, 12.9e9, "Mistral AI, Mixtral 8x7B release: 46.7B total parameters, 12.9B used per token"),
      Mixtral("mixtral-8x22b", 56, 6144, 48, 16384, 32000, 65536,
              "Mistral AI Mixtral-8x22B-v0.1 config.json (56 layers, hidden 6144, 48 heads, 8 K/V heads, intermediate 16384, 8 experts, top-2, vocabulary 32000)",
              141e9, 39e9, "Mistral AI, 'Cheaper, Better, Faster, Stronger' (Mixtral 8x22B): 141B parameters, 39B active"),
      DeepSeekV3(),
      GptOss("gpt-oss-20b", 24, 32, 20.91e9, 4.19e9,
             "gpt-oss model card (OpenAI 2025) Table 1: 20.91B total; 3.61B active without the embedding, 4.19B with its 0.58B (half the "
             "card's 1.16B embed + unembed), as shardsim counts"),
      GptOss("gpt-oss-120b", 36, 128, 116.83e9, 5.71e9,
             "gpt-oss model card (OpenAI 2025) Table 1: 116.83B total; 5.13B active without the embedding, 5.71B with its 0.58B (half the "
             "card's 1.16B embed + unembed), as shardsim counts"),
      Nemotron3Nano(),
      TinyDense(),
      TinyMoe(),
  };
}

std::vector<std::string> ModelPresetNames() {
  std::vector<std::string> names;
  for (const ModelPreset& p : ModelPresets()) names.push_back(p.spec.name);
  return names;
}

std::optional<ModelPreset> FindModelPreset(const std::string& name) {
  for (ModelPreset& p : ModelPresets()) {
    if (p.spec.name == name) return p;
  }
  return std::nullopt;
}

}  // namespace shardsim
