// Every sharding the runtime implements trains exactly like one rank (context parallelism runs
// ring attention over zigzag chunks): run under mpiexec with 2,
// 4 and 8 ranks, each plan whose mesh fits the job trains 10 steps, and every rank also trains
// the single-rank reference (MPI_COMM_SELF) from the same seed and batches. The loss of each
// step matches within 1e-4 relative, the final parameters within 1e-3 relative norm.
#include <mpi.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include "core/error.h"
#include "core/model_presets.h"
#include "strategies/build_step.h"
#include "strategies/op_keys.h"
#include "runtime/trainer.h"
#include "tests/runtime/equivalence_harness.h"

namespace shardsim::runtime {
namespace {

using namespace equivalence;  // NOLINT: the harness's names

std::vector<Case> Cases() {
  return {
      {"data", Mesh(2, 1, 1)},
      {"data_zero1", Mesh(2, 1, 1), "1f1b", 1, false, 1},
      {"data_zero2_mbs2", Mesh(2, 1, 1), "1f1b", 1, false, 2, 2},
      {"tensor", Mesh(1, 2, 1)},
      {"tensor_sequence", Mesh(1, 2, 1), "1f1b", 1, true},
      {"pipeline_1f1b", Mesh(1, 1, 2)},
      {"pipeline_gpipe", Mesh(1, 1, 2), "gpipe"},
      {"pipeline_zb_h1", Mesh(1, 1, 2), "zb-h1"},
      {"data_tensor", Mesh(2, 2, 1), "1f1b", 1, true},
      {"tensor_pipeline", Mesh(1, 2, 2)},
      {"pipeline_interleaved_data", Mesh(2, 1, 2), "interleaved-1f1b", 2},
      {"pipeline_uneven", Mesh(1, 1, 3)},
      {"pipeline4", Mesh(1, 1, 4)},
      {"data_tensor_pipeline", Mesh(2, 2, 2), "1f1b", 1, false, 1},
      {"tensor_sequence_pipeline", Mesh(1, 2, 4), "1f1b", 1, true},
      {"data_tensor_sequence_zero1", Mesh(4, 2, 1), "1f1b", 1, true, 1},
      {"interleaved_one_stage", Mesh(2, 1, 1), "interleaved-1f1b", 2},
      {"context", Mesh(1, 1, 1, 2)},
      {"data_context", Mesh(2, 1, 1, 2)},
      {"context_zero1", Mesh(1, 1, 1, 2), "1f1b", 1, false, 1},
      {"tensor_sequence_context", Mesh(1, 2, 1, 2), "1f1b", 1, true},
      {"context4", Mesh(1, 1, 1, 4)},
      {"data_context_pipeline", Mesh(2, 1, 2, 2)},
      {"fsdp", Mesh(1, 1, 1, 1, 2)},
      {"data_zero3", Mesh(2, 1, 1), "1f1b", 1, false, 3},
      {"context_zero3_mbs2", Mesh(1, 1, 1, 2), "1f1b", 1, false, 3, 2},
      {"fsdp_tensor", Mesh(1, 2, 1, 1, 2), "1f1b", 1, true},
      {"data_fsdp", Mesh(2, 1, 1, 1, 2)},
      {"data_fsdp_zero1", Mesh(2, 1, 1, 1, 2), "1f1b", 1, false, 1},
      {"data_fsdp_zero3", Mesh(2, 1, 1, 1, 2), "1f1b", 1, false, 3},
      {"fsdp_pipeline_interleaved", Mesh(1, 1, 2, 1, 2), "interleaved-1f1b", 2},
      {"data_zero2_pipeline", Mesh(2, 1, 2), "1f1b", 1, false, 2},
      {"fsdp_tensor_pipeline", Mesh(1, 2, 2, 1, 2), "1f1b", 1, true},
      {"fsdp4_tensor2_zero3", Mesh(1, 2, 1, 1, 4), "1f1b", 1, true, 3},
      {"pipeline4_zb_h1", Mesh(1, 1, 4), "zb-h1"},
      {"data_pipeline_zb_h1_zero2", Mesh(2, 1, 2), "zb-h1", 1, false, 2},
      {"data_pipeline_zb_h1", Mesh(2, 1, 2), "zb-h1"},
      {"fsdp_pipeline_zb_h1", Mesh(1, 1, 2, 1, 2), "zb-h1"},
      {"data_tensor_sequence_pipeline_zb_h1", Mesh(2, 2, 2), "zb-h1", 1, true},
      {"pipeline_zbv", Mesh(1, 1, 2), "zbv"},
      {"pipeline4_zbv_empty_chunks", Mesh(1, 1, 4), "zbv", 1, false, 0, 1, false, "E|t|t|t|t|||L"},
      {"data_tensor_sequence_pipeline_zbv", Mesh(2, 2, 2), "zbv", 1, true},
      {"fsdp_pipeline_zbv", Mesh(1, 1, 2, 1, 2), "zbv"},
      {"pipeline_layout_uneven", Mesh(1, 1, 2), "1f1b", 1, false, 0, 1, false, "Et|tttL"},
      {"pipeline_layout_interleaved_empty_chunk", Mesh(1, 1, 2), "interleaved-1f1b", 2, false, 0, 1, false, "E|t|tt|tL"},
      {"data_pipeline_layout_zbv", Mesh(2, 1, 2), "zbv", 1, false, 1, 1, false, "Ett||t|tL"},
      {"tensor_sequence_recompute_full", Mesh(1, 2, 1), "1f1b", 1, true, 0, 1, false, "", Recompute::kFull},
      {"context_pipeline_recompute_selective", Mesh(1, 1, 2, 2), "zb-h1", 1, false, 0, 1, false, "", Recompute::kSelective},
      {"moe_expert_context_recompute_full", Mesh(1, 1, 1, 2, 1, 2), "1f1b", 1, false, 0, 1, true, "", Recompute::kFull},
      Moe("moe_data", 2, 1),
      Moe("moe_expert", 1, 2),
      Moe("moe_context", 1, 1, 1, 2),
      Moe("moe_expert_data", 2, 2),
      Moe("moe_expert4", 1, 4),
      Moe("moe_expert_pipeline", 1, 2, 2),
      Moe("moe_expert_context", 1, 2, 1, 2),
      Moe("moe_expert_fsdp_zero3", 1, 2, 1, 1, 2, 3),
      Moe("moe_expert_data_zero1", 2, 2, 1, 1, 1, 1),
      Moe("moe_expert_data_pipeline", 2, 2, 2),
      Moe("moe_expert4_data2", 2, 4),
      // Schedules one after another in a step, gradients reduced after the last.
      InRounds({"pipeline_1f1b", Mesh(1, 1, 2)}, 4),
      InRounds({"fsdp_pipeline_interleaved", Mesh(1, 1, 2, 1, 2), "interleaved-1f1b", 2}, 2),
  };
}

class MpiEquivalenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(MpiEquivalenceTest, LossesAndParametersMatchOneRank) {
  const Case& c = GetParam();
  if (c.mesh.Product() != WorldSize()) GTEST_SKIP() << "needs " << c.mesh.Product() << " ranks";
  ExpectMatchesOneRank(c);
}

INSTANTIATE_TEST_SUITE_P(Plans, MpiEquivalenceTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& param_info) { return param_info.param.name; });

// Training lowers the loss clearly, and a plan the runtime cannot run yet says so.
TEST(MpiRuntimeTest, LossFallsAndUnsupportedAxesAreRefused) {
  const ModelSpec model = TestModel();
  const Corpus corpus(std::string(ShippedCorpus()), 32);
  PlanSpec plan = PlanOf({"data", Mesh(WorldSize(), 1, 1)});
  plan.global_batch_size = 8 * WorldSize();
  Trainer trainer(model, plan, TrainOptions{}, MPI_COMM_WORLD, corpus);
  const double first = trainer.Step().loss;
  EXPECT_NEAR(first, std::log(256.0), 0.1);  // a random byte model
  double last = first;
  for (int step = 1; step < 30; ++step) last = trainer.Step().loss;
  EXPECT_LT(last, first - 1.0);

  PlanSpec fsdp = plan;
  fsdp.mesh = MeshShape{};
  fsdp.mesh.fsdp = WorldSize();
  fsdp.zero_stage = 2;
  if (WorldSize() > 1) {
    try {
      Trainer refused(model, fsdp, TrainOptions{}, MPI_COMM_WORLD, corpus);
      ADD_FAILURE() << "ZeRO-2 with fsdp accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("ZeRO-2 with fsdp > 1"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("the runtime does not implement it yet"), std::string::npos) << e.what();
    }
  }
  // The frameworks' own recomputation sets are estimated, not run: refused on every rank alike.
  PlanSpec op_level = plan;
  op_level.recompute = Recompute::kSelectiveOp;
  try {
    Trainer refused(model, op_level, TrainOptions{}, MPI_COMM_WORLD, corpus);
    ADD_FAILURE() << "recompute selective-op accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("recompute selective-op"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("none, selective or full"), std::string::npos) << e.what();
  }
  // Multi-token prediction and sliding-window attention are estimated, not run: refused in one
  // line naming the model field.
  ModelSpec mtp = model;
  mtp.mtp_layers = 1;
  try {
    Trainer refused(mtp, plan, TrainOptions{}, MPI_COMM_WORLD, corpus);
    ADD_FAILURE() << "mtp accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "model/mtp_layers");
  }
  ModelSpec local = model;
  local.sliding_window = SlidingWindowSpec{.window = 16, .global_every = 2};
  try {
    Trainer refused(local, plan, TrainOptions{}, MPI_COMM_WORLD, corpus);
    ADD_FAILURE() << "sliding window accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "model/sliding_window");
    EXPECT_NE(std::string(e.what()).find("the runtime does not implement it yet"), std::string::npos) << e.what();
  }
  // DeepEP's deduplicating dispatcher is estimated, not run (the MPI all-to-alls send every copy).
  ModelSpec moe = model;
  moe.moe = MoeSpec{.num_experts = 4, .top_k = 2, .expert_ffn_hidden_size = model.ffn_hidden_size};
  PlanSpec deepep = plan;
  deepep.ep_dispatcher = "deepep";
  try {
    Trainer refused(moe, deepep, TrainOptions{}, MPI_COMM_WORLD, corpus);
    ADD_FAILURE() << "deepep accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "plan:/ep_dispatcher");
  }
  // So are eager elementwise kernels (its own read and write each tensor once).
  PlanSpec eager = plan;
  eager.elementwise_kernels = "eager";
  try {
    Trainer refused(moe, eager, TrainOptions{}, MPI_COMM_WORLD, corpus);
    ADD_FAILURE() << "eager elementwise kernels accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "plan:/elementwise_kernels");
  }
  // So is round-robin routing (its router picks by score).
  PlanSpec round_robin = plan;
  round_robin.expert_routing = "round-robin";
  try {
    Trainer refused(moe, round_robin, TrainOptions{}, MPI_COMM_WORLD, corpus);
    ADD_FAILURE() << "round-robin routing accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "plan:/expert_routing");
  }
  // MoE parallel folding is estimated, not run (the runtime splits experts over its expert axis).
  PlanSpec folded = plan;
  folded.expert_axes = {"context"};
  try {
    Trainer refused(moe, folded, TrainOptions{}, MPI_COMM_WORLD, corpus);
    ADD_FAILURE() << "expert_axes accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "plan:/expert_axes");
  }
}

// A job stopped after a checkpoint and resumed gives bit-identical losses to one that never
// stopped (each rank's parameters, AdamW moments and step count are restored; batches follow the
// step).
TEST(MpiRuntimeTest, ResumingFromACheckpointIsBitIdentical) {
  const ModelSpec model = TestModel();
  const Corpus corpus(std::string(ShippedCorpus()), 32);
  const MeshShape mesh = WorldSize() % 2 == 0 ? Mesh(WorldSize() / 2, 1, 2) : Mesh(1, 1, WorldSize());
  const PlanSpec plan = PlanOf({"resume", mesh, "1f1b", 1, false, 1});
  std::string dir = "/tmp/shardsim-checkpoint-XXXXXX";
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    ASSERT_NE(mkdtemp(dir.data()), nullptr);
  }
  MPI_Bcast(dir.data(), static_cast<int>(dir.size()), MPI_CHAR, 0, MPI_COMM_WORLD);
  std::vector<double> straight;
  {
    Trainer t(model, plan, TrainOptions{}, MPI_COMM_WORLD, corpus);
    for (int step = 0; step < 6; ++step) straight.push_back(t.Step().loss);
  }
  {
    Trainer first(model, plan, TrainOptions{}, MPI_COMM_WORLD, corpus);
    for (int step = 0; step < 3; ++step) EXPECT_EQ(first.Step().loss, straight[static_cast<size_t>(step)]);
    first.SaveCheckpoint(dir);
  }
  Trainer resumed(model, plan, TrainOptions{}, MPI_COMM_WORLD, corpus);
  resumed.LoadCheckpoint(dir);
  EXPECT_EQ(resumed.steps_done(), 3);
  for (int step = 3; step < 6; ++step) EXPECT_EQ(resumed.Step().loss, straight[static_cast<size_t>(step)]) << "step " << step;
  // Another plan cannot read it.
  PlanSpec other = plan;
  other.global_batch_size = 16;
  Trainer wrong(model, other, TrainOptions{}, MPI_COMM_WORLD, corpus);
  EXPECT_THROW(wrong.LoadCheckpoint(dir), InputError);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) std::filesystem::remove_all(dir);
}

