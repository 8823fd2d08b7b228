#include "core/model_spec.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "core/model_presets.h"

namespace shardsim {
namespace {

// Presets agree with the parameter counts their authors published.
TEST(ModelPresetsTest, ParamCountsMatchPublished) {
  int checked = 0;
  for (const ModelPreset& p : ModelPresets()) {
    ValidateModel(p.spec, p.spec.name);
    if (p.published_params_total == 0) continue;
    const ParamCounts c = CountParams(p.spec);
    EXPECT_NEAR(static_cast<double>(c.total) / p.published_params_total, 1.0, p.tolerance) << p.spec.name << " total";
    EXPECT_NEAR(static_cast<double>(c.active) / p.published_params_active, 1.0, p.tolerance) << p.spec.name << " active";
    ++checked;
  }
  EXPECT_EQ(checked, 10);
}

TEST(ModelPresetsTest, TinyModelsAreCpuSized) {
  for (const char* name : {"tiny-dense", "tiny-moe"}) {
    const auto preset = FindModelPreset(name);
    ASSERT_TRUE(preset.has_value()) << name;
    const ParamCounts c = CountParams(preset->spec);
    EXPECT_GT(c.total, 1'000'000) << name;
    EXPECT_LT(c.total, 20'000'000) << name;
  }
  EXPECT_FALSE(FindModelPreset("llama3-7b").has_value());
}

ModelSpec SmallMha() {
  ModelSpec m;
  m.name = "small";
  m.num_layers = 3;
  m.hidden_size = 64;
  m.num_heads = 4;
  m.num_kv_heads = 4;
  m.head_dim = 16;
  m.ffn_hidden_size = 160;
  m.vocab_size = 100;
  m.max_seq_len = 32;
  return m;
}

// Counted by hand from the hyper-parameters: attention 4*D^2, SwiGLU 3*D*F, two RMSNorms per
// layer plus a final one, untied embedding and head.
TEST(CountParamsTest, DenseByHand) {
  const ModelSpec m = SmallMha();
  const int64_t d = 64, f = 160, v = 100, l = 3;
  const ParamCounts c = CountParams(m);
  EXPECT_EQ(c.attention, l * 4 * d * d);
  EXPECT_EQ(c.dense_mlp, l * 3 * d * f);
  EXPECT_EQ(c.norms, (2 * l + 1) * d);
  EXPECT_EQ(c.embedding, v * d);
  EXPECT_EQ(c.head, v * d);
  EXPECT_EQ(c.total, l * (4 * d * d + 3 * d * f) + (2 * l + 1) * d + 2 * v * d);
  EXPECT_EQ(c.active, c.total);
}

TEST(CountParamsTest, GqaGeluBiasesLearnedPositionsTied) {
  ModelSpec m = SmallMha();
  m.num_kv_heads = 2;
  m.mlp = MlpKind::kGelu;
  m.norm = NormKind::kLayerNorm;
  m.position = PositionKind::kLearned;
  m.tied_embeddings = true;
  m.linear_bias = true;
  const int64_t d = 64, f = 160, v = 100, l = 3, s = 32, kv = 2 * 16;
  const ParamCounts c = CountParams(m);
  EXPECT_EQ(c.attention, l * (2 * d * d + 2 * d * kv + (d + 2 * kv + d)));
  EXPECT_EQ(c.dense_mlp, l * (2 * d * f + f + d));
  EXPECT_EQ(c.norms, (2 * l + 1) * 2 * d);
  EXPECT_EQ(c.embedding, v * d + s * d);
  EXPECT_EQ(c.head, 0);
}

TEST(CountParamsTest, MoeActiveCountsTopK) {
  ModelSpec m = SmallMha();
  m.moe = MoeSpec{.num_experts = 8, .top_k = 2, .num_shared_experts = 1, .expert_ffn_hidden_size = 32,
                  .first_dense_layers = 1, .layer_interval = 1};
  const int64_t d = 64, f = 160, e = 8, k = 2, fe = 32;
  const ParamCounts c = CountParams(m);
  EXPECT_EQ(NumMoeLayers(m), 2);
  EXPECT_EQ(c.dense_mlp, 3 * d * f);
  EXPECT_EQ(c.routed_experts, 2 * e * 3 * d * fe);
  EXPECT_EQ(c.shared_experts, 2 * 3 * d * fe);
  EXPECT_EQ(c.router, 2 * d * e);
  EXPECT_EQ(c.total - c.active, 2 * (e - k) * 3 * d * fe);
}

TEST(CountParamsTest, MoeLayerInterval) {
  ModelSpec m = SmallMha();
  m.num_layers = 8;
  m.moe = MoeSpec{.num_experts = 4, .top_k = 1, .num_shared_experts = 0, .expert_ffn_hidden_size = 32,
                  .first_dense_layers = 2, .layer_interval = 2};
  EXPECT_FALSE(IsMoeLayer(m, 1));
  EXPECT_TRUE(IsMoeLayer(m, 2));
  EXPECT_FALSE(IsMoeLayer(m, 3));
  EXPECT_TRUE(IsMoeLayer(m, 4));
  EXPECT_EQ(NumMoeLayers(m), 3);
}

// 6N per token for training (N = non-embedding matmul parameters, head included) plus PaLM's
// attention term 12*L*S*D for multi-head attention.
TEST(FlopsTest, SixNPlusAttention) {
  const ModelSpec m = SmallMha();
  const int64_t d = 64, f = 160, v = 100, l = 3, s = 32;
  const double n = static_cast<double>(l * (4 * d * d + 3 * d * f) + v * d);
  const FlopsPerToken flops = ForwardFlopsPerToken(m, s);
  EXPECT_DOUBLE_EQ(3 * flops.matmul, 6 * n);
  EXPECT_DOUBLE_EQ(3 * flops.attention, 12.0 * l * s * d);
  EXPECT_DOUBLE_EQ(flops.training(), 6 * n + 12.0 * l * s * d);
}

// Causal attention reads half the keys; a local layer's window W of S reads W - W^2/2S on average
// (position i sees min(i, W) keys). PaLM's count is a convention: the full context, local or not.
TEST(FlopsTest, SlidingWindowLayersCountTheirWindow) {
  ModelSpec m = SmallMha();
  const int64_t d = 64, l = 3, s = 32;
  EXPECT_DOUBLE_EQ(ForwardFlopsPerToken(m, s).causal_attention, ForwardFlopsPerToken(m, s).attention / 2);
  m.sliding_window = SlidingWindowSpec{.window = 8, .global_every = 3};  // layers 0, 1 local; 2 global
  EXPECT_TRUE(IsLocalAttentionLayer(m, 0));
  EXPECT_TRUE(IsLocalAttentionLayer(m, 1));
  EXPECT_FALSE(IsLocalAttentionLayer(m, 2));
  EXPECT_EQ(NumLocalAttentionLayers(m), 2);
  // Summed by position: keys min(i, 8) for i = 1..32.
  double keys = 0;
  for (int i = 1; i <= s; ++i) keys += std::min(i, 8);
  const double exact_local = keys / s, exact_global = (s + 1) / 2.0;
  const FlopsPerToken f = ForwardFlopsPerToken(m, s);
  EXPECT_DOUBLE_EQ(f.attention, ForwardFlopsPerToken(SmallMha(), s).attention);
  // The continuous count (S/2 for full, W - W^2/2S local) is within half a key of the exact one.
  EXPECT_NEAR(f.causal_attention / (4.0 * d), 2 * exact_local + exact_global, 1.5);
  EXPECT_LT(f.causal_training(), ForwardFlopsPerToken(SmallMha(), s).causal_training());
  // A window of the whole sequence is full causal attention.
  m.sliding_window->window = s;
  EXPECT_DOUBLE_EQ(ForwardFlopsPerToken(m, s).causal_attention, ForwardFlopsPerToken(SmallMha(), s).causal_attention);
  m.sliding_window->global_every = 0;
  EXPECT_EQ(NumLocalAttentionLayers(m), l);
}

TEST(FlopsTest, TiedHeadStillCostsAMatmul) {
  ModelSpec tied = SmallMha();
  tied.tied_embeddings = true;
  EXPECT_DOUBLE_EQ(ForwardFlopsPerToken(tied, 16).matmul, ForwardFlopsPerToken(SmallMha(), 16).matmul);
}

// A hybrid model (Nemotron 3 Nano): its parameters by hand from the Mamba-2 mixer's shapes, the
// attention, the experts and the pre-norms; attention FLOPs only in its attention layers; the
// scan's FLOPs per token by the SSD formula.
TEST(HybridModelTest, CountsAndFlopsByHand) {
  const ModelSpec m = FindModelPreset("nemotron-3-nano-30b-a3b")->spec;
  ASSERT_TRUE(IsHybrid(m));
  EXPECT_EQ(NumHybridLayers(m, kHybridMamba), 23);
  EXPECT_EQ(NumHybridLayers(m, kHybridMoe), 23);
  EXPECT_EQ(NumHybridLayers(m, kHybridAttention), 6);
  EXPECT_EQ(NumMoeLayers(m), 23);
  EXPECT_TRUE(IsMoeLayer(m, 1));
  EXPECT_FALSE(IsMoeLayer(m, 0));
  const double d = 2688, inner = 64 * 64, bc = 2 * 8 * 128, heads = 64;
  const double mixer = d * (2 * inner + bc + heads) + inner * d + (inner + bc) * 5 + 3 * heads + inner;
  const double attention = d * (32 * 128) * 2 + d * (2 * 128) * 2;
  const double expert = 2 * d * 1856;
  const double moe = 128 * expert + 2 * expert + d * 128;
  const double vocab = 131072 * d;
  const ParamCounts c = CountParams(m);
  EXPECT_DOUBLE_EQ(static_cast<double>(c.mamba), 23 * mixer);
  EXPECT_DOUBLE_EQ(static_cast<double>(c.total), 2 * vocab + 23 * mixer + 6 * attention + 23 * moe + 53 * d);
  const FlopsPerToken f = ForwardFlopsPerToken(m, 4096);
  EXPECT_DOUBLE_EQ(f.attention, 2.0 * 32 * (128 + 128) * 4096 * 6);
  const double q = 128, n = 128, p = 64;
  EXPECT_DOUBLE_EQ(f.scan, 23 * (2 * q * n * 8 + heads * (2 * q * p + 4 * n * p)));
  // Matmul FLOPs: the projections' weights, not the convolution, scan parameters or norms.
  const double active = 2 * vocab + 23 * (d * (2 * inner + bc + heads) + inner * d) + 6 * attention + 23 * (6 * expert + 2 * expert + d * 128);
  EXPECT_DOUBLE_EQ(f.matmul, 2 * (active - vocab));
}

// A hybrid pattern must match the layers, use the four kinds and have the specs its kinds need.
TEST(HybridModelTest, RejectsInconsistentPatterns) {
  const ModelSpec good = FindModelPreset("nemotron-3-nano-30b-a3b")->spec;
  auto where = [](const ModelSpec& m) {
    try {
      ValidateModel(m, "m.json:");
    } catch (const InputError& e) {
      return e.where();
    }
    return std::string("accepted");
  };
  EXPECT_EQ(where(good), "accepted");
  ModelSpec m = good;
  m.num_layers = 50;
  EXPECT_EQ(where(m), "m.json:/hybrid_pattern");
  m = good;
  m.hybrid_pattern[3] = 'A';
  EXPECT_EQ(where(m), "m.json:/hybrid_pattern");
  m = good;
  m.mamba.reset();
  EXPECT_EQ(where(m), "m.json:/mamba");
  m = good;
  m.moe.reset();
  EXPECT_EQ(where(m), "m.json:/hybrid_pattern");
  m = good;
  m.mamba->groups = 7;
  EXPECT_EQ(where(m), "m.json:/mamba/groups");
  m = good;
  m.mtp_layers = 1;  // a hybrid model's modules name their layers
  EXPECT_EQ(where(m), "m.json:/mtp_pattern");
  m.mtp_pattern = "*X";
  EXPECT_EQ(where(m), "m.json:/mtp_pattern");
  m.mtp_pattern = "*E";
  EXPECT_EQ(where(m), "accepted");
  m.mtp_layers = 0;
  EXPECT_EQ(where(m), "m.json:/mtp_pattern");  // a pattern without modules
  m = good;
  m.mtp_shared_weights = true;
  EXPECT_EQ(where(m), "m.json:/mtp_shared_weights");
  m = good;
  m.hybrid_pattern.clear();
  m.moe.reset();
  m.ffn_hidden_size = 64;
  EXPECT_EQ(where(m), "m.json:/mamba");  // a mixer spec without a pattern
}

// A hybrid model's multi-token-prediction modules: their layers from mtp_pattern, counted per
// module; shared weights hold one module's parameters and still run every depth's work.
TEST(HybridModelTest, MtpModulesCountTheirPatternsLayers) {
  ModelSpec m = FindModelPreset("nemotron-3-nano-30b-a3b")->spec;
  const ParamCounts base = CountParams(m);
  const FlopsPerToken base_flops = ForwardFlopsPerToken(m, 4096);
  m.mtp_layers = 2;
  m.mtp_pattern = "*E";
  ValidateModel(m, "m.json:");
  const ParamCounts two = CountParams(m);
  EXPECT_EQ(two.total, base.total);  // beside the model's own
  const double d = static_cast<double>(m.hidden_size);
  // One module: the entry (2D -> D and three norms), attention and experts each with a pre-norm.
  const int64_t experts = base.routed_experts / NumMoeLayers(m) + base.shared_experts / NumMoeLayers(m) + base.router / NumMoeLayers(m);
  const int64_t module = 2 * m.hidden_size * m.hidden_size + 5 * m.hidden_size + base.per_layer_attention + experts;
  EXPECT_EQ(two.mtp, 2 * module);
  m.mtp_shared_weights = true;
  const ParamCounts shared = CountParams(m);
  EXPECT_EQ(shared.mtp, module);
  EXPECT_EQ(shared.mtp_active, two.mtp_active);
  // Each depth: the entry's and layers' products, the head again and one more global attention.
  const FlopsPerToken flops = ForwardFlopsPerToken(m, 4096);
  const double head = 2 * static_cast<double>(m.vocab_size) * d;
  const double per_module_active = static_cast<double>(two.mtp_active) / 2 - 5 * d;
  EXPECT_NEAR(flops.matmul - base_flops.matmul, 2 * (2 * per_module_active + head), 1e-6 * flops.matmul);
  const double attention_layers = static_cast<double>(NumHybridLayers(m, kHybridAttention));
  EXPECT_NEAR(flops.attention / base_flops.attention, (attention_layers + 2) / attention_layers, 1e-12);
  EXPECT_DOUBLE_EQ(flops.scan, base_flops.scan);  // no Mamba-2 mixer in the modules
  m.mtp_pattern = "M*E";
  EXPECT_GT(ForwardFlopsPerToken(m, 4096).scan, base_flops.scan);
}

TEST(ValidateModelTest, RejectsInconsistentSpecs) {
  ModelSpec m = SmallMha();
  m.num_kv_heads = 3;
  EXPECT_THROW(ValidateModel(m, "m"), InputError);
  m = SmallMha();
  m.moe = MoeSpec{.num_experts = 4, .top_k = 5, .num_shared_experts = 0, .expert_ffn_hidden_size = 8,
                  .first_dense_layers = 0, .layer_interval = 1};
  EXPECT_THROW(ValidateModel(m, "m"), InputError);
  m.moe->top_k = 2;
  m.moe->first_dense_layers = 3;
  EXPECT_THROW(ValidateModel(m, "m"), InputError);
  m = SmallMha();
  m.sliding_window = SlidingWindowSpec{.window = 8, .global_every = 1};
  try {
    ValidateModel(m, "m.json:");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "m.json:/sliding_window/global_every");
  }
  m.sliding_window = SlidingWindowSpec{.window = 0, .global_every = 2};
  EXPECT_THROW(ValidateModel(m, "m"), InputError);
  m = SmallMha();
  m.num_layers = 100000;
  m.hidden_size = int64_t{1} << 24;
  m.ffn_hidden_size = int64_t{1} << 24;
  try {
    ValidateModel(m, "m.json:");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("overflows"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace shardsim
