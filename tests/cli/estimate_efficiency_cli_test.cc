// `shardsim estimate` with a cluster's own efficiencies: an attention kernel's figure and the
// backward passes' share of the forward rates, in the text and the report JSON.
#include "tests/cli/cli_test_util.h"

#include <fstream>

namespace shardsim::cli_test {
namespace {

using nlohmann::json;

// attention_kernel: a kernel with its own figure in the cluster runs at it (a slower Triton kernel
// makes a slower step), one without runs at the cluster's attention efficiency; the line names
// which; an unknown kernel names the field and its values.
TEST(CliEstimateTest, AttentionKernelRunsAtItsOwnEfficiency) {
  const std::string path = ::testing::TempDir() + "/kernels.cluster.json";
  ASSERT_EQ(RunShardsim({"describe", "--cluster", "dgx-h100:8", "--write-cluster", path}).exit_code, 0);
  json cluster = json::parse(std::ifstream(path));
  cluster["efficiency"]["attention"] = 0.5;
  cluster["efficiency"]["attention_kernels"] = {{"triton", 0.15}};
  std::ofstream(path) << cluster.dump();
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"estimate", "--model", "llama3-8b", "--cluster", path, "--set", "mesh.data=8", "--set", "global_batch_size=8",
                                     "--set", "seq_len=8192"};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunShardsim(args);
  };
  EXPECT_TRUE(IsInputError(with({"--set", "attention_kernel=xformers"}), {"attention_kernel", "flash, triton, flex"}));
  json flash, triton, flex;
  ASSERT_TRUE(IsJsonSuccess(with({"--json"}), &flash));
  ASSERT_TRUE(IsJsonSuccess(with({"--set", "attention_kernel=triton", "--json"}), &triton));
  ASSERT_TRUE(IsJsonSuccess(with({"--set", "attention_kernel=flex", "--json"}), &flex));
  EXPECT_GT(triton["step_time_s"].get<double>(), flash["step_time_s"].get<double>() * 1.1);
  EXPECT_DOUBLE_EQ(flex["step_time_s"].get<double>(), flash["step_time_s"].get<double>());
  const CliResult text = with({"--set", "attention_kernel=triton"});
  EXPECT_NE(text.out.find("attention   triton kernel at 0.150 of the bf16 peak (the cluster's attention_kernels.triton"), std::string::npos) << text.out;
  EXPECT_NE(with({"--set", "attention_kernel=flex"}).out.find("no figure of its own in the cluster"), std::string::npos);
}

// Without blockwise attention (flash_attention false) QK^T and AV are batched products around a
// separate softmax: they run at the matmul share whatever the cluster's attention figures say; the
// utilisation line and the report's attention_efficiency say so.
TEST(CliEstimateTest, UnfusedAttentionRunsAtTheMatmulShare) {
  const std::string path = ::testing::TempDir() + "/unfused.cluster.json";
  ASSERT_EQ(RunShardsim({"describe", "--cluster", "dgx-h100:8", "--write-cluster", path}).exit_code, 0);
  json cluster = json::parse(std::ifstream(path));
  auto step = [&](double attention, const std::string& flash) {
    cluster["efficiency"]["attention"] = attention;
    std::ofstream(path) << cluster.dump();
    json out;
    EXPECT_TRUE(IsJsonSuccess(RunShardsim({"estimate", "--model", "llama3-8b", "--cluster", path, "--set", "mesh.data=8", "--set", "global_batch_size=8",
                                           "--set", "seq_len=4096", "--set", "flash_attention=" + flash, "--json"}),
                              &out));
    // The report names the share the attention ran at.
    EXPECT_DOUBLE_EQ(out["attention_efficiency"].get<double>(), flash == "true" ? attention : out["efficiency"]["matmul"].get<double>());
    return out["step_time_s"].get<double>();
  };
  EXPECT_DOUBLE_EQ(step(0.2, "false"), step(0.6, "false"));
  EXPECT_GT(step(0.2, "true"), step(0.6, "true") * 1.05);
  const CliResult text = RunShardsim({"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--set", "mesh.data=8", "--set",
                                      "global_batch_size=8", "--set", "seq_len=4096", "--set", "flash_attention=false"});
  EXPECT_NE(text.out.find("of the bf16 peak (unfused, flash_attention false: batched products at the bf16 matmul share)"), std::string::npos) << text.out;
}

