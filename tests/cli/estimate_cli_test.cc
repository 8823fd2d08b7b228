// `shardsim estimate` end to end: the report JSON of the CLI docs, and its input errors.
#include "tests/cli/cli_test_util.h"

#include <algorithm>
#include <fstream>
#include <map>

#include "strategies/schedule.h"

namespace shardsim::cli_test {
namespace {

using nlohmann::json;

TEST(CliEstimateTest, ReportHasTheDocumentedFields) {
  json out;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"estimate", "--model", "llama3-70b", "--cluster", "dgx-h100:64", "--plan",
                                         std::string(SHARDSIM_EXAMPLES_DIR) + "/llama3-70b-dgx-h100-64.plan.json", "--json"}),
                            &out));
  for (const char* key : {"step_time_s", "tokens_per_s", "mfu", "hfu", "model_flops_per_step", "fits", "memory", "breakdown", "plan", "why"}) {
    EXPECT_TRUE(out.contains(key)) << key;
  }
  const json& memory = out["memory"];
  double parts = 0;
  for (const char* key : {"params", "grads", "optimizer", "activations", "buffers"}) parts += memory[key].get<double>();
  EXPECT_NEAR(parts, memory["peak_bytes_per_device"].get<double>(), 3.0);  // each rounded to a byte
  // Bytes are whole numbers (the model's doubles rounded), in memory and in every collective.
  for (const char* key : {"peak_bytes_per_device", "params", "grads", "optimizer", "activations", "buffers", "hbm_bytes"}) {
    EXPECT_TRUE(memory[key].is_number_integer()) << key << ": " << memory[key];
  }
  for (const json& stage : memory["stages"]) EXPECT_TRUE(stage["bytes_per_device"].is_number_integer()) << stage;
  ASSERT_FALSE(out["collectives"].empty());
  for (const json& c : out["collectives"]) EXPECT_TRUE(c["bytes"].is_number_integer()) << c;
  EXPECT_TRUE(out["breakdown"].contains("compute_s"));
  EXPECT_TRUE(out["breakdown"].contains("bubble_s"));
  EXPECT_TRUE(out["breakdown"]["exposed_comm_s"].is_object());
  // tokens/s and step time agree with the plan's batch.
  EXPECT_NEAR(out["tokens_per_s"].get<double>() * out["step_time_s"].get<double>(), 512.0 * 8192, 1.0);
  EXPECT_GT(out["mfu"].get<double>(), 0.05);
  EXPECT_LT(out["mfu"].get<double>(), 1.0);
  EXPECT_GE(out["hfu"].get<double>(), out["mfu"].get<double>());
  EXPECT_TRUE(out["fits"].get<bool>());
}

TEST(CliEstimateTest, DumpProgramIsDeterministic) {
  const std::vector<std::string> args = {"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:16", "--set", "mesh.data=2", "--set",
                                         "mesh.tensor=4", "--set", "mesh.pipeline=2", "--set", "global_batch_size=16", "--set",
                                         "seq_len=2048", "--dump-program"};
  const CliResult a = RunShardsim(args), b = RunShardsim(args);
  ASSERT_TRUE(a.exited && a.exit_code == 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out.find("tp_exit_attention"), std::string::npos);
}

// Every op of the program JSON carries the documented fields, by stream.
void ExpectOpFields(const json& op, const std::string& where) {
  for (const char* key : {"name", "phase", "stream", "bytes"}) EXPECT_TRUE(op.contains(key)) << where << " " << key << ": " << op.dump();
  EXPECT_NE(std::string("FBWR").find(op.value("phase", "?")), std::string::npos) << where << ": " << op.dump();
  if (op.value("stream", "") == "compute") {
    for (const char* key : {"kind", "flops", "m", "n", "k"}) EXPECT_TRUE(op.contains(key)) << where << " " << key << ": " << op.dump();
    EXPECT_FALSE(op.contains("collective")) << where;
  } else {
    for (const char* key : {"collective", "axes", "overlapped"}) EXPECT_TRUE(op.contains(key)) << where << " " << key << ": " << op.dump();
    EXPECT_TRUE(op["axes"].is_array()) << where;
    EXPECT_FALSE(op.contains("flops")) << where;
  }
}

