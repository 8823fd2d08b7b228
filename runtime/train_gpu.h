// `shardsim-runtime train --device cuda`: the same model, initial values (init.h), corpus batches
// and optimizer as the CPU trainer, on one rank's GPU (cuda/gpu_model.h), so the two runs'
// losses can be compared step by step. Data, tensor, pipeline and context parallelism in this
// version (ranks may share a GPU), split as the CPU runtime splits them, every transfer over MPI
// through host memory (Debian's OpenMPI is not CUDA-aware): each data-parallel replica reads its
// share of the global batch; each tensor group shards the model (Megatron-LM's tensor
// parallelism with a vocabulary-parallel embedding and loss, cuda/gpu_model.h); each pipeline
// stage holds its layers and passes activations and their gradients on, one micro-batch in
// flight (the plan's schedule is not followed yet); each context rank holds two zigzag chunks of
// every sequence and gathers the group's K and V; gradients are summed over data and context,
// with accumulation over micro-batches. Sequence parallelism, expert parallelism, FSDP and ZeRO
// on the GPU are not built yet.
#pragma once

#include "core/model_spec.h"
#include "core/plan_spec.h"
#include "runtime/corpus.h"
#include "runtime/train_command.h"

namespace shardsim::runtime {

// Whether this build has the CUDA path (SHARDSIM_CUDA found nvcc at configure time).
bool GpuTrainingBuilt();

// Trains on the GPU (collective: every rank calls it) and prints the report as RunTrainCommand
// does, on rank 0. Throws InputError, on every rank alike, for a mesh with other axes (fsdp,
// expert), ZeRO, sequence parallelism, more than one model chunk per stage (virtual stages,
// DualPipe), a tied head on a stage without the embedding, context_kv other than all-gather, what
// the runtime refuses anyway (CheckRuntimeSupports), a job whose size is not the mesh's,
// --trace/--checkpoint/--resume (not on the GPU path yet), no GPU, a build without CUDA, and
// models the GPU path does not train.
int RunTrainOnGpu(const TrainCommandOptions& options, const ModelSpec& model, const PlanSpec& plan, const Corpus& corpus);

}  // namespace shardsim::runtime
