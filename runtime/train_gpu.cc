#include "runtime/train_gpu.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/plan_json.h"
#include "cuda/cuda_check.h"
#include "cuda/device_info.h"
#include "cuda/gpu_model.h"
#include "runtime/comm.h"
#include "runtime/init.h"

namespace shardsim::runtime {

bool GpuTrainingBuilt() { return true; }

namespace {

void CheckGpuJob(const TrainCommandOptions& a, const PlanSpec& plan) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (plan.mesh.Product() != plan.mesh.data || plan.zero_stage != 0) {
    throw InputError("--device cuda", "runs data parallelism only in this version (the plan's mesh is " + DescribeMesh(plan.mesh) +
                                          (plan.zero_stage != 0 ? ", ZeRO stage " + std::to_string(plan.zero_stage) : std::string()) + ")",
                     "a mesh of data alone and zero_stage 0", "run the plan on the CPU runtime (--device cpu)");
  }
  if (size != plan.mesh.data) {
    throw InputError("--device cuda", "the job has " + std::to_string(size) + " ranks for a mesh of " + std::to_string(plan.mesh.data),
                     "one rank per data-parallel replica", "launch with mpiexec -n " + std::to_string(plan.mesh.data));
  }
  if (plan.dtype != "bf16" && plan.dtype != "fp32") {
    throw InputError("--device cuda", "trains bf16 or fp32, not the plan's dtype " + plan.dtype, "dtype bf16 or fp32",
                     "--set dtype=bf16 (fp16 and fp8 recipes are not on the GPU path)");
  }
  if (!a.trace.empty() || !a.checkpoint.empty() || !a.resume.empty()) {
    throw InputError(!a.trace.empty() ? "--trace" : !a.checkpoint.empty() ? "--checkpoint" : "--resume", "not on the GPU path yet", "",
                     "leave it out with --device cuda");
  }
}

// The CPU runtime's initial values, element by element (init.h), in the GPU model's layout; each
// tensor's rows drawn by all cores (a 1B model's 1.2 billion draws take minutes on one).
std::vector<float> RuntimeInitialValues(const std::vector<cuda::GpuParamTensor>& tensors, uint64_t seed) {
  std::vector<float> values(tensors.empty() ? 0 : static_cast<size_t>(tensors.back().offset + tensors.back().rows * tensors.back().cols));
  const int64_t workers = std::max(1u, std::thread::hardware_concurrency());
  for (const cuda::GpuParamTensor& t : tensors) {
    auto rows = [&](int64_t r0, int64_t r1) {
      float* out = values.data() + t.offset + r0 * t.cols;
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t c = 0; c < t.cols; ++c) *out++ = InitialValue(seed, t.name, r, c, t.init_stddev);
      }
    };
    if (t.rows * t.cols < (int64_t{1} << 20) || workers == 1) {
      rows(0, t.rows);
      continue;
    }
    std::vector<std::thread> pool;
    for (int64_t w = 0; w < workers; ++w) pool.emplace_back(rows, t.rows * w / workers, t.rows * (w + 1) / workers);
    for (std::thread& th : pool) th.join();
  }
  return values;
}

}  // namespace