TEST(CliEstimateTest, DumpProgramJsonHasTheDocumentedFieldsAndIsDeterministic) {
  const int64_t stages = 4, microbatches = 64 / 4;  // global batch 64 over data 4, micro-batch 1
  const std::vector<std::string> args = {"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:16", "--set", "mesh.data=4",
                                         "--set", "mesh.pipeline=4", "--set", "global_batch_size=64", "--set", "seq_len=2048",
                                         "--set", "pipeline_schedule=zbv", "--dump-program", "--json"};
  json out;
  const CliResult a = RunShardsim(args);
  ASSERT_TRUE(IsJsonSuccess(a, &out));
  EXPECT_EQ(a.out, RunShardsim(args).out);  // byte-identical

  EXPECT_EQ(out["model"], "llama3-8b");
  EXPECT_EQ(out["schedule"], "zbv");
  EXPECT_EQ(out["plan"]["pipeline_schedule"], "zbv");
  EXPECT_EQ(out["plan"]["mesh"]["pipeline"], stages);
  EXPECT_EQ(out["microbatches"], microbatches);
  EXPECT_EQ(out["tokens_per_microbatch"], 2048);
  EXPECT_GT(out["model_flops_per_step"].get<double>(), 0);

  ASSERT_TRUE(out["layer_programs"].is_array());
  std::vector<std::string> kinds;
  for (const json& layer : out["layer_programs"]) {
    kinds.push_back(layer["kind"]);
    ASSERT_FALSE(layer["ops"].empty()) << layer["kind"];
    for (const json& op : layer["ops"]) ExpectOpFields(op, "layer " + layer["kind"].get<std::string>());
  }
  EXPECT_EQ(kinds, (std::vector<std::string>{"dense", "embedding", "head"}));  // a dense model: no MoE program
  ExpectOpFields(out["pipeline_send"], "pipeline_send");
  EXPECT_EQ(out["pipeline_send"]["collective"], "permute");
  EXPECT_EQ(out["pipeline_send"]["axes"], json::array({"pipeline"}));

  const json& st = out["stages"];
  ASSERT_EQ(st.size(), static_cast<size_t>(stages));
  int64_t layers = 0;
  for (size_t s = 0; s < st.size(); ++s) {
    const std::string where = "stage " + std::to_string(s);
    EXPECT_EQ(st[s]["stage"], s);
    for (const char* key : {"dense_params", "expert_params", "activation_peak_bytes"}) EXPECT_TRUE(st[s][key].is_number()) << where << " " << key;
    EXPECT_GT(st[s]["dense_params"].get<double>(), 0) << where;
    EXPECT_EQ(st[s]["expert_params"].get<double>(), 0) << where;
    ASSERT_EQ(st[s]["chunks"].size(), 2u) << where;
    for (size_t c = 0; c < 2; ++c) {
      const json& chunk = st[s]["chunks"][c];
      EXPECT_EQ(chunk["chunk"], c);
      EXPECT_EQ(chunk["direction"], 0);
      // The V: chunk 0 of stage s at position s, chunk 1 at 2p - 1 - s.
      EXPECT_EQ(chunk["position"], c == 0 ? static_cast<int64_t>(s) : 2 * stages - 1 - static_cast<int64_t>(s)) << where;
      EXPECT_EQ(chunk["embedding"], s == 0 && c == 0) << where;
      EXPECT_EQ(chunk["head"], s == 0 && c == 1) << where;
      int64_t dense = 0;
      for (const json& run : chunk["layer_runs"]) {
        if (run["kind"] == "dense") dense += run["count"].get<int64_t>();
      }
      EXPECT_EQ(dense, chunk["layers"].get<int64_t>()) << where;
      EXPECT_TRUE(chunk["first_layer"].is_number_integer()) << where;
      layers += dense;
    }
    // Every micro-batch's F, B and W on both chunks, in the schedule's order.
    const json& tasks = st[s]["tasks"];
    ASSERT_EQ(tasks.size(), static_cast<size_t>(3 * 2 * microbatches)) << where;
    const std::vector<strategies::Task> expected = strategies::FindSchedule("zbv")->Tasks(stages, microbatches, 2, static_cast<int64_t>(s));
    ASSERT_EQ(tasks.size(), expected.size()) << where;
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ(tasks[i]["microbatch"], expected[i].microbatch) << where << " task " << i;
      EXPECT_EQ(tasks[i]["chunk"], expected[i].chunk) << where << " task " << i;
      EXPECT_EQ(tasks[i]["phase"], strategies::ToString(expected[i].phase)) << where << " task " << i;
    }
    EXPECT_FALSE(st[s]["step_ops"].empty()) << where;
    for (const json& op : st[s]["step_ops"]) ExpectOpFields(op, where + " step op");
  }
  EXPECT_EQ(layers, 32);
  // ZB-V on the first stage (the paper's figure): 2p - 1 forwards of chunk 0, then the first
  // micro-batch comes back down the V and runs F, B, W on chunk 1, which holds the loss.
  const json& first = st[0]["tasks"];
  for (int64_t i = 0; i < 2 * stages - 1; ++i) {
    EXPECT_EQ(first[i], json({{"microbatch", i}, {"chunk", 0}, {"phase", "F"}})) << i;
  }
  EXPECT_EQ(first[7], json({{"microbatch", 0}, {"chunk", 1}, {"phase", "F"}}));
  EXPECT_EQ(first[8], json({{"microbatch", 0}, {"chunk", 1}, {"phase", "B"}}));
  EXPECT_EQ(first[9], json({{"microbatch", 0}, {"chunk", 1}, {"phase", "W"}}));

  // Without --json the text dump is unchanged.
  std::vector<std::string> text_args = args;
  text_args.pop_back();
  const CliResult text = RunShardsim(text_args);
  ASSERT_TRUE(text.exited && text.exit_code == 0) << text.err;
  EXPECT_EQ(text.out.rfind("step model=llama3-8b schedule=zbv", 0), 0u) << text.out.substr(0, 200);
}

TEST(CliEstimateTest, InvalidPlansGiveThePreciseReason) {
  auto run = [](std::vector<std::string> sets) {
    std::vector<std::string> args = {"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:16"};
    for (const std::string& s : sets) args.insert(args.end(), {"--set", s});
    return RunShardsim(args);
  };
  EXPECT_TRUE(IsInputError(run({"mesh.data=16", "mesh.tensor=3", "global_batch_size=16", "seq_len=2048"}), {"mesh", "48 devices", "16"}));
  EXPECT_TRUE(IsInputError(run({"mesh.data=2", "mesh.pipeline=8", "global_batch_size=6", "seq_len=2048", "pipeline_schedule=interleaved-1f1b",
                                "virtual_stages=2"}),
                           {"interleaved-1f1b", "micro-batches", "multiple of pipeline=8"}));
  EXPECT_TRUE(IsInputError(run({"mesh.data=4", "mesh.pipeline=4", "global_batch_size=16", "seq_len=2048", "pipeline_schedule=dualpipe"}),
                           {"/global_batch_size", "dualpipe", "even number of micro-batches", "at least 2 x pipeline = 8"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"estimate", "--model", "llama3-8b", "--cluster", "dgx-a100:16", "--set", "mesh.data=16", "--set",
                                        "global_batch_size=16", "--set", "seq_len=2048", "--set", "dtype=fp8"}),
                           {"dtype", "'fp8' has no peak on A100"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:16"}), {"needs a plan"}));
}

TEST(CliEstimateTest, PlansThatDoNotFitSaySo) {
  json out;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"estimate", "--model", "llama3-70b", "--cluster", "dgx-h100:8", "--set", "mesh.data=8", "--set",
                                         "global_batch_size=8", "--set", "seq_len=4096", "--json"}),
                            &out));
  EXPECT_FALSE(out["fits"].get<bool>());
  EXPECT_NE(out["why"].get<std::string>().find("does not fit"), std::string::npos);
}

