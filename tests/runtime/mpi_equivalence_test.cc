// Every sharding the runtime implements trains exactly like one rank: run under mpiexec with 2,
// 4 and 8 ranks, each plan whose mesh fits the job trains 10 steps, and every rank also trains
// the single-rank reference (MPI_COMM_SELF) from the same seed and batches. The loss of each
// step matches within 1e-4 relative, the final parameters within 1e-3 relative norm.
#include <mpi.h>

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "core/model_presets.h"
#include "runtime/gemm.h"
#include "runtime/trainer.h"

namespace shardsim::runtime {
namespace {

int WorldSize() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

// tiny-dense's shape, narrower so that eight oversubscribed ranks train it in seconds: 4 layers,
// width 64, 4 heads over 2 K/V heads (grouped-query), MLP 128, byte vocabulary.
ModelSpec TestModel() {
  ModelSpec m = FindModelPreset("tiny-dense")->spec;
  m.name = "mpi-test";
  m.hidden_size = 64;
  m.num_heads = 4;
  m.num_kv_heads = 2;
  m.head_dim = 16;
  m.ffn_hidden_size = 128;
  return m;
}

struct Case {
  std::string name;
  MeshShape mesh;
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;
  int64_t virtual_stages = 1;
  bool sequence_parallel = false;
  int64_t zero_stage = 0;
  int64_t micro_batch_size = 1;
};

PlanSpec PlanOf(const Case& c) {
  PlanSpec p;
  p.mesh = c.mesh;
  p.global_batch_size = 8;
  p.seq_len = 32;
  p.micro_batch_size = c.micro_batch_size;
  p.pipeline_schedule = c.schedule;
  p.virtual_stages = c.virtual_stages;
  p.sequence_parallel = c.sequence_parallel;
  p.zero_stage = c.zero_stage;
  return p;
}

MeshShape Mesh(int64_t data, int64_t tensor, int64_t pipeline) {
  MeshShape m;
  m.data = data, m.tensor = tensor, m.pipeline = pipeline;
  return m;
}

std::vector<Case> Cases() {
  return {
      {"data", Mesh(2, 1, 1)},
      {"data_zero1", Mesh(2, 1, 1), PipelineSchedule::kOneFOneB, 1, false, 1},
      {"data_zero2_mbs2", Mesh(2, 1, 1), PipelineSchedule::kOneFOneB, 1, false, 2, 2},
      {"tensor", Mesh(1, 2, 1)},
      {"tensor_sequence", Mesh(1, 2, 1), PipelineSchedule::kOneFOneB, 1, true},
      {"pipeline_1f1b", Mesh(1, 1, 2)},
      {"pipeline_gpipe", Mesh(1, 1, 2), PipelineSchedule::kGpipe},
      {"pipeline_zb_h1", Mesh(1, 1, 2), PipelineSchedule::kZbH1},
      {"data_tensor", Mesh(2, 2, 1), PipelineSchedule::kOneFOneB, 1, true},
      {"tensor_pipeline", Mesh(1, 2, 2)},
      {"pipeline_interleaved_data", Mesh(2, 1, 2), PipelineSchedule::kInterleavedOneFOneB, 2},
      {"pipeline_uneven", Mesh(1, 1, 3)},
      {"pipeline4", Mesh(1, 1, 4)},
      {"data_tensor_pipeline", Mesh(2, 2, 2), PipelineSchedule::kOneFOneB, 1, false, 1},
      {"tensor_sequence_pipeline", Mesh(1, 2, 4), PipelineSchedule::kOneFOneB, 1, true},
      {"data_tensor_sequence_zero1", Mesh(4, 2, 1), PipelineSchedule::kOneFOneB, 1, true, 1},
  };
}

class MpiEquivalenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(MpiEquivalenceTest, LossesAndParametersMatchOneRank) {
  const Case& c = GetParam();
  if (c.mesh.Product() != WorldSize()) GTEST_SKIP() << "needs " << c.mesh.Product() << " ranks";
  const ModelSpec model = TestModel();
  const Corpus corpus(std::string(ShippedCorpus()), 32);
  TrainOptions options;
  PlanSpec reference_plan = PlanOf(c);
  reference_plan.mesh = MeshShape{};
  reference_plan.sequence_parallel = false;
  reference_plan.zero_stage = 0;
  reference_plan.pipeline_schedule = PipelineSchedule::kOneFOneB;
  reference_plan.virtual_stages = 1;
  Trainer reference(model, reference_plan, options, MPI_COMM_SELF, corpus);
  Trainer sharded(model, PlanOf(c), options, MPI_COMM_WORLD, corpus);
  for (int step = 0; step < 10; ++step) {
    const double want = reference.Step().loss;
    const double got = sharded.Step().loss;
    EXPECT_NEAR(got / want, 1.0, 1e-4) << c.name << " step " << step << ": " << got << " vs " << want;
  }
  EXPECT_LT(RelativeParamDistance(sharded, reference), 1e-3) << c.name;
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
  if (WorldSize() > 1) {
    try {
      Trainer refused(model, fsdp, TrainOptions{}, MPI_COMM_WORLD, corpus);
      ADD_FAILURE() << "fsdp accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("fsdp parallelism: the runtime does not implement it yet"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace shardsim::runtime

// gtest under MPI: every rank runs every test (they are collective); rank 0 prints.
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  shardsim::runtime::UseOneBlasThread();
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS();
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return failed;
}
