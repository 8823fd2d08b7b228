// Parameters held on two pipeline stages: a tied embedding whose output head sits on another
// stage than the embedding (Megatron-LM's embedding group: the first and the last stage), and
// DualPipe's two copies of every model part (DeepSeek-V3 technical report, section 3.2.1: stage s
// holds part s and a copy of part p - 1 - s). Both copies start equal (the same initial values,
// drawn by tensor name) and must stay equal: once per step, after the data-parallel reduction,
// each copy's reduced gradients are summed with the other copy's, so both apply the same update
// (the step program's tied_embedding_grad_sync / dualpipe_copy_grad_sync, a swap with the
// stage holding the copy).
//
// Each copied bucket has the same size on both stages, and data parallelism cuts every bucket
// alike (data_parallel.h), so the ranks of two copies that share their other coordinates update
// the same part of the bucket: the swap is of those parts only.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/comm.h"
#include "runtime/data_parallel.h"
#include "runtime/stage_model.h"
#include "runtime/trace.h"
#include "strategies/step_program.h"

namespace shardsim::runtime {

// Marks the copies `model` holds that another stage counts (ParamBucket::copy_counted false) as
// not counted in `data_parallel`'s ranges, so that global sums (the gradient norm) see every
// parameter once.
void UncountCopies(const StageModel& model, DataParallel& data_parallel);

// Sums the reduced gradients in `grads` (DataParallel::ReducedGradients) of every bucket of
// `model` that has a copy on another stage with that copy's, under the program's sync op of this
// stage (traced by `tracer`). Collective between the two stages of each copy.
void SumCopiedGradients(const StageModel& model, const DataParallel& data_parallel, std::vector<float>& grads, MeshComms& comms, Tracer* tracer);

}  // namespace shardsim::runtime