// pipeline_layout and fsdp_reshard_after_forward from --set come back in the report's plan, and
// that plan read back as --plan gives the same report; the collectives' per-step exposure adds
// up to the breakdown.
class CliPlanFieldsTest : public CliTest {};

TEST_F(CliPlanFieldsTest, LayoutAndReshardRoundTripThroughJson) {
  const std::vector<std::string> base = {"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:16", "--set", "mesh.fsdp=4",
                                         "--set", "mesh.pipeline=4", "--set", "global_batch_size=64", "--set", "seq_len=2048"};
  std::vector<std::string> args = base;
  for (const char* set : {"pipeline_schedule=zbv", "pipeline_layout=Et*3|(t*4|)*6t*5L", "fsdp_reshard_after_forward=true"}) {
    args.push_back("--set");
    args.push_back(set);
  }
  args.push_back("--json");
  json out;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim(args), &out));
  EXPECT_EQ(out["plan"]["pipeline_layout"], "Et*3|(t*4|)*6t*5L");
  EXPECT_EQ(out["plan"]["fsdp_reshard_after_forward"], true);
  const std::string plan = WriteJson("plan.json", out["plan"]);
  json again;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:16", "--plan", plan, "--json"}), &again));
  EXPECT_EQ(again["plan"], out["plan"]);
  EXPECT_EQ(again["step_time_s"], out["step_time_s"]);
  // The default under pipeline parallelism keeps the gathered parameters: fewer gathers, more memory.
  json kept;
  std::vector<std::string> defaults = base;
  defaults.push_back("--json");
  ASSERT_TRUE(IsJsonSuccess(RunShardsim(defaults), &kept));
  EXPECT_EQ(kept["plan"]["fsdp_reshard_after_forward"], false);
  EXPECT_GT(kept["memory"]["buffers"].get<double>(), out["memory"]["buffers"].get<double>());
  std::map<std::string, double> exposed;
  for (const json& c : out["collectives"]) exposed[c["stream"].get<std::string>() + " " + c["collective"].get<std::string>()] += c["exposed_per_step_s"].get<double>();
  for (const auto& [key, seconds] : out["breakdown"]["exposed_comm_s"].items()) EXPECT_NEAR(exposed[key], seconds.get<double>(), 1e-9) << key;
}

// The text report names the stage layout it used and FSDP kept gathered.
TEST(CliEstimateTest, TextShowsTheLayoutAndKeptGatheredFsdp) {
  const CliResult r = RunShardsim({"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:16", "--set", "mesh.fsdp=4", "--set", "mesh.pipeline=4",
                                   "--set", "global_batch_size=64", "--set", "seq_len=2048", "--set", "pipeline_schedule=zbv"});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.err;
  EXPECT_NE(r.out.find("layout      Et*4|(t*4|)*6t*4L (decoder layers per chunk in pipeline order: 4 x 8; even split)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gathered once per step"), std::string::npos) << r.out;
}

// A plan tied to a framework also reports the MFU that framework would print: torchtitan counts
// all of the attention (PaLM's count), Megatron-core half of it (shardsim's own but for local layers), each cited.
TEST(CliEstimateTest, FrameworkPlansShowTheFrameworksOwnMfu) {
  for (const auto& [framework, palm] : std::vector<std::pair<std::string, bool>>{{"torchtitan", true}, {"megatron-core", false}}) {
    json out;
    ASSERT_TRUE(IsJsonSuccess(RunShardsim({"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--set", "mesh.fsdp=8", "--set",
                                           "global_batch_size=16", "--set", "seq_len=8192", "--set", "framework=" + framework, "--json"}),
                              &out));
    ASSERT_TRUE(out.contains("framework_mfu")) << framework;
    const json& own = out["framework_mfu"];
    EXPECT_EQ(own["framework"], framework);
    EXPECT_NEAR(own["mfu"].get<double>(), out[palm ? "mfu_palm" : "mfu"].get<double>(), 1e-12) << framework;
    EXPECT_GT(out["mfu_palm"].get<double>(), out["mfu"].get<double>());
    EXPECT_NE(own["source"].get<std::string>().find(palm ? "get_dense_model_nparams_and_flops" : "num_floating_point_operations"), std::string::npos);
    const CliResult text = RunShardsim({"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--set", "mesh.fsdp=8", "--set",
                                        "global_batch_size=16", "--set", "seq_len=8192", "--set", "framework=" + framework});
    EXPECT_NE(text.out.find("MFU under " + framework + "'s FLOP count: "), std::string::npos) << text.out;
  }
  // Local layers: Megatron-core halves every layer's full context, where shardsim's own count
  // reads the windows, so its figure is the higher.
  json local;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"estimate", "--model", "gpt-oss-20b", "--cluster", "dgx-h100:8", "--set", "mesh.expert=8", "--set",
                                         "zero_stage=1", "--set", "global_batch_size=16", "--set", "seq_len=8192", "--set", "framework=megatron-core", "--json"}),
                            &local));
  EXPECT_GT(local["framework_mfu"]["mfu"].get<double>(), 1.05 * local["mfu"].get<double>());
  EXPECT_LT(local["framework_mfu"]["mfu"].get<double>(), local["mfu_palm"].get<double>());
  json plain;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--set", "mesh.fsdp=8", "--set",
                                         "global_batch_size=16", "--set", "seq_len=8192", "--json"}),
                            &plain));
  EXPECT_FALSE(plain.contains("framework_mfu"));
}

