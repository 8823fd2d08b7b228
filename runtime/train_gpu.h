// `shardsim-runtime train --device cuda`: the same model, initial values (init.h), corpus batches
// and optimizer as the CPU trainer, on one rank's GPU (cuda/gpu_model.h), so the two runs'
// losses can be compared step by step. One rank without model parallelism in this version: the
// plan's mesh must be all ones (gradient accumulation over its micro-batches is supported).
#pragma once

#include "core/model_spec.h"
#include "core/plan_spec.h"
#include "runtime/corpus.h"
#include "runtime/train_command.h"

namespace shardsim::runtime {

// Whether this build has the CUDA path (SHARDSIM_CUDA found nvcc at configure time).
bool GpuTrainingBuilt();

// Trains on the GPU and prints the report as RunTrainCommand does (on rank 0 of a one-rank job).
// Throws InputError for a world or mesh larger than one rank, --trace/--checkpoint/--resume (not
// on the GPU path yet), a build without CUDA, and models the GPU path does not train.
int RunTrainOnGpu(const TrainCommandOptions& options, const ModelSpec& model, const PlanSpec& plan, const Corpus& corpus);

}  // namespace shardsim::runtime
