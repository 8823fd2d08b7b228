// Tensor parallelism of the MoE block's routed experts (Megatron-core's expert-tensor parallelism
// with sequence parallelism): every tensor rank routes and dispatches its own share of the tokens
// over the expert axis; the rows that reach an expert rank are then all-gathered over tensor (the
// step program's tp_enter_experts), each expert's gate/up columns and down rows being split over
// tensor; the down projection's partial sums go back to the tensor rank whose rows they are by a
// reduce-scatter (tp_exit_experts), before the combine. Backward mirrors it (all-gather of the
// output gradients, reduce-scatter of the input gradients).
//
// Rows are dropless, so each tensor rank's count differs: the counts are exchanged first, and the
// rows travel padded to the largest rank's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/comm.h"

namespace shardsim::runtime {

// Every tensor rank's `expert_rows` (rows per (source expert rank, local expert)), rank after rank
// in tensor group order: the table of the rows that AllGatherRows assembles.
std::vector<int> GatherRowTable(MeshComms& comms, const std::vector<int>& expert_rows, const std::string& what);

// `all` = every tensor rank's `own` rows [n_r, d], rank after rank (n_r from `table`, whose blocks
// of `per_rank` counts are the ranks'). The program's tp_enter_experts forward (an all-gather).
void AllGatherRows(MeshComms& comms, std::vector<float>& all, const std::vector<float>& own, const std::vector<int>& table, int64_t per_rank,
                   int64_t d, const std::string& what);

// `own` = the sum over tensor ranks of their `all` rows' block belonging to this rank (laid out as
// AllGatherRows lays them). The program's tp_exit_experts forward (a reduce-scatter).
void ReduceScatterRows(MeshComms& comms, std::vector<float>& own, const std::vector<float>& all, const std::vector<int>& table, int64_t per_rank,
                       int64_t d, const std::string& what);

}  // namespace shardsim::runtime
