// Tensor parallelism of MoE layers (expert-tensor parallelism with sequence parallelism around
// the dispatch, runtime/moe_tensor.h) trains exactly like one rank, alone and with expert, data,
// pipeline and FSDP; run under mpiexec with 2, 4 and 8 ranks, each case whose mesh fits the job.
#include <gtest/gtest.h>

#include <vector>

#include "tests/runtime/equivalence_harness.h"

namespace shardsim::runtime {
namespace {

using namespace equivalence;  // NOLINT: the harness's names

// An MoE case with tensor 2 and sequence parallelism on mesh data x expert x pipeline x fsdp.
Case MoeTensor(std::string name, int64_t data, int64_t expert, int64_t pipeline = 1, int64_t fsdp = 1, int64_t zero_stage = 0) {
  Case c = Moe(std::move(name), data, expert, pipeline, 1, fsdp, zero_stage);
  c.mesh.tensor = 2;
  c.sequence_parallel = true;
  return c;
}

std::vector<Case> Cases() {
  return {
      MoeTensor("moe_tensor", 1, 1),
      MoeTensor("moe_expert_tensor", 1, 2),
      MoeTensor("moe_expert_tensor_data", 2, 2),
      MoeTensor("moe_expert_tensor_pipeline", 1, 2, 2),
      MoeTensor("moe_tensor_fsdp_zero3", 1, 1, 1, 2, 3),
      MoeTensor("moe_expert_tensor_fsdp_zero3", 1, 2, 1, 2, 3),
      MoeTensor("moe_tensor_data_zero1", 2, 1, 1, 1, 1),
  };
}

INSTANTIATE_TEST_SUITE_P(MoeTensor, EquivalenceTest, ::testing::ValuesIn(Cases()), CaseName);

}  // namespace
}  // namespace shardsim::runtime
