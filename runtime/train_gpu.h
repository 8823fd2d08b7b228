// `shardsim-runtime train --device cuda`: the same model, initial values (init.h), corpus batches
// and optimizer as the CPU trainer, on one rank's GPU (cuda/gpu_model.h), so the two runs'
// losses can be compared step by step. Data parallelism only in this version: one rank per
// replica (ranks may share a GPU), each reading its share of the global batch as the CPU trainer's
// replicas do, gradients summed over MPI through host memory (Debian's OpenMPI is not CUDA-aware);
// gradient accumulation over micro-batches. Tensor, pipeline, context, expert, FSDP and ZeRO on
// the GPU are not built yet.
#pragma once

#include "core/model_spec.h"
#include "core/plan_spec.h"
#include "runtime/corpus.h"
#include "runtime/train_command.h"

namespace shardsim::runtime {

// Whether this build has the CUDA path (SHARDSIM_CUDA found nvcc at configure time).
bool GpuTrainingBuilt();

// Trains on the GPU and prints the report as RunTrainCommand does (on rank 0 of a one-rank job).
// Throws InputError for a mesh with other axes than data or ZeRO, a job whose size is not the
// data axis, --trace/--checkpoint/--resume (not on the GPU path yet), no GPU, a build without
// CUDA, and models the GPU path does not train.
int RunTrainOnGpu(const TrainCommandOptions& options, const ModelSpec& model, const PlanSpec& plan, const Corpus& corpus);

}  // namespace shardsim::runtime
