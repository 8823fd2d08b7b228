// The JSON readers under fuzzing: valid model, cluster, plan and Hugging Face files, mutated from a
// fixed seed (tests/core/json_mutator.h), go through the real readers. Each case must end either
// in an InputError whose message is one line naming the file, or in a spec whose derived numbers
// (parameter counts, FLOPs per token, peaks, memory, the mesh's devices) are finite and
// non-negative and which reads back identically. Anything else (another exception, a crash, a
// NaN) fails, and the failing text is printed.
#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/cluster_json.h"
#include "core/cluster_presets.h"
#include "core/error.h"
#include "core/inputs.h"
#include "core/json_input.h"
#include "core/model_json.h"
#include "core/model_presets.h"
#include "core/plan_json.h"
#include "tests/core/json_mutator.h"

namespace shardsim {
namespace {

using nlohmann::json;
using testing::JsonMutator;

constexpr const char* kSource = "case.json";
// Cases per seed file and generator seed: 100 makes about 8000 in all, a few seconds.
// SHARDSIM_FUZZ_CASES_PER_SEED=N asks for a longer run.
int CasesPerSeed() {
  const char* text = std::getenv("SHARDSIM_FUZZ_CASES_PER_SEED");
  const int cases = text ? std::atoi(text) : 0;
  return cases > 0 ? cases : 100;
}
constexpr int kFileEvery = 8;      // every 8th case goes through the file loaders (core/inputs.h)

// Hugging Face config.json files as published (fields that matter, and some that do not).
const char* const kHfConfigs[] = {
    R"({"architectures": ["LlamaForCausalLM"], "attention_bias": false, "bos_token_id": 128000, "hidden_act": "silu",
        "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 8192, "model_type": "llama",
        "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
        "rope_scaling": null, "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
        "vocab_size": 128256})",
    R"({"architectures": ["MixtralForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
        "max_position_embeddings": 32768, "model_type": "mixtral", "num_attention_heads": 32, "num_experts_per_tok": 2,
        "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8, "rope_theta": 1000000.0,
        "router_aux_loss_coef": 0.02, "sliding_window": null, "tie_word_embeddings": false, "vocab_size": 32000})",
    R"({"architectures": ["DeepseekV3ForCausalLM"], "first_k_dense_replace": 3, "hidden_size": 7168,
        "intermediate_size": 18432, "kv_lora_rank": 512, "max_position_embeddings": 163840, "model_type": "deepseek_v3",
        "moe_intermediate_size": 2048, "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1,
        "num_attention_heads": 128, "num_experts_per_tok": 8, "num_hidden_layers": 61, "num_key_value_heads": 128,
        "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "rope_scaling": {"beta_fast": 32,
        "factor": 40, "mscale": 1.0, "original_max_position_embeddings": 4096, "type": "yarn"}, "v_head_dim": 128,
        "vocab_size": 129280})",
    R"({"activation_function": "gelu_new", "attn_pdrop": 0.1, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768,
        "n_head": 12, "n_layer": 12, "n_positions": 1024, "vocab_size": 50257})",
    R"({"hidden_size": 512, "intermediate_size": 2048, "max_position_embeddings": 2048, "model_type": "gpt_neox",
        "num_attention_heads": 8, "num_hidden_layers": 6, "rotary_pct": 0.25, "tie_word_embeddings": false,
        "vocab_size": 50304})",
};

json ReadExample(const std::string& name) {
  std::ifstream in(std::string(SHARDSIM_EXAMPLES_DIR) + "/" + name);
  return json::parse(in);
}

// A cluster of CPU cores with a calibration section, so the calibration reader is fuzzed too.
ClusterSpec CalibratedCluster() {
  ClusterSpec c = ParseClusterPreset("local:4", "--cluster");
  c.topology.local_hosts = 2;
  c.links["tcp"] = {1.2e9, 3e-5, 1, 0.9, "measured"};
  CalibrationSpec& k = c.calibration;
  k.dtype = "fp32";
  k.gemm.m = k.gemm.n = k.gemm.k = {16, 256};
  k.gemm.flop_per_s = {1e10, 2e10, 3e10, 4e10, 5e10, 6e10, 7e10, 8e10};
  k.kernels["attention"] = {true, {{64, 1e9}, {256, 2e9}}};
  k.kernels["mlp_norm"] = {false, {{64, 5e9}}};
  k.collectives.push_back({"all-reduce", 2, "shm", {{1024, 1e-5}, {1 << 20, 1e-3}}});
  k.collectives.push_back({"permute", 2, "tcp", {{1024, 5e-5}}});
  k.processor = "test cpu";
  k.cores_per_host = 2;
  k.hosts = 2;
  k.spread = 0.05;
  return c;
}