// --train-tokens: the whole run at the estimated rate, checked against the report's own tokens/s.
TEST(CliEstimateTest, TrainTokensGiveTheRunsTimeDeviceHoursAndCost) {
  const std::vector<std::string> base = {"estimate", "--model", "llama3-70b", "--cluster", "dgx-h100:64", "--plan",
                                         std::string(SHARDSIM_EXAMPLES_DIR) + "/llama3-70b-dgx-h100-64.plan.json"};
  std::vector<std::string> args = base;
  args.insert(args.end(), {"--train-tokens", "15T", "--price-per-device-hour", "2.5", "--json"});
  json out;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim(args), &out));
  ASSERT_TRUE(out.contains("training_run")) << out.dump();
  const json& run = out["training_run"];
  const double seconds = 15e12 / out["tokens_per_s"].get<double>();
  EXPECT_DOUBLE_EQ(run["tokens"].get<double>(), 15e12);
  EXPECT_NEAR(run["seconds"].get<double>(), seconds, 1e-9 * seconds);
  EXPECT_NEAR(run["days"].get<double>(), seconds / 86400, 1e-9 * seconds);
  EXPECT_NEAR(run["device_hours"].get<double>(), seconds * 64 / 3600, 1e-9 * seconds);
  EXPECT_EQ(run["devices"], 64);
  EXPECT_NEAR(run["cost"].get<double>(), 2.5 * seconds * 64 / 3600, 1e-8 * seconds);
  EXPECT_EQ(run["price_per_device_hour"], 2.5);
  // Unpriced: no cost. The text says it in days and device-hours.
  args = base;
  args.insert(args.end(), {"--train-tokens", "1.5e12", "--json"});
  ASSERT_TRUE(IsJsonSuccess(RunShardsim(args), &out));
  EXPECT_TRUE(out["training_run"]["cost"].is_null());
  EXPECT_NEAR(out["training_run"]["seconds"].get<double>(), 1.5e12 / out["tokens_per_s"].get<double>(), 1e-3);
  args = base;
  args.insert(args.end(), {"--train-tokens", "150B", "--price-per-device-hour", "2.5"});  // weeks at this rate
  const CliResult text = RunShardsim(args);
  ASSERT_TRUE(text.exited && text.exit_code == 0) << text.err;
  for (const char* words : {"training    150 B tokens in ", " days at ", " device-hours on 64 devices; cost ", " at 2.5 per device-hour"}) {
    EXPECT_NE(text.out.find(words), std::string::npos) << words << "\n" << text.out;
  }
  // Without --train-tokens the report has no run.
  args = base;
  args.push_back("--json");
  ASSERT_TRUE(IsJsonSuccess(RunShardsim(args), &out));
  EXPECT_FALSE(out.contains("training_run"));
}

TEST(CliEstimateTest, BadTrainTokensAndPricesAreOneLine) {
  const std::vector<std::string> base = {"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--set", "mesh.data=8",
                                         "--set", "global_batch_size=64", "--set", "seq_len=4096"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return RunShardsim(args);
  };
  for (const char* bad : {"0", "-1T", "nan", "inf", "1e19", "15X", "15TB", "T"}) {
    EXPECT_TRUE(IsInputError(with({"--train-tokens", bad}), {"--train-tokens"})) << bad;
  }
  for (const char* bad : {"0", "-2.5", "nan", "inf", "1e10", "two"}) {
    EXPECT_TRUE(IsInputError(with({"--train-tokens", "1T", "--price-per-device-hour", bad}), {"--price-per-device-hour"})) << bad;
  }
  EXPECT_TRUE(IsInputError(with({"--price-per-device-hour", "2.5"}), {"--price-per-device-hour", "--train-tokens"}));
}

// `estimate` of Llama 3 8B on 8 H100s (data 8, 8 sequences of 4096) with `extra` arguments.
CliResult EstimateLlama8bWith(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--set", "mesh.data=8", "--set", "global_batch_size=8", "--set", "seq_len=4096"};
  args.insert(args.end(), extra.begin(), extra.end());
  return RunShardsim(args);
}

// An FP8 recipe needs an fp8 plan, and microscaling a Blackwell chip: one line each.
TEST(CliEstimateTest, Fp8RecipesAreChecked) {
  auto with = EstimateLlama8bWith;
  EXPECT_TRUE(IsInputError(with({"--set", "fp8_recipe=rowwise"}), {"fp8_recipe", "dtype fp8"}));
  EXPECT_TRUE(IsInputError(with({"--set", "dtype=fp8", "--set", "fp8_recipe=mxfp8"}), {"fp8_recipe", "Blackwell"}));
  EXPECT_TRUE(IsInputError(with({"--set", "dtype=fp8", "--set", "fp8_recipe=square"}), {"fp8_recipe", "rowwise"}));
  json out;
  EXPECT_TRUE(IsJsonSuccess(with({"--set", "dtype=fp8", "--set", "fp8_recipe=blockwise", "--json"}), &out));
}