// A cluster's efficiency.backward slows the gradient passes only: a plan that recomputes (one
// more forward) slows by less, in proportion, than one that does not; the utilisation line says
// the share; a share out of (0, 1] is one line naming the field.
TEST(CliEstimateTest, BackwardShareSlowsTheGradientPasses) {
  const std::string path = ::testing::TempDir() + "/backward.cluster.json";
  ASSERT_EQ(RunShardsim({"describe", "--cluster", "dgx-h100:8", "--write-cluster", path}).exit_code, 0);
  json cluster = json::parse(std::ifstream(path));
  auto step = [&](double backward, const std::string& recompute, std::string* text = nullptr) {
    cluster["efficiency"]["backward"] = backward;
    std::ofstream(path) << cluster.dump();
    const std::vector<std::string> args = {"estimate", "--model", "llama3-8b", "--cluster", path, "--set", "mesh.data=8", "--set",
                                           "global_batch_size=8", "--set", "seq_len=8192", "--set", "recompute=" + recompute};
    if (text) *text = RunShardsim(args).out;
    std::vector<std::string> json_args = args;
    json_args.push_back("--json");
    json report;
    EXPECT_TRUE(IsJsonSuccess(RunShardsim(json_args), &report));
    return report.value("step_time_s", 0.0);
  };
  const double none = step(0.5, "none") / step(1, "none"), full = step(0.5, "full") / step(1, "full");
  EXPECT_GT(none, 1.3);
  EXPECT_GT(full, 1.2);
  EXPECT_LT(full, none);
  std::string text;
  step(0.5, "none", &text);
  EXPECT_NE(text.find("their backward passes at 0.500 of those rates"), std::string::npos) << text;
  json report;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"estimate", "--model", "llama3-8b", "--cluster", path, "--set", "mesh.data=8", "--set", "global_batch_size=8", "--set", "seq_len=4096", "--json"}), &report));
  EXPECT_DOUBLE_EQ(report["efficiency"]["backward"].get<double>(), 0.5);  // the report carries the efficiencies it used
  EXPECT_TRUE(report["efficiency"].contains("source"));
  cluster["efficiency"]["backward"] = 1.5;
  std::ofstream(path) << cluster.dump();
  EXPECT_TRUE(IsInputError(RunShardsim({"estimate", "--model", "llama3-8b", "--cluster", path, "--set", "mesh.data=8"}), {"efficiency/backward"}));
}

// Eager elementwise kernels (torchtitan's uncompiled llama): a slower step with the same FLOPs,
// said in the text; a bad value names the field and its values; with --framework torchtitan the
// plan asks for the compiled model (fused) and the export compiles it.
TEST(CliEstimateTest, EagerElementwiseKernelsCostTheirTraffic) {
  const std::vector<std::string> base = {"estimate", "--model", "llama3-8b", "--cluster", "grand-teton-h100:8", "--set", "mesh.fsdp=8", "--set", "zero_stage=3",
                                         "--set", "global_batch_size=16", "--set", "seq_len=8192", "--set", "micro_batch_size=2"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return RunShardsim(args);
  };
  json fused, eager;
  ASSERT_TRUE(IsJsonSuccess(with({"--json"}), &fused));
  ASSERT_TRUE(IsJsonSuccess(with({"--set", "elementwise_kernels=eager", "--json"}), &eager));
  EXPECT_GT(eager["step_time_s"].get<double>(), 1.05 * fused["step_time_s"].get<double>());
  EXPECT_DOUBLE_EQ(eager["model_flops_per_step"].get<double>(), fused["model_flops_per_step"].get<double>());
  const CliResult text = with({"--set", "elementwise_kernels=eager-fused-norm"});
  EXPECT_NE(text.out.find("elementwise eager-fused-norm PyTorch kernels"), std::string::npos) << text.out;
  EXPECT_TRUE(IsInputError(with({"--set", "elementwise_kernels=compiled"}), {"elementwise_kernels", "fused, eager, eager-fused-norm"}));
  json planned;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"plan", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--global-batch-tokens", "1M", "--seq-len", "4096",
                                         "--framework", "torchtitan", "--export", "torchtitan", "--top", "1", "--json"}),
                            &planned));
  EXPECT_EQ(planned["plans"][0]["plan"]["elementwise_kernels"], "fused");
  const std::string exported = planned["plans"][0]["export"]["text"].get<std::string>();
  EXPECT_NE(exported.find("config.compile.components = [\"model\""), std::string::npos) << exported;
}