std::vector<json> ModelSeeds() {
  std::vector<json> seeds;
  for (const ModelPreset& p : ModelPresets()) seeds.push_back(ModelToJson(p.spec));
  seeds.push_back(ReadExample("my-1b.model.json"));
  return seeds;
}

std::vector<json> HfSeeds() {
  std::vector<json> seeds;
  for (const char* text : kHfConfigs) seeds.push_back(json::parse(text));
  return seeds;
}

std::vector<json> ClusterSeeds() {
  std::vector<json> seeds;
  for (const SystemInfo& s : ClusterSystems()) {
    if (s.name != "local") seeds.push_back(ClusterToJson(ParseClusterPreset(s.example, "--cluster")));
  }
  seeds.push_back(ClusterToJson(ParseClusterPreset("tpu-v5e:4x4,slices=2", "--cluster")));
  seeds.push_back(ClusterToJson(CalibratedCluster()));
  seeds.push_back(ReadExample("a100-32-oversubscribed.cluster.json"));
  return seeds;
}

std::vector<json> PlanSeeds() {
  PlanSpec small;
  small.mesh.data = 8;
  small.global_batch_size = 64;
  small.seq_len = 4096;
  PlanSpec full = small;
  full.mesh = {.data = 2, .fsdp = 2, .tensor = 4, .context = 2, .pipeline = 4, .expert = 2};
  full.pipeline_schedule = "interleaved-1f1b";
  full.virtual_stages = 2;
  full.pipeline_layout = "Et*4|t*4|t*4|t*4L";
  full.zero_stage = 2;
  full.recompute = Recompute::kSelective;
  full.ep_capacity_factor = 1.25;
  full.fsdp_reshard_after_forward = true;
  full.framework = "megatron-core";
  full.context_kv = "all-gather";
  full.master_weights = "fp32";
  full.attention_kernel = "flex";
  return {PlanToJson(small), PlanToJson(full), json{{"mesh", {{"data", 8}}}, {"global_batch_size", 64}, {"seq_len", 4096}},
          ReadExample("llama3-70b-dgx-h100-64.plan.json"), ReadExample("mixtral-8x7b-tpu-v5p-128.plan.json")};
}

// What went wrong with one accepted spec ("" when nothing).
using Checks = std::vector<std::string>;
void Expect(Checks& problems, bool ok, const std::string& what) {
  if (!ok) problems.push_back(what);
}
bool FiniteNonNegative(double x) { return std::isfinite(x) && x >= 0; }

Checks CheckModel(const ModelSpec& m) {
  Checks problems;
  const ParamCounts p = CountParams(m);
  for (const int64_t part : {p.embedding, p.head, p.attention, p.dense_mlp, p.routed_experts, p.shared_experts, p.router, p.norms}) {
    Expect(problems, part >= 0, "a negative parameter count");
  }
  Expect(problems, p.total > 0 && p.active > 0 && p.active <= p.total, "total and active parameters");
  for (const int64_t seq : {int64_t{1}, m.max_seq_len}) {
    const FlopsPerToken f = ForwardFlopsPerToken(m, seq);
    Expect(problems, FiniteNonNegative(f.matmul) && FiniteNonNegative(f.attention) && f.forward() > 0 && std::isfinite(f.training()),
           "FLOPs per token at seq_len " + std::to_string(seq));
  }
  Expect(problems, ModelFromJson(ParseJsonText(ModelToJson(m).dump(), "back.json"), "back.json") == m, "the model reads back differently");
  return problems;
}

Checks CheckCluster(const ClusterSpec& c) {
  Checks problems;
  const int64_t devices = DeviceCount(c);
  Expect(problems, devices >= 1 && devices <= (int64_t{1} << 24), "device count " + std::to_string(devices));
  Expect(problems, !c.chip.peak_flop_per_s.empty(), "no peak");
  for (const auto& [dtype, peak] : c.chip.peak_flop_per_s) {
    Expect(problems, std::isfinite(peak) && peak > 0 && std::isfinite(peak * static_cast<double>(devices)), "peak " + dtype);
  }
  Expect(problems, c.chip.hbm_bytes > 0 && std::isfinite(static_cast<double>(c.chip.hbm_bytes) * static_cast<double>(devices)), "HBM bytes");
  Expect(problems, std::isfinite(c.chip.hbm_bandwidth_bytes_per_s) && c.chip.hbm_bandwidth_bytes_per_s > 0, "HBM bandwidth");
  for (const auto& [name, l] : c.links) {
    Expect(problems, std::isfinite(l.bandwidth_bytes_per_s) && l.bandwidth_bytes_per_s > 0 && FiniteNonNegative(l.latency_s) &&
                         l.efficiency > 0 && l.efficiency <= 1 && l.links_per_device >= 1,
           "link " + name);
  }
  for (const std::string& link : RequiredLinks(c.topology)) Expect(problems, c.links.count(link) == 1, "missing link " + link);
  Expect(problems, c.efficiency.matmul > 0 && c.efficiency.matmul <= 1 && c.efficiency.hbm > 0 && c.efficiency.hbm <= 1, "efficiency");
  Expect(problems, std::isfinite(c.topology.oversubscription) && c.topology.oversubscription >= 1, "oversubscription");
  Expect(problems, ClusterFromJson(ParseJsonText(ClusterToJson(c).dump(), "back.json"), "back.json") == c, "the cluster reads back differently");
  return problems;
}

