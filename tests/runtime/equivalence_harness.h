// What the MPI equivalence tests share (runtime_mpi_test): the narrow test models, a case (a mesh,
// a schedule, the plan's switches, optionally its own model), its plan, and the two checks every
// case runs: 10 steps against the single-rank reference (ExpectMatchesOneRank) and one traced step
// against the step program (ExpectTraceMatchesProgram). Each model family or strategy keeps its
// cases in its own mpi_*_test.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>

#include <gtest/gtest.h>
#include <string>

#include "core/model_spec.h"
#include "core/plan_spec.h"
#include "tests/runtime/test_models.h"

namespace shardsim::runtime::equivalence {

struct Case {
  std::string name;
  MeshShape mesh;
  std::string schedule = "1f1b";
  int64_t virtual_stages = 1;
  bool sequence_parallel = false;
  int64_t zero_stage = 0;
  int64_t micro_batch_size = 1;
  bool moe = false;
  std::string layout = "";  // pipeline_layout
  Recompute recompute = Recompute::kNone;
  std::optional<ModelSpec> model = std::nullopt;  // instead of TestModel() / TestMoeModel()
  int64_t global_batch_size = 8;
  std::string sequence_parallel_inputs = "";  // "keep-gathered": no shard kept, no regather
  int64_t pipeline_rounds = 1;
};
// `c` run as `rounds` pipeline schedules per step (PlanSpec::pipeline_rounds).
Case InRounds(Case c, int64_t rounds);

// googletest prints a case by its name.
inline void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

MeshShape Mesh(int64_t data, int64_t tensor, int64_t pipeline, int64_t context = 1, int64_t fsdp = 1, int64_t expert = 1);
// An MoE model's case: mesh data x expert x pipeline x context x fsdp.
Case Moe(std::string name, int64_t data, int64_t expert, int64_t pipeline = 1, int64_t context = 1, int64_t fsdp = 1, int64_t zero_stage = 0);
PlanSpec PlanOf(const Case& c);
ModelSpec ModelOf(const Case& c);

// Trains the case for 10 steps (4 sanitized) on MPI_COMM_WORLD and the single-rank reference
// (MPI_COMM_SELF) on every rank from the same seed and batches: each step's loss within 1e-4
// relative, the final parameters within 1e-3 relative norm. REQUIRES: the case's mesh product is
// the world size.
void ExpectMatchesOneRank(const Case& c);

// One traced step of the case: the keys (stage/layer/op/microbatch) of the trace on every rank
// are the keys the program lists for that rank's stage; every traced op's category is its program
// op's; a split backward's W ops start after their B task; every collective issued runs under a
// program op of the same kind and axes (tensor ops also of the same size). REQUIRES: as above.
void ExpectTraceMatchesProgram(const Case& c);

// The two checks over a list of cases: each file instantiates it with its own,
//   INSTANTIATE_TEST_SUITE_P(Gpt, EquivalenceTest, ::testing::ValuesIn(Cases()), CaseName);
// a case whose mesh does not fit the job's ranks is skipped.
class EquivalenceTest : public ::testing::TestWithParam<Case> {};
std::string CaseName(const ::testing::TestParamInfo<Case>& info);

}  // namespace shardsim::runtime::equivalence