// The runtime executes the step program: the keys (stage/layer/op/microbatch) of one step's trace
// on every rank are the keys the program lists for that rank's stage, expanded over the stage's
// tasks; every traced op's category is its program op's (compute, or the collective's stream);
// every collective the rank issues runs under the key of a program op of the same kind and axes
// (tensor ops also of the same size).
TEST(MpiRuntimeTest, TraceKeysAndKindsMatchTheStepProgram) {
  const Corpus corpus(std::string(ShippedCorpus()), 32);
  const std::vector<Case> cases = {
      {"tensor", Mesh(1, 2, 1)},
      {"tensor_sequence", Mesh(1, 2, 1), "1f1b", 1, true},
      {"data_zero1", Mesh(2, 1, 1), "1f1b", 1, false, 1},
      {"data_zero2_mbs2", Mesh(2, 1, 1), "1f1b", 1, false, 2, 2},
      {"context", Mesh(1, 1, 1, 2)},
      {"pipeline_interleaved", Mesh(1, 1, 2), "interleaved-1f1b", 2},
      {"pipeline_zbv", Mesh(1, 1, 2), "zbv"},
      Moe("moe_expert", 1, 2),
      {"tensor_sequence_pipeline_zb_h1", Mesh(1, 2, 2), "zb-h1", 1, true},
      {"tensor_sequence_pipeline_zbv", Mesh(1, 2, 2), "zbv", 1, true},
      {"data_context", Mesh(2, 1, 1, 2)},
      Moe("moe_expert_data", 2, 2),
      Moe("moe_expert_context", 1, 2, 1, 2),
      {"fsdp_tensor_sequence_zero3", Mesh(1, 2, 1, 1, 2), "1f1b", 1, true, 3},
      {"fsdp_pipeline_kept_gathered", Mesh(1, 1, 2, 1, 2), "zb-h1"},
      {"data_pipeline_layout", Mesh(2, 1, 2), "1f1b", 1, false, 0, 1, false, "Et|tttL"},
      {"data_tensor_sequence_pipeline_zbv", Mesh(2, 2, 2), "zbv", 1, true},
      {"tensor_sequence_recompute_full", Mesh(1, 2, 1), "1f1b", 1, true, 0, 1, false, "", Recompute::kFull},
      {"context_pipeline_recompute_selective", Mesh(1, 1, 2, 2), "zb-h1", 1, false, 0, 1, false, "", Recompute::kSelective},
      {"moe_expert_context_recompute_full", Mesh(1, 1, 1, 2, 1, 2), "1f1b", 1, false, 0, 1, true, "", Recompute::kFull},
      InRounds({"pipeline_zbv", Mesh(1, 1, 2), "zbv"}, 2),
  };
  int ran = 0;
  for (const Case& c : cases) {
    if (c.mesh.Product() != WorldSize()) continue;
    ++ran;
    ExpectTraceMatchesProgram(c);
  }
  if (ran == 0) GTEST_SKIP() << "no case for " << WorldSize() << " ranks";
}

}  // namespace
}  // namespace shardsim::runtime