// FP8 products' saved inputs kept in FP8 need an fp8 plan, name their valid values, round-trip
// through the plan JSON the estimate prints, and keep less than the 16-bit originals.
TEST(CliEstimateTest, SavedInputDtypeIsCheckedAndKeepsLess) {
  auto with = EstimateLlama8bWith;
  EXPECT_TRUE(IsInputError(with({"--set", "saved_input_dtype=fp8"}), {"saved_input_dtype", "dtype fp8"}));
  EXPECT_TRUE(IsInputError(with({"--set", "dtype=fp8", "--set", "saved_input_dtype=int4"}), {"saved_input_dtype", "bf16", "fp8"}));
  json kept16, kept8;
  ASSERT_TRUE(IsJsonSuccess(with({"--set", "dtype=fp8", "--set", "saved_input_dtype=bf16", "--json"}), &kept16));
  ASSERT_TRUE(IsJsonSuccess(with({"--set", "dtype=fp8", "--set", "saved_input_dtype=fp8", "--json"}), &kept8));
  EXPECT_EQ(kept8["plan"]["saved_input_dtype"], "fp8");
  // The printed plan, read back, estimates the same memory.
  const std::string plan_path = ::testing::TempDir() + "/saved_input_dtype.plan.json";
  std::ofstream(plan_path) << kept8["plan"].dump();
  json again;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--plan", plan_path, "--json"}), &again));
  EXPECT_EQ(again["memory"]["activations"], kept8["memory"]["activations"]);
  EXPECT_LT(kept8["memory"]["activations"].get<double>(), kept16["memory"]["activations"].get<double>());
  EXPECT_EQ(kept8["step_time_s"].get<double>(), kept16["step_time_s"].get<double>()) << "a memory setting only";
}

// FP8 weight casts: the fp8 line says how much of its weights each micro-batch casts and why; a
// step-long cache (per-step) makes the step faster than casting every pass and is held in memory;
// a hidden data-parallel reduction's loss to NCCL's SMs is named on the time line.
TEST(CliEstimateTest, Fp8WeightCastsAndBorrowedSmsAreSaid) {
  auto with = [](std::vector<std::string> extra) {
    std::vector<std::string> args = {"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:16", "--set", "mesh.data=16",
                                     "--set", "global_batch_size=64", "--set", "seq_len=4096", "--set", "dtype=fp8"};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunShardsim(args);
  };
  const CliResult every = with({}), cached = with({"--set", "fp8_weight_casts=per-step"});
  ASSERT_TRUE(every.exit_code == 0 && cached.exit_code == 0) << every.err << cached.err;
  EXPECT_NE(every.out.find("casts 100.0% of its weights to FP8 forward and 100.0% backward (fp8_weight_casts unset: per-microbatch)"), std::string::npos) << every.out;
  EXPECT_NE(cached.out.find("casts 25.0% of its weights to FP8 forward and 0.0% backward (fp8_weight_casts per-step)"), std::string::npos) << cached.out;
  EXPECT_NE(every.out.find("lost to the SMs of the 132 that hidden collectives' kernels hold: NCCL's thread blocks"), std::string::npos) << every.out;
  json a, b;
  ASSERT_TRUE(IsJsonSuccess(with({"--json"}), &a));
  ASSERT_TRUE(IsJsonSuccess(with({"--set", "fp8_weight_casts=per-step", "--json"}), &b));
  EXPECT_LT(b["step_time_s"].get<double>(), a["step_time_s"].get<double>());
  EXPECT_NE(cached.out.find("the cached FP8 weights and their transposes hold "), std::string::npos) << cached.out;  // 2 B a weight, kept
  EXPECT_TRUE(a["memory"]["fp8_weight_cache"] == 0 && b["memory"]["fp8_weight_cache"].get<double>() > 0) << a["memory"] << b["memory"];
  EXPECT_GT(a["breakdown"]["compute_borrowed_s"].get<double>(), 0);
  EXPECT_TRUE(IsInputError(with({"--set", "fp8_weight_casts=once"}), {"fp8_weight_casts", "per-microbatch", "per-step"}));
}

// FP8 sequence-parallel gathers need an fp8 plan, say so on the fp8 line, and make a
// tensor-parallel step's gathers cheaper.
TEST(CliEstimateTest, Fp8TensorGatherIsCheckedAndGathersLess) {
  auto with = [](std::vector<std::string> extra) {
    std::vector<std::string> args = {"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--global-batch-tokens", "262144",
                                     "--seq-len", "8192", "--set", "mesh.tensor=8", "--set", "sequence_parallel=true"};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunShardsim(args);
  };
  EXPECT_TRUE(IsInputError(with({"--set", "tensor_gather_dtype=fp8"}), {"tensor_gather_dtype", "dtype fp8"}));
  json wide, narrow;
  ASSERT_TRUE(IsJsonSuccess(with({"--set", "dtype=fp8", "--json"}), &wide));
  ASSERT_TRUE(IsJsonSuccess(with({"--set", "dtype=fp8", "--set", "tensor_gather_dtype=fp8", "--json"}), &narrow));
  EXPECT_EQ(narrow["plan"]["tensor_gather_dtype"], "fp8");
  EXPECT_LT(narrow["step_time_s"].get<double>(), wide["step_time_s"].get<double>());
  const CliResult text = with({"--set", "dtype=fp8", "--set", "tensor_gather_dtype=fp8"});
  EXPECT_NE(text.out.find("gathered at 1.000 B per element"), std::string::npos) << text.out;
}