Checks CheckPlan(const PlanSpec& p) {
  Checks problems;
  const PlanShape s = DerivePlanShape(p);
  Expect(problems, s.devices >= 1 && s.devices <= (int64_t{1} << 24), "mesh product " + std::to_string(s.devices));
  Expect(problems, s.batch_replicas >= 1 && s.sequences_per_replica >= 0 && s.num_microbatches >= 0 && s.tokens_per_step > 0, "plan shape");
  Expect(problems, std::isfinite(p.ep_capacity_factor) && p.ep_capacity_factor >= 1, "ep_capacity_factor");
  const json written = PlanToJson(p);
  Expect(problems, PlanToJson(PlanFromJson(ParseJsonText(written.dump(), "back.json"), "back.json")) == written, "the plan reads back differently");
  return problems;
}

// A crash is no exception to catch: the signal handler prints the case in flight, through the one
// static a handler can reach, and dies of the same signal.
const std::string*& CaseInFlight() {
  static const std::string* text = nullptr;
  return text;
}

extern "C" void PrintCaseAndDie(int signal) {
  if (const std::string* text = CaseInFlight()) {
    constexpr char kHeader[] = "\nThe fuzz case below crashed the reader; its mutated text:\n";
    (void)!::write(STDERR_FILENO, kHeader, sizeof kHeader - 1);
    (void)!::write(STDERR_FILENO, text->data(), std::min<size_t>(text->size(), 3000));
    (void)!::write(STDERR_FILENO, "\n", 1);
  }
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

// Runs the fuzz cases of one kind of file. `from_text` reads a text named kSource as the loaders
// do once they hold the file's text; `from_file` is the loader itself (core/inputs.h), given a path.
template <typename Spec>
class FuzzRun {
 public:
  using FromText = std::function<Spec(const std::string& text)>;
  using FromFile = std::function<Spec(const std::string& path)>;
  using Check = std::function<Checks(const Spec&)>;

  FuzzRun(std::string kind, FromText from_text, FromFile from_file, Check check)
      : kind_(std::move(kind)), from_text_(std::move(from_text)), from_file_(std::move(from_file)), check_(std::move(check)) {
    for (const int signal : kCrashSignals) std::signal(signal, PrintCaseAndDie);
  }
  ~FuzzRun() {
    for (const int signal : kCrashSignals) std::signal(signal, SIG_DFL);
    CaseInFlight() = nullptr;
  }

  void Run(const std::vector<json>& seeds, uint64_t seed) {
    JsonMutator mutator(seed);
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("shardsim_fuzz_" + kind_ + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    for (const json& s : seeds) {
      for (int i = 0, cases = CasesPerSeed(); i < cases; ++i) {
        const std::string text = mutator.Mutate(s);
        const bool via_file = cases_ % kFileEvery == 0;
        const std::string path = (dir / (kind_ + ".json")).string();
        if (via_file) std::ofstream(path, std::ios::binary) << text;
        One(text, via_file ? path : "");
      }
    }
    std::filesystem::remove_all(dir);
    std::printf("[ fuzz     ] %s: %d cases, %d rejected, %d accepted\n", kind_.c_str(), cases_, rejected_, cases_ - rejected_);
  }

  // One case: `path` empty reads `text` in memory, else loads the file at `path` holding it.
  void One(const std::string& text, const std::string& path) {
    ++cases_;
    CaseInFlight() = &text;
    const std::string source = path.empty() ? kSource : path;
    std::string failure;
    try {
      const Spec spec = path.empty() ? from_text_(text) : from_file_(path);
      try {
        for (const std::string& problem : check_(spec)) failure += (failure.empty() ? "" : "; ") + problem;
      } catch (const std::exception& e) {
        failure = std::string("checking the accepted spec threw: ") + e.what();
      }
    } catch (const InputError& e) {
      ++rejected_;
      const std::string message = e.what();
      if (message.find('\n') != std::string::npos || message.find('\r') != std::string::npos) failure = "InputError of several lines: " + message;
      if (message.find(source) == std::string::npos) failure = "InputError that does not name " + source + ": " + message;
    } catch (const std::exception& e) {
      failure = std::string("not an InputError: ") + e.what();
    } catch (...) {
      failure = "a non-standard exception";
    }
    if (failure.empty()) return;
    if (++failures_ <= 10) {
      const std::string shown = text.size() > 3000 ? text.substr(0, 3000) + "... (" + std::to_string(text.size()) + " bytes)" : text;
      ADD_FAILURE() << kind_ << " case " << cases_ << (path.empty() ? "" : " (via the file loader)") << ": " << failure
                    << "\n--- mutated text ---\n" << shown << "\n--------------------";
    }
  }

 private:
  static constexpr int kCrashSignals[] = {SIGSEGV, SIGABRT, SIGFPE, SIGBUS, SIGILL};

  std::string kind_;
  FromText from_text_;
  FromFile from_file_;
  Check check_;
  int cases_ = 0, rejected_ = 0, failures_ = 0;
};

TEST(JsonFuzzTest, ModelFiles) {
  FuzzRun<ModelSpec> run(
      "model", [](const std::string& text) { return ModelFromJson(ParseJsonText(text, kSource), kSource); }, LoadModel, CheckModel);
  run.Run(ModelSeeds(), 1);
}

TEST(JsonFuzzTest, HuggingFaceConfigs) {
  const auto from_text = [](const std::string& text) {
    const json value = ParseJsonText(text, kSource);
    return IsHfConfig(value) ? ModelFromHfConfig(value, kSource, "hf-model") : ModelFromJson(value, kSource);
  };
  FuzzRun<ModelSpec> run("hf", from_text, LoadModel, CheckModel);
  // More cases per seed here: there are only a few seeds.
  for (uint64_t seed = 2; seed < 6; ++seed) run.Run(HfSeeds(), seed);
}

TEST(JsonFuzzTest, ClusterFiles) {
  FuzzRun<ClusterSpec> run(
      "cluster", [](const std::string& text) { return ClusterFromJson(ParseJsonText(text, kSource), kSource); }, LoadCluster, CheckCluster);
  run.Run(ClusterSeeds(), 7);
}

TEST(JsonFuzzTest, PlanFiles) {
  FuzzRun<PlanSpec> run(
      "plan", [](const std::string& text) { return PlanFromJson(ParseJsonText(text, kSource), kSource); },
      [](const std::string& path) { return LoadPlan(path, {}); }, CheckPlan);
  for (uint64_t seed = 8; seed < 12; ++seed) run.Run(PlanSeeds(), seed);
}

// `--set key=value` values go through the same JSON parsing as files.
TEST(JsonFuzzTest, PlanOverrides) {
  JsonMutator mutator(12);
  const std::vector<std::string> keys = PlanOverrideKeys();
  int cases = 0;
  for (int i = 0; i < 600; ++i) {
    const std::string key = keys[mutator.Below(keys.size())];
    const std::string value = i % 2 ? mutator.OddLiteral() : mutator.OddValue().dump();
    const std::vector<std::string> overrides = {"global_batch_size=64", "seq_len=128", key + "=" + value};
    ++cases;
    try {
      const Checks problems = CheckPlan(LoadPlan("", overrides));
      EXPECT_TRUE(problems.empty()) << "--set " << key << "=" << value << ": " << problems.front();
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "--set " << key << "=" << value << ": not an InputError: " << e.what();
    }
  }
  std::printf("[ fuzz     ] --set: %d cases\n", cases);
}

// Whole-file problems the mutations do not reach: a file over the size limit (sparse, so cheap)
// and one line of 100000 brackets.
TEST(JsonFuzzTest, HugeAndDeepFiles) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("shardsim_fuzz_files" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string huge = (dir / "huge.json").string();
  std::ofstream(huge) << "{}";
  std::filesystem::resize_file(huge, (64u << 20) + 1);
  try {
    LoadModel(huge);
    ADD_FAILURE() << "a file over 64 MiB was read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(huge), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("64 MiB"), std::string::npos) << e.what();
  }
  const std::string deep = (dir / "deep.json").string();
  std::ofstream(deep) << std::string(100000, '[') + std::string(100000, ']');
  try {
    LoadPlan(deep, {});
    ADD_FAILURE() << "100000 levels were read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(deep + ":1:65"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace shardsim