int RunTrainOnGpu(const TrainCommandOptions& a, const ModelSpec& model, const PlanSpec& plan, const Corpus& corpus) {
  CheckGpuJob(a, plan);
  cuda::CheckGpuTrainable(model);
  std::string why;
  if (!cuda::HasDevice(&why)) throw InputError("--device cuda", why, "cpu", "run where an NVIDIA GPU and its driver are");
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // The ranks on this machine spread over its GPUs by their rank within the machine.
  MPI_Comm local;
  CheckMpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local), MPI_COMM_WORLD, "ranks per machine");
  int local_rank = 0;
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_free(&local);
  cuda::SelectDevice(local_rank);
  const cuda::DeviceInfo device = cuda::QueryDevice();
  cuda::GpuTrainConfig config;
  config.micro_batch = static_cast<int>(plan.micro_batch_size);
  config.seq_len = static_cast<int>(plan.seq_len);
  config.dtype = plan.dtype == "fp32" ? cuda::DType::kF32 : cuda::DType::kBf16;
  config.lr = static_cast<float>(a.lr);
  config.seed = static_cast<uint64_t>(a.seed);
  cuda::GpuModel gpu(model, config);
  gpu.LoadParameters(RuntimeInitialValues(gpu.Tensors(), static_cast<uint64_t>(a.seed)));

  // Each replica reads its own share of the global batch, as the CPU trainer's replicas do.
  const int64_t replicas = plan.mesh.data, per_replica = plan.global_batch_size / replicas;
  const int64_t mbs = per_replica / plan.micro_batch_size;
  const int64_t tokens = plan.micro_batch_size * plan.seq_len;
  const double normaliser = static_cast<double>(plan.global_batch_size * plan.seq_len);
  std::vector<int32_t> ids(static_cast<size_t>(tokens)), targets(ids.size());
  std::vector<double> losses, times;
  for (int64_t s = 0; s < a.steps; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    double loss = 0;
    for (int64_t mb = 0; mb < mbs; ++mb) {
      corpus.Batch(ids.data(), targets.data(), s, plan.global_batch_size, rank * per_replica + mb * plan.micro_batch_size,
                   plan.micro_batch_size);
      loss += gpu.ForwardBackward(ids, targets, normaliser);
    }
    if (replicas > 1) {
      // The data-parallel reduction, staged through host memory: every replica's gradient summed
      // (each loss is divided by the global token count), then the same AdamW step everywhere.
      std::vector<float> grads = gpu.Gradients();
      constexpr size_t kChunk = size_t{1} << 28;  // MPI counts are int
      for (size_t at = 0; at < grads.size(); at += kChunk) {
        CheckMpi(MPI_Allreduce(MPI_IN_PLACE, grads.data() + at, static_cast<int>(std::min(kChunk, grads.size() - at)), MPI_FLOAT, MPI_SUM,
                               MPI_COMM_WORLD),
                 MPI_COMM_WORLD, "gradient all-reduce");
      }
      gpu.SetGradients(grads);
      CheckMpi(MPI_Allreduce(MPI_IN_PLACE, &loss, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), MPI_COMM_WORLD, "loss all-reduce");
    }
    const double norm = gpu.Optimize(config.lr);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    losses.push_back(loss);
    times.push_back(seconds);
    if (rank == 0 && (!a.json || a.progress)) {
      FILE* lines = a.json ? stderr : stdout;
      std::fprintf(lines, "step %3ld  loss %.6f  grad norm %.4f  %.1f ms\n", static_cast<long>(s), loss, norm, 1e3 * seconds);
      std::fflush(lines);
    }
  }
  if (rank != 0) return 0;
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  const FlopsPerToken f = ForwardFlopsPerToken(model, plan.seq_len);
  const double model_flops = f.causal_training() * normaliser;
  const std::string precision = config.dtype == cuda::DType::kF32 ? "fp32 on the GPU (no TF32)"
                                                                  : "bf16 products with fp32 accumulation, fp32 master weights and AdamW state";
  if (a.json) {
    nlohmann::json report = TrainReportJson(losses, times, 0, replicas, model, plan, corpus.bytes(), precision);
    report["device"] = device.name;
    std::cout << report.dump(2) << "\n";
  } else {
    std::printf("median step %.1f ms (rank 0): %.2f TFLOP/s of model FLOPs over %lld rank%s on %s (%s)\n", 1e3 * median,
                model_flops / median / 1e12, static_cast<long long>(replicas), replicas == 1 ? "" : "s", device.name.c_str(), precision.c_str());
  }
  return 0;
}

}  // namespace shardsim::runtime