// FP8 weight gathers need an fp8 plan with gathered parameters, say so on the fp8 line, and make
// an FSDP step's gathers cheaper.
TEST(CliEstimateTest, Fp8ParamGatherIsCheckedAndGathersLess) {
  auto with = [](std::vector<std::string> extra) {
    std::vector<std::string> args = {"--set", "mesh.data=1", "--set", "mesh.fsdp=8", "--set", "zero_stage=3"};
    args.insert(args.end(), extra.begin(), extra.end());
    return EstimateLlama8bWith(args);
  };
  EXPECT_TRUE(IsInputError(with({"--set", "param_gather_dtype=fp8"}), {"param_gather_dtype", "dtype fp8"}));
  // Data parallelism without a sharded optimizer gathers nothing; an fsdp axis does, at any zero_stage.
  EXPECT_TRUE(IsInputError(EstimateLlama8bWith({"--set", "dtype=fp8", "--set", "param_gather_dtype=fp8"}), {"param_gather_dtype", "zero_stage >= 1"}));
  EXPECT_EQ(EstimateLlama8bWith({"--set", "mesh.data=1", "--set", "mesh.fsdp=8", "--set", "dtype=fp8", "--set", "param_gather_dtype=fp8"}).exit_code, 0);
  const CliResult text = with({"--set", "dtype=fp8", "--set", "param_gather_dtype=fp8"});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("weights gathered at 1.000 B per element"), std::string::npos) << text.out;
  json wide, narrow;
  ASSERT_TRUE(IsJsonSuccess(with({"--set", "dtype=fp8", "--set", "param_gather_dtype=bf16", "--set", "overlap.fsdp=false", "--json"}), &wide));
  ASSERT_TRUE(IsJsonSuccess(with({"--set", "dtype=fp8", "--set", "param_gather_dtype=fp8", "--set", "overlap.fsdp=false", "--json"}), &narrow));
  EXPECT_EQ(narrow["plan"]["param_gather_dtype"], "fp8");
  EXPECT_LT(narrow["step_time_s"].get<double>(), wide["step_time_s"].get<double>());
}

// A hybrid model estimates end to end (its mixers' scan in the breakdown), and a pattern that does
// not match its layers is one line naming the field.
TEST(CliEstimateTest, HybridMambaModel) {
  json out;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"estimate", "--model", "nemotron-3-nano-30b-a3b", "--cluster", "dgx-h100:8", "--set", "mesh.expert=8", "--set",
                                         "zero_stage=1", "--set", "global_batch_size=64", "--set", "seq_len=4096", "--json"}),
                            &out));
  EXPECT_GT(out["step_time_s"].get<double>(), 0);
  const std::string text = RunShardsim({"estimate", "--model", "nemotron-3-nano-30b-a3b", "--cluster", "dgx-h100:8", "--set", "mesh.expert=8", "--set",
                                        "zero_stage=1", "--set", "global_batch_size=64", "--set", "seq_len=4096", "--dump-program"})
                               .out;
  EXPECT_NE(text.find("ssd"), std::string::npos);
  EXPECT_NE(text.find("mamba_in"), std::string::npos);
  const std::string bad = ::testing::TempDir() + "/hybrid.model.json";
  std::ofstream(bad) << R"({"name": "h", "num_layers": 3, "hidden_size": 64, "num_heads": 4, "ffn_hidden_size": 128, "vocab_size": 256,
                            "max_seq_len": 512, "hybrid_pattern": "M*", "mamba": {"num_heads": 4, "head_dim": 16}})";
  EXPECT_TRUE(IsInputError(RunShardsim({"estimate", "--model", bad, "--cluster", "dgx-h100:8", "--set", "mesh.data=8", "--set", "global_batch_size=8",
                                        "--set", "seq_len=512"}),
                           {"hybrid_pattern", "num_layers=3"}));
  // Context parallelism over the mixers: their all-to-alls named as such; over more ranks than a
  // tensor rank's heads, refused naming the axis and the sizes that work.
  const std::string context = RunShardsim({"estimate", "--model", "nemotron-3-nano-30b-a3b", "--cluster", "dgx-h100:8", "--set", "mesh.context=8", "--set",
                                           "global_batch_size=8", "--set", "seq_len=4096"})
                                  .out;
  EXPECT_NE(context.find("exposed Mamba all-to-all over context"), std::string::npos) << context;
  // The simulator plays the same all-to-alls over the context ranks' links.
  nlohmann::json simulated;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"simulate", "--model", "nemotron-3-nano-30b-a3b", "--cluster", "dgx-h100:8", "--set", "mesh.context=8", "--set",
                                         "global_batch_size=8", "--set", "seq_len=4096", "--json"}),
                            &simulated));
  EXPECT_LT(std::abs(simulated["simulation"]["difference_from_estimate"].get<double>()), 0.05);
  int mixer_all_to_alls = 0;
  for (const auto& c : simulated["collectives"]) {
    if (c["layer"] == "mamba" && c["collective"] == "all-to-all" && c["axes"] == nlohmann::json::array({"context"})) ++mixer_all_to_alls;
  }
  EXPECT_EQ(mixer_all_to_alls, 12);  // z, x, B, C and dt to the heads and y back, forward and backward
  EXPECT_TRUE(IsInputError(RunShardsim({"estimate", "--model", "nemotron-3-nano-30b-a3b", "--cluster", "dgx-h100:128", "--set", "mesh.context=64", "--set",
                                        "mesh.tensor=2", "--set", "sequence_parallel=true", "--set", "global_batch_size=8", "--set", "seq_len=4096"}),
                           {"mesh/context", "Mamba-2", "1, 2, 4, 8, 16, 32"}));
}

