// shardsim-gpu: the runtime's CUDA path on one GPU (docs/gpu.md). `info` names the device,
// `calibrate` measures it and writes a cluster JSON, `train` runs one rank's training steps.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "cuda/gpu_commands.h"

int main(int argc, char** argv) {
  namespace cuda = shardsim::cuda;
  CLI::App app{"shardsim-gpu: the runtime's CUDA path on one GPU (measure it, train one rank on it)"};
  app.require_subcommand(1);
  CLI::App* info = app.add_subcommand("info", "the GPU this process sees");
  cuda::GpuCalibrateOptions cal;
  CLI::App* calibrate = app.add_subcommand("calibrate", "measure matrix products, attention and HBM; write a cluster JSON");
  calibrate->add_option("--cluster", cal.cluster, "preset whose JSON gets the measured efficiencies (default: dgx-h100:1 or dgx-h200:1 by the device's name)");
  calibrate->add_option("--model", cal.model, "model whose layer shapes are measured (default llama3-8b)");
  calibrate->add_option("--seq", cal.seq_len, "sequence length of the attention measured (default 4096)");
  calibrate->add_option("--tokens", cal.tokens, "tokens per product, the rows of each matrix product (default 8192)");
  calibrate->add_option("--out", cal.out, "cluster JSON to write");
  calibrate->add_flag("--json", cal.json, "print the measurements as JSON");
  cuda::GpuTrainOptions train;
  CLI::App* train_cmd = app.add_subcommand("train", "train one rank on the GPU: loss per step, step time, model FLOP/s and MFU");
  train_cmd->add_option("--model", train.model, "a preset, a shardsim model JSON or a Hugging Face config.json")->required();
  train_cmd->add_option("--seq", train.seq_len, "sequence length (default 4096)");
  train_cmd->add_option("--micro-batch", train.micro_batch, "sequences per step (default 1)");
  train_cmd->add_option("--steps", train.steps, "steps (default 5; the first is warm-up)");
  train_cmd->add_option("--dtype", train.dtype, "bf16 (default: bf16 products, fp32 master weights) or fp32 (no TF32)");
  train_cmd->add_option("--attention", train.attention, "fused (default: FlashAttention-2 kernels on the tensor cores, for bf16 at head dim 64/128 and a sequence a multiple of 64; otherwise tiled) or tiled (cuBLAS products per 1024-token tile)");
  train_cmd->add_option("--cluster", train.cluster, "preset whose peak MFU is measured against (default: by the device's name)");
  train_cmd->add_option("--seed", train.seed, "initialisation seed (default 1)");
  train_cmd->add_flag("--json", train.json, "print the report as JSON");
  cuda::GpuSmShareOptions share;
  CLI::App* share_cmd = app.add_subcommand("sm-share", "time a bf16 product alone and beside a kernel holding u SMs (what overlapped collectives' kernels cost compute)");
  share_cmd->add_option("--m", share.measure.m, "rows of the product")->capture_default_str();
  share_cmd->add_option("--n", share.measure.n, "columns")->capture_default_str();
  share_cmd->add_option("--k", share.measure.k, "inner dimension")->capture_default_str();
  share_cmd->add_option("--units", share.measure.units, "SMs to hold, each run")->delimiter(',')->capture_default_str();
  share_cmd->add_option("--repeats", share.measure.repeats, "products per timing")->capture_default_str();
  share_cmd->add_flag("--json", share.json, "print the measurements as JSON");
  try {
    app.parse(argc, argv);
    if (info->parsed()) return cuda::RunGpuInfo(std::cout);
    if (calibrate->parsed()) return cuda::RunGpuCalibrate(cal, std::cout);
    if (share_cmd->parsed()) return cuda::RunGpuSmShare(share, std::cout);
    return cuda::RunGpuTrain(train, std::cout);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "shardsim-gpu: error: %s (run 'shardsim-gpu --help')\n", e.what());
    return 2;
  } catch (const shardsim::InputError& e) {
    std::fprintf(stderr, "shardsim-gpu: error: %s\n", e.what());
    return 2;
  } catch (const cuda::CudaError& e) {
    std::fprintf(stderr, "shardsim-gpu: error: %s\n", e.what());
    return 3;
  }
  return 0;
}