// fp8_recipe nvfp4: refused on a chip without FP4 tensor cores, naming the field and where it runs;
// on a B200 its products run at the fp4 peak (twice the fp8 one), so the step is faster than under
// MXFP8 and the text names the peak and that the efficiency is the cluster's FP8 figure; the
// quantised inputs it keeps are half a byte and the scales.
TEST(CliEstimateTest, Nvfp4RunsAtTheFp4PeakWhereTheChipHasOne) {
  auto with = [](const std::string& cluster, std::vector<std::string> extra) {
    std::vector<std::string> args = {"estimate", "--model", "llama3-8b", "--cluster", cluster, "--set", "mesh.fsdp=8", "--set", "global_batch_size=16",
                                     "--set", "seq_len=8192", "--set", "dtype=fp8"};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunShardsim(args);
  };
  EXPECT_TRUE(IsInputError(with("dgx-h100:8", {"--set", "fp8_recipe=nvfp4"}), {"fp8_recipe", "nvfp4", "FP4", "dgx-b200"}));
  json mx, nv;
  ASSERT_TRUE(IsJsonSuccess(with("dgx-b200:8", {"--set", "fp8_recipe=mxfp8", "--json"}), &mx));
  ASSERT_TRUE(IsJsonSuccess(with("dgx-b200:8", {"--set", "fp8_recipe=nvfp4", "--json"}), &nv));
  EXPECT_DOUBLE_EQ(nv["peak_flop_per_s"].get<double>(), 2 * mx["peak_flop_per_s"].get<double>());
  EXPECT_LT(nv["step_time_s"].get<double>(), mx["step_time_s"].get<double>());
  const CliResult text = with("dgx-b200:8", {"--set", "fp8_recipe=nvfp4", "--set", "saved_input_dtype=fp8"});
  EXPECT_NE(text.out.find("of 9 PFLOP/s fp4 peak per device"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("of the fp4 peak (the cluster's fp8_matmul figure: no NVFP4 GEMM efficiency of its own"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("kept for the backward at 0.56 B per element"), std::string::npos) << text.out;
}

// `estimate` of Llama 3 8B over fsdp 8 on dgx-h100:8 (8K tokens a device) with `extra` arguments.
CliResult EstimateLlama8bFsdp8(const std::vector<std::string>& extra) {
  return RunShardsimWith({"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--set", "mesh.fsdp=8", "--set", "global_batch_size=8", "--set",
                          "seq_len=8192"},
                         extra);
}

// wgrad_dtype bf16: an fp8 plan's weight gradients run at 16 bits (a slower step), which the fp8
// line says; refused with a 16-bit dtype and with FP8 saved inputs, naming the field.
TEST(CliEstimateTest, WeightGradientsAtSixteenBitsAreCheckedAndSaid) {
  const auto with = EstimateLlama8bFsdp8;
  EXPECT_TRUE(IsInputError(with({"--set", "wgrad_dtype=bf16"}), {"wgrad_dtype", "dtype fp8"}));
  EXPECT_TRUE(IsInputError(with({"--set", "dtype=fp8", "--set", "saved_input_dtype=fp8", "--set", "wgrad_dtype=bf16"}), {"wgrad_dtype", "saved_input_dtype bf16"}));
  EXPECT_TRUE(IsInputError(with({"--set", "dtype=fp8", "--set", "wgrad_dtype=fp4"}), {"wgrad_dtype", "bf16", "fp8"}));
  json fp8, mixed;
  ASSERT_TRUE(IsJsonSuccess(with({"--set", "dtype=fp8", "--json"}), &fp8));
  ASSERT_TRUE(IsJsonSuccess(with({"--set", "dtype=fp8", "--set", "wgrad_dtype=bf16", "--json"}), &mixed));
  EXPECT_EQ(mixed["plan"]["wgrad_dtype"], "bf16");
  EXPECT_GT(mixed["step_time_s"].get<double>(), fp8["step_time_s"].get<double>());
  const CliResult text = with({"--set", "dtype=fp8", "--set", "wgrad_dtype=bf16"});
  ASSERT_TRUE(text.exited && text.exit_code == 0) << text.err;
  EXPECT_NE(text.out.find("and the weight gradients' products there too (wgrad_dtype bf16)"), std::string::npos) << text.out;
}

// Decoder layers kept at 16 bits: refused outside fp8 plans and beyond the model's layers, said on
// the fp8 line, written back in the plan and marked in the program dump.
TEST(CliEstimateTest, SixteenBitLayersAreCheckedSaidAndDumped) {
  const auto with = EstimateLlama8bFsdp8;
  EXPECT_TRUE(IsInputError(with({"--set", "sixteen_bit_first_layers=1"}), {"/sixteen_bit_first_layers", "dtype fp8"}));
  EXPECT_TRUE(IsInputError(with({"--set", "dtype=fp8", "--set", "sixteen_bit_last_layers=32"}), {"/sixteen_bit_last_layers:", "keep all 32 decoder layers", "at most 31"}));
  EXPECT_TRUE(IsInputError(with({"--set", "dtype=fp8", "--set", "sixteen_bit_first_layers=one"}), {"sixteen_bit_first_layers"}));
  const std::vector<std::string> kept = {"--set", "dtype=fp8", "--set", "sixteen_bit_first_layers=1", "--set", "sixteen_bit_last_layers=2"};
  json fp8, mixed;
  ASSERT_TRUE(IsJsonSuccess(with({"--set", "dtype=fp8", "--json"}), &fp8));
  std::vector<std::string> json_args = kept;
  json_args.push_back("--json");
  ASSERT_TRUE(IsJsonSuccess(with(json_args), &mixed));
  EXPECT_EQ(mixed["plan"]["sixteen_bit_first_layers"], 1);
  EXPECT_EQ(mixed["plan"]["sixteen_bit_last_layers"], 2);
  EXPECT_GT(mixed["step_time_s"].get<double>(), fp8["step_time_s"].get<double>());
  const CliResult text = with(kept);
  ASSERT_TRUE(text.exited && text.exit_code == 0) << text.err;
  EXPECT_NE(text.out.find("decoder layer 0 (sixteen_bit_first_layers) and layers 30-31 (sixteen_bit_last_layers) run at 16 bits"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("expert dispatch"), std::string::npos) << "a dense model";
  // FP8 weight gathers: the 16-bit layers' at 16 bits, the casts the other layers'.
  std::vector<std::string> gathered = kept;
  gathered.insert(gathered.end(), {"--set", "zero_stage=3", "--set", "param_gather_dtype=fp8"});
  const CliResult gathers = with(gathered);
  ASSERT_TRUE(gathers.exited && gathers.exit_code == 0) << gathers.err;
  EXPECT_NE(gathers.out.find("the embedding and head, and the 16-bit layers', at 16 bits"), std::string::npos) << gathers.out;
  EXPECT_NE(gathers.out.find("of its other layers' weights to FP8"), std::string::npos) << gathers.out;
  std::vector<std::string> dump_args = kept;
  dump_args.insert(dump_args.end(), {"--dump-program", "--json"});
  json program;
  ASSERT_TRUE(IsJsonSuccess(with(dump_args), &program));
  int twins = 0;
  for (const json& layer : program["layer_programs"]) twins += layer.value("sixteen_bit", false) ? 1 : 0;
  EXPECT_EQ(twins, 1);
  const json& runs = program["stages"][0]["chunks"][0]["layer_runs"];
  ASSERT_EQ(runs.size(), 5u);
  EXPECT_EQ(runs[1]["count"], 1);
  EXPECT_EQ(runs[1].value("sixteen_bit", false), true);
  EXPECT_EQ(runs[2]["count"], 29);
  EXPECT_EQ(runs[2].value("sixteen_bit", false), false);
  EXPECT_EQ(runs[3]["count"], 2);
  EXPECT_EQ(runs[3].value("sixteen_bit", false), true);
}

// Transformer Engine's per-step FP8 weight cache: a weight and its transpose on Hopper, the weight
// alone under tensorwise scaling where the chip runs FP8 products in any layout (Blackwell's
// fp8_any_layout); block-scaled recipes keep both copies there too.
TEST(CliEstimateTest, BlackwellCachesOneCopyOfATensorwiseFp8Weight) {
  auto cache = [](const std::string& cluster, const std::string& recipe, std::string* text = nullptr) {
    const std::vector<std::string> args = {"estimate", "--model", "llama3-8b", "--cluster", cluster, "--set", "mesh.data=8", "--set", "global_batch_size=8",
                                           "--set", "seq_len=4096", "--set", "dtype=fp8", "--set", "fp8_weight_casts=per-step", "--set", "fp8_recipe=" + recipe};
    json out;
    EXPECT_TRUE(IsJsonSuccess(RunShardsimWith(args, {"--json"}), &out));
    if (text) *text = RunShardsimWith(args, {}).out;
    return out["memory"]["fp8_weight_cache"].get<double>();
  };
  std::string hopper, blackwell;
  const double h100 = cache("dgx-h100:8", "tensorwise", &hopper), b200 = cache("dgx-b200:8", "tensorwise", &blackwell);
  ASSERT_GT(h100, 0);
  EXPECT_DOUBLE_EQ(b200, h100 / 2);
  EXPECT_NE(blackwell.find("the cached FP8 weights hold"), std::string::npos) << blackwell;
  EXPECT_NE(blackwell.find("1.000 B per weight"), std::string::npos) << blackwell;
  EXPECT_NE(blackwell.find("no transpose, as the chip runs FP8 products in any layout"), std::string::npos) << blackwell;
  EXPECT_NE(hopper.find("the cached FP8 weights and their transposes hold"), std::string::npos) << hopper;
  EXPECT_DOUBLE_EQ(cache("dgx-b200:8", "blockwise"), cache("dgx-h100:8", "blockwise"));
}

}  // namespace
}  // namespace shardsim::cli_test