// Sequence-parallel inputs kept gathered hold more activations and drop the backward's gathers;
// an unknown value names the field and its values.
TEST(CliEstimateTest, SequenceParallelInputsAreCheckedAndKeepMore) {
  auto with = [](std::vector<std::string> extra) {
    std::vector<std::string> args = {"--set", "mesh.data=1", "--set", "mesh.tensor=8", "--set", "sequence_parallel=true", "--set", "global_batch_size=1"};
    args.insert(args.end(), extra.begin(), extra.end());
    return EstimateLlama8bWith(args);
  };
  EXPECT_TRUE(IsInputError(with({"--set", "sequence_parallel_inputs=kept"}), {"sequence_parallel_inputs", "regather", "keep-gathered"}));
  json regather, kept;
  ASSERT_TRUE(IsJsonSuccess(with({"--set", "sequence_parallel_inputs=regather", "--json"}), &regather));
  ASSERT_TRUE(IsJsonSuccess(with({"--set", "sequence_parallel_inputs=keep-gathered", "--json"}), &kept));
  EXPECT_EQ(kept["plan"]["sequence_parallel_inputs"], "keep-gathered");
  EXPECT_GT(kept["memory"]["activations"].get<double>(), regather["memory"]["activations"].get<double>());
}

// Pipeline buffers: an unknown value names the field and its values; per micro-batch buffers
// are reported on their own line and in the JSON, inside the buffers.
TEST(CliEstimateTest, PipelineBuffersAreCheckedAndReported) {
  auto with = [](std::vector<std::string> extra) {
    std::vector<std::string> args = {"--set", "mesh.data=2", "--set", "mesh.pipeline=4", "--set", "global_batch_size=16"};
    args.insert(args.end(), extra.begin(), extra.end());
    return EstimateLlama8bWith(args);
  };
  EXPECT_TRUE(IsInputError(with({"--set", "pipeline_buffers=kept"}), {"pipeline_buffers", "per-transfer", "per-microbatch", "keep-outputs"}));
  json transfer, kept;
  ASSERT_TRUE(IsJsonSuccess(with({"--json"}), &transfer));
  ASSERT_TRUE(IsJsonSuccess(with({"--set", "pipeline_buffers=keep-outputs", "--json"}), &kept));
  EXPECT_EQ(transfer["memory"]["pipeline_buffers"].get<double>(), 0);
  EXPECT_GT(kept["memory"]["pipeline_buffers"].get<double>(), 0);
  EXPECT_NEAR(kept["memory"]["buffers"].get<double>() - kept["memory"]["pipeline_buffers"].get<double>(),
              transfer["memory"]["buffers"].get<double>(), 1);
  const CliResult text = with({"--set", "pipeline_buffers=per-microbatch"});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("(pipeline_buffers per-microbatch)"), std::string::npos) << text.out;
  EXPECT_EQ(with({}).out.find("pipeline_buffers"), std::string::npos);
  // GPipe's last stage holds every micro-batch in flight: its input buffers are all activations,
  // and the line says why it reads 0 B.
  const CliResult gpipe = with({"--set", "pipeline_schedule=gpipe", "--set", "pipeline_buffers=per-microbatch"});
  EXPECT_EQ(gpipe.exit_code, 0) << gpipe.err;
  EXPECT_NE(gpipe.out.find("0 B of stage 3's buffers beyond its activations"), std::string::npos) << gpipe.out;
}

