#include "runtime/train_gpu.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/plan_json.h"
#include "core/train_lines.h"
#include "cuda/cuda_check.h"
#include "cuda/device_info.h"
#include "cuda/gpu_model.h"
#include "runtime/comm.h"
#include "runtime/gpu_host_collectives.h"
#include "runtime/init.h"
#include "runtime/pipeline_sends.h"
#include "runtime/ring_attention.h"
#include "runtime/stage_model.h"
#include "strategies/build_step.h"
#include "strategies/plan_rules.h"
#include "strategies/stage_layout.h"
#include "strategies/step_program.h"

namespace shardsim::runtime {

bool GpuTrainingBuilt() { return true; }

namespace {

// The plan's step program, after the checks that the GPU path runs it (before any communicator is
// made: the splits are collective, and every rank fails the same way here).
strategies::StepProgram CheckGpuJob(const TrainCommandOptions& a, const ModelSpec& model, const PlanSpec& plan) {
  const MeshShape& m = plan.mesh;
  if (m.Product() != m.data * m.tensor * m.pipeline * m.context || plan.zero_stage != 0) {
    throw InputError("--device cuda",
                     "runs data, tensor, pipeline and context parallelism only in this version (the plan's mesh is " + DescribeMesh(m) +
                         (plan.zero_stage != 0 ? ", ZeRO stage " + std::to_string(plan.zero_stage) : std::string()) + ")",
                     "a mesh of data, tensor, pipeline and context axes and zero_stage 0", "run the plan on the CPU runtime (--device cpu)");
  }
  if (plan.sequence_parallel && plan.mesh.tensor > 1) {
    throw InputError("--device cuda", "sequence parallelism is not on the GPU path yet", "sequence_parallel false",
                     "--set sequence_parallel=false (the same losses; activations not split over tensor)");
  }
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  strategies::ValidatePlan(plan, model, size, "the MPI job", "plan:");
  CheckRuntimeSupports(model, plan, "all-gather");
  strategies::StageLayout layout = strategies::LayOut(model, plan);
  if (layout.chunks > 1 || layout.paths.size() > 1) {
    throw InputError("--device cuda", "runs one model chunk per pipeline stage in this version (the plan has " + std::to_string(layout.chunks) +
                                          " per stage on " + std::to_string(layout.paths.size()) + " path(s): " + plan.pipeline_schedule + ")",
                     "virtual_stages 1 and a one-direction schedule", "--set virtual_stages=1 --set pipeline_schedule=1f1b");
  }
  for (int64_t s = 0; s < layout.stages; ++s) {
    const strategies::ChunkLayout& part = layout.Chunk(s, 0);
    if (model.tied_embeddings && part.head && !part.embedding) {
      throw InputError("--device cuda", "a tied output head on pipeline stage " + std::to_string(s) + " without the embedding is not on the GPU path yet (model '" +
                                            model.name + "')",
                       "untied embeddings, or the embedding and the head on one stage", "--set mesh.pipeline=1, or run it on the CPU runtime (--device cpu)");
    }
  }
  // MPI counts are int: a stage's activations and a context group's gathered K/V must fit.
  const int64_t tokens = plan.micro_batch_size * plan.seq_len / m.context;
  const int64_t largest = std::max(tokens * model.hidden_size, tokens * m.context * model.num_kv_heads / m.tensor * model.head_dim);
  if (largest > int64_t{INT_MAX}) {
    throw InputError("--device cuda", "a transfer of " + std::to_string(largest) + " elements (activations between stages or gathered K/V)",
                     "under 2^31 elements", "a smaller micro_batch_size");
  }
  if (plan.dtype != "bf16" && plan.dtype != "fp32") {
    throw InputError("--device cuda", "trains bf16 or fp32, not the plan's dtype " + plan.dtype, "dtype bf16 or fp32",
                     "--set dtype=bf16 (fp16 and fp8 recipes are not on the GPU path)");
  }
  if (!a.trace.empty() || !a.checkpoint.empty() || !a.resume.empty()) {
    throw InputError(!a.trace.empty() ? "--trace" : !a.checkpoint.empty() ? "--checkpoint" : "--resume", "not on the GPU path yet", "",
                     "leave it out with --device cuda");
  }
  // The backward computes each layer's weight gradients with its input gradients: a schedule
  // that runs them apart (zero-bubble) is not followed.
  strategies::StepProgram program = strategies::BuildStep(model, plan);
  if (program.schedule->SplitsBackward()) {
    throw InputError("--device cuda",
                     "the plan's schedule " + plan.pipeline_schedule + " runs weight gradients apart from input gradients, which the GPU path computes together",
                     "pipeline_schedule 1f1b or gpipe", "--set pipeline_schedule=1f1b");
  }
  return program;
}

// The CPU runtime's initial values, element by element (init.h), in the GPU model's layout (this
// rank's block of each global tensor); each tensor's rows drawn by all cores (a 1B model's 1.2
// billion draws take minutes on one).
std::vector<float> RuntimeInitialValues(const std::vector<cuda::GpuParamTensor>& tensors, uint64_t seed) {
  std::vector<float> values(tensors.empty() ? 0 : static_cast<size_t>(tensors.back().offset + tensors.back().rows * tensors.back().cols));
  const int64_t workers = std::max(1u, std::thread::hardware_concurrency());
  for (const cuda::GpuParamTensor& t : tensors) {
    auto rows = [&](int64_t r0, int64_t r1) {
      float* out = values.data() + t.offset + r0 * t.cols;
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t c = 0; c < t.cols; ++c) *out++ = InitialValue(seed, t.name, t.row0 + r, t.col0 + c, t.init_stddev);
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

// Tags of the activations and their gradients between pipeline stages (each direction's messages
// between two stages go in micro-batch order, which MPI keeps).
constexpr int kForwardTag = 1, kBackwardTag = 2;

}  // namespace

int RunTrainOnGpu(const TrainCommandOptions& a, const ModelSpec& model, const PlanSpec& plan, const Corpus& corpus) {
  const strategies::StepProgram program = CheckGpuJob(a, model, plan);
  const strategies::StageLayout& layout = program.layout;
  cuda::CheckGpuTrainable(model);
  std::string why;
  if (!cuda::HasDevice(&why)) throw InputError("--device cuda", why, "cpu", "run where an NVIDIA GPU and its driver are");
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MeshComms comms(MPI_COMM_WORLD, plan);
  comms.set_timeout_s(a.timeout_s);
  AxisGroup tensor(comms, "tensor"), context(comms, "context");
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
  config.tensor_group = &tensor;
  const int64_t stage = comms.Coordinate("pipeline"), stages = plan.mesh.pipeline;
  const strategies::ChunkLayout& part = layout.Chunk(stage, 0);
  config.first_layer = part.first_layer, config.layers = part.layers, config.embedding = part.embedding, config.head = part.head;
  // This context rank's tokens of each sequence and every rank's, as the CPU runtime splits them
  // (two zigzag chunks each, ring_attention.h).
  const int64_t cs = plan.mesh.context;
  if (cs > 1) {
    const int64_t me = context.Rank();
    for (int64_t r = 0; r < cs; ++r) {
      std::vector<int32_t> theirs = SequencePositions(SequenceLayout::kZigzag, plan.seq_len, cs, r);
      if (r == me) config.positions = theirs;
      config.key_positions.insert(config.key_positions.end(), theirs.begin(), theirs.end());
    }
    config.context_group = &context;
  }
  cuda::GpuModel gpu(model, config);
  gpu.LoadParameters(RuntimeInitialValues(gpu.Tensors(), static_cast<uint64_t>(a.seed)));

  // Each replica reads its own share of the global batch, as the CPU trainer's replicas do; the
  // ranks of a tensor group read the same.
  const int64_t replicas = plan.mesh.data, per_replica = plan.global_batch_size / replicas, replica = comms.Coordinate("data");
  const int64_t mbs = per_replica / plan.micro_batch_size;
  const int64_t tokens = plan.micro_batch_size * plan.seq_len / cs;
  const double normaliser = static_cast<double>(plan.global_batch_size * plan.seq_len);
  const int64_t activations = tokens * model.hidden_size;
  std::vector<int32_t> ids(static_cast<size_t>(tokens)), targets(ids.size());
  std::vector<float> input, output, grad_output, grad_input;
  const bool overlap = replicas * cs > 1 && plan.overlap.data;
  std::optional<OverlappedReduction> reduction;
  if (overlap) reduction.emplace(comms);
  // The stage's tasks in the order of the plan's schedule (the step program's: 1F1B, GPipe); each
  // micro-batch between its forward and its backward keeps its activations in a slot of its own.
  const std::vector<strategies::Task> tasks = strategies::StageTasks(program, stage, mbs);
  size_t last_backward = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (tasks[i].phase == strategies::Phase::kBackwardInput) last_backward = i;
  }
  std::vector<double> losses, grad_norms, times;
  for (int64_t s = 0; s < a.steps; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    double loss = 0;
    std::vector<int> slot_of(static_cast<size_t>(mbs), -1), free_slots;
    int slots = 0;
    PipelineSends sends(comms);
    for (size_t i = 0; i < tasks.size(); ++i) {
      const strategies::Task& task = tasks[i];
      if (task.phase == strategies::Phase::kBackwardWeight) continue;  // computed in its backward (CheckGpuJob)
      const int64_t mb = task.microbatch;
      const std::string at = "step " + std::to_string(s) + " micro-batch " + std::to_string(mb);
      if (task.phase == strategies::Phase::kForward) {
        // Every stage reads the micro-batch (the first for its ids, the last for its targets).
        const int64_t first = replica * per_replica + mb * plan.micro_batch_size;
        if (cs > 1) {  // this context rank's tokens of each sequence
          corpus.Batch(ids.data(), targets.data(), s, plan.global_batch_size, first, plan.micro_batch_size, config.positions);
        } else {
          corpus.Batch(ids.data(), targets.data(), s, plan.global_batch_size, first, plan.micro_batch_size);
        }
        if (stage > 0) {
          input.resize(static_cast<size_t>(activations));
          comms.Receive(input.data(), activations, comms.PipelinePeer(stage - 1), kForwardTag, "pipeline activations of " + at);
        }
        int& slot = slot_of[static_cast<size_t>(mb)];
        if (free_slots.empty()) {
          slot = slots++;
        } else {
          slot = free_slots.back();
          free_slots.pop_back();
        }
        const bool send = stage + 1 < stages;
        loss += gpu.Forward(ids, targets, normaliser, input, send ? &sends.Next(activations) : &output, slot);
        if (send) sends.Start(comms.PipelinePeer(stage + 1), kForwardTag, "pipeline activations of " + at);
      } else if (task.phase == strategies::Phase::kBackwardInput) {
        if (stage + 1 < stages) {
          grad_output.resize(static_cast<size_t>(activations));
          comms.Receive(grad_output.data(), activations, comms.PipelinePeer(stage + 1), kBackwardTag, "pipeline gradients of " + at);
        }
        const int slot = slot_of[static_cast<size_t>(mb)];
        const bool send = stage > 0;
        gpu.Backward(grad_output, send ? &sends.Next(activations) : &grad_input, overlap && i == last_backward ? &*reduction : nullptr, slot);
        free_slots.push_back(slot);
        if (send) sends.Start(comms.PipelinePeer(stage - 1), kBackwardTag, "pipeline gradients of " + at);
      } else {
        throw InputError("--device cuda", "a pipeline task the GPU path does not run (phase " + strategies::ToString(task.phase) + ")", "", "");
      }
      sends.Reap();
    }
    sends.WaitAll("pipeline send of step " + std::to_string(s));
    // The loss of each context rank's tokens, on the last stage.
    comms.AllReduceSum(&loss, 1, {"pipeline", "context"}, "pipeline and context loss all-reduce");
    if (overlap) {
      reduction->Finish();
      gpu.LoadStreamedGradients();
      comms.AllReduceSum(&loss, 1, {"data"}, "data-parallel loss all-reduce");
    } else if (replicas * cs > 1) {
      // The data- and context-parallel reduction after the backward, staged through host memory:
      // every replica's and every context rank's gradient summed (each loss is divided by the
      // global token count), then the same AdamW step everywhere.
      std::vector<float> grads = gpu.Gradients();
      InPieces(static_cast<int64_t>(grads.size()), [&](int64_t at, int64_t k) {
        comms.AllReduceSum(grads.data() + at, k, GradientReductionAxes(), "data- and context-parallel gradient all-reduce");
      });
      gpu.SetGradients(grads);
      comms.AllReduceSum(&loss, 1, {"data"}, "data-parallel loss all-reduce");
    }
    // The global norm: each parameter once (tensor-replicated ones on tensor rank 0), summed over
    // the ranks that hold different parameters; data and context replicas hold the same after
    // the reduction.
    double squares = gpu.GradientSquares(comms.Coordinate("tensor") == 0);
    comms.AllReduceSum(&squares, 1, {"tensor", "pipeline"}, "gradient norm all-reduce");
    const double norm = gpu.Optimize(config.lr, squares);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    losses.push_back(loss);
    grad_norms.push_back(norm);
    times.push_back(seconds);
    if (rank == 0) PrintStepLine(a, s, loss, norm, seconds);
  }
  if (rank != 0) return 0;
  const double median = MedianStepTime(times);
  const FlopsPerToken f = ForwardFlopsPerToken(model, plan.seq_len);
  const double model_flops = f.causal_training() * normaliser;
  const std::string precision = config.dtype == cuda::DType::kF32 ? "fp32 on the GPU (no TF32)"
                                                                  : "bf16 products with fp32 accumulation, fp32 master weights and AdamW state";
  if (a.json) {
    nlohmann::json report = TrainReportJson(losses, grad_norms, times, 0, plan.mesh.Product(), model, plan, corpus.bytes(), precision);
    report["device"] = device.name;
    std::cout << report.dump(2) << "\n";
  } else {
    std::printf("%s\n", GpuMedianLine(median, model_flops / median, plan.mesh.Product(), device.name, precision).c_str());
  }
  return 0;
}

}  // namespace shardsim::runtime