// Each pipeline stage's memory: one entry per stage whose largest is the peak, at the peak stage;
// the first stage (embedding) and the last (head, logits) differ; the text's per-stage lines list
// them, six a line; one stage has no such line.
TEST(CliEstimateTest, MemoryPerPipelineStage) {
  json report;
  ASSERT_TRUE(IsJsonSuccess(EstimateLlama8bWith({"--set", "mesh.data=2", "--set", "mesh.pipeline=4", "--set", "global_batch_size=16", "--json"}), &report));
  const json& memory = report["memory"];
  ASSERT_EQ(memory["stages"].size(), 4u);
  double largest = 0;
  for (const json& stage : memory["stages"]) largest = std::max(largest, stage["bytes_per_device"].get<double>());
  EXPECT_NE(memory["stages"][0]["buffers"].get<double>(), memory["stages"][3]["buffers"].get<double>());
  EXPECT_DOUBLE_EQ(largest, memory["peak_bytes_per_device"].get<double>());
  EXPECT_DOUBLE_EQ(memory["stages"][memory["peak_stage"].get<size_t>()]["bytes_per_device"].get<double>(), largest);
  const CliResult text = EstimateLlama8bWith({"--set", "mesh.data=2", "--set", "mesh.pipeline=4", "--set", "global_batch_size=16"});
  EXPECT_NE(text.out.find("  per stage   0: "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(", 3: "), std::string::npos) << text.out;
  EXPECT_EQ(EstimateLlama8bWith({"--set", "mesh.data=8"}).out.find("per stage"), std::string::npos);
  // Eight stages: stages 0 to 5 on the first line, 6 and 7 on an aligned continuation line.
  const CliResult eight = EstimateLlama8bWith({"--set", "mesh.data=1", "--set", "mesh.pipeline=8", "--set", "global_batch_size=16"});
  const size_t first = eight.out.find("  per stage   0: ");
  ASSERT_NE(first, std::string::npos) << eight.out;
  const std::string line = eight.out.substr(first, eight.out.find('\n', first) - first);
  for (const char* stage : {", 1: ", ", 2: ", ", 3: ", ", 4: ", ", 5: "}) EXPECT_NE(line.find(stage), std::string::npos) << line;
  EXPECT_EQ(line.find(", 6: "), std::string::npos) << line;
  EXPECT_NE(eight.out.find(",\n              6: "), std::string::npos) << eight.out;
  EXPECT_NE(eight.out.find(", 7: "), std::string::npos) << eight.out;
}

// Tensor overlap's scope: an unknown value names the field and its values; single-product
// leaves the summed reductions exposed (a slower step) and says so on its own line.
TEST(CliEstimateTest, TensorOverlapScopeIsCheckedAndReported) {
  auto with = [](std::vector<std::string> extra) {
    std::vector<std::string> args = {"--set", "mesh.data=1", "--set", "mesh.tensor=8", "--set", "sequence_parallel=true",
                                     "--set", "overlap.tensor=true", "--set", "global_batch_size=1"};
    args.insert(args.end(), extra.begin(), extra.end());
    return EstimateLlama8bWith(args);
  };
  EXPECT_TRUE(IsInputError(with({"--set", "tensor_overlap_scope=some"}), {"tensor_overlap_scope", "all", "single-product"}));
  json all, single;
  ASSERT_TRUE(IsJsonSuccess(with({"--json"}), &all));
  ASSERT_TRUE(IsJsonSuccess(with({"--set", "tensor_overlap_scope=single-product", "--json"}), &single));
  EXPECT_EQ(single["plan"]["tensor_overlap_scope"], "single-product");
  EXPECT_GT(single["step_time_s"].get<double>(), all["step_time_s"].get<double>());
  const CliResult text = with({"--set", "tensor_overlap_scope=single-product"});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("(tensor_overlap_scope single-product)"), std::string::npos) << text.out;
  EXPECT_EQ(with({}).out.find("tensor_overlap_scope"), std::string::npos);
  // Row-wise FP8 scales leave the gathers into their products exposed too (pytorch#149990): a
  // slower step than tensor-wise scaling's, said on the same line; tensor-wise's says nothing of it.
  const std::vector<std::string> fp8 = {"--set", "tensor_overlap_scope=single-product", "--set", "dtype=fp8"};
  auto recipe = [&](const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> args = fp8;
    args.insert(args.end(), {"--set", "fp8_recipe=" + name});
    args.insert(args.end(), extra.begin(), extra.end());
    return with(args);
  };
  json rowwise, tensorwise;
  ASSERT_TRUE(IsJsonSuccess(recipe("rowwise", {"--json"}), &rowwise));
  ASSERT_TRUE(IsJsonSuccess(recipe("tensorwise", {"--json"}), &tensorwise));
  EXPECT_GT(rowwise["breakdown"]["exposed_comm_s"]["tensor all-gather"].get<double>(),
            tensorwise["breakdown"]["exposed_comm_s"]["tensor all-gather"].get<double>());
  EXPECT_NE(recipe("rowwise", {}).out.find("gathers into row-wise scaled FP8 products"), std::string::npos);
  EXPECT_EQ(recipe("tensorwise", {}).out.find("gathers into row-wise scaled FP8 products"), std::string::npos);
}

// master_weights: an unknown value, or bf16 weights under fp16 training, names the field; bf16
// weights and Adam state hold half of fp32-copy's 16 bytes per parameter, said on a states line.
TEST(CliEstimateTest, MasterWeightsAreCheckedAndReported) {
  auto with = [](std::vector<std::string> extra) {
    std::vector<std::string> args = {"--set", "mesh.data=1", "--set", "mesh.fsdp=8", "--set", "zero_stage=3", "--set", "global_batch_size=8"};
    args.insert(args.end(), extra.begin(), extra.end());
    return EstimateLlama8bWith(args);
  };
  EXPECT_TRUE(IsInputError(with({"--set", "master_weights=fp64"}), {"master_weights", "fp32-copy", "bf16"}));
  EXPECT_TRUE(IsInputError(with({"--set", "dtype=fp16", "--set", "master_weights=bf16"}), {"master_weights", "dtype fp16"}));
  json copy, pure;
  ASSERT_TRUE(IsJsonSuccess(with({"--json"}), &copy));
  ASSERT_TRUE(IsJsonSuccess(with({"--set", "master_weights=bf16", "--json"}), &pure));
  EXPECT_EQ(pure["plan"]["master_weights"], "bf16");
  const json& a = copy["memory"];
  const json& b = pure["memory"];
  const double states_copy = a["params"].get<double>() + a["grads"].get<double>() + a["optimizer"].get<double>();
  const double states_pure = b["params"].get<double>() + b["grads"].get<double>() + b["optimizer"].get<double>();
  EXPECT_NEAR(states_pure / states_copy, 0.5, 1e-9);
  const CliResult text = with({"--set", "master_weights=bf16"});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("states      bf16 weights, gradients and Adam state, no fp32 copy: 8 B per parameter"), std::string::npos) << text.out;
  EXPECT_EQ(with({}).out.find("master_weights"), std::string::npos);
  // A framework's default is attributed to it; the same value set by the plan is the plan's own.
  const CliResult titan = with({"--set", "framework=torchtitan"});
  EXPECT_EQ(titan.exit_code, 0) << titan.err;
  EXPECT_NE(titan.out.find("(master_weights fp32; torchtitan's default, docs/frameworks.md)"), std::string::npos) << titan.out;
  const CliResult own = with({"--set", "framework=torchtitan", "--set", "master_weights=fp32"});
  EXPECT_NE(own.out.find("(master_weights fp32)"), std::string::npos) << own.out;
}

}  // namespace
}  // namespace shardsim::cli_test
