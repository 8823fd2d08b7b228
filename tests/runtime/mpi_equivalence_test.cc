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

#include "core/error.h"
#include "core/model_presets.h"
#include "strategies/build_step.h"
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

// tiny-moe's shape, as narrow: the first layer dense, then MoE layers of 4 experts (top-2, width
// 32) and one shared expert.
ModelSpec TestMoeModel() {
  ModelSpec m = TestModel();
  m.name = "mpi-test-moe";
  m.moe = MoeSpec{.num_experts = 4, .top_k = 2, .num_shared_experts = 1, .expert_ffn_hidden_size = 32, .first_dense_layers = 1, .layer_interval = 1};
  return m;
}

struct Case {
  std::string name;
  MeshShape mesh;
  std::string schedule = "1f1b";
  int64_t virtual_stages = 1;
  bool sequence_parallel = false;
  int64_t zero_stage = 0;
  int64_t micro_batch_size = 1;
  bool moe = false;
  std::string layout;  // pipeline_layout
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
  p.pipeline_layout = c.layout;
  return p;
}

MeshShape Mesh(int64_t data, int64_t tensor, int64_t pipeline, int64_t context = 1, int64_t fsdp = 1, int64_t expert = 1) {
  MeshShape m;
  m.data = data, m.tensor = tensor, m.pipeline = pipeline, m.context = context, m.fsdp = fsdp, m.expert = expert;
  return m;
}

// An MoE model's case: mesh data x expert x pipeline x context x fsdp.
Case Moe(std::string name, int64_t data, int64_t expert, int64_t pipeline = 1, int64_t context = 1, int64_t fsdp = 1, int64_t zero_stage = 0) {
  Case c{std::move(name), Mesh(data, 1, pipeline, context, fsdp, expert)};
  c.zero_stage = zero_stage;
  c.moe = true;
  return c;
}

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
  };
}

class MpiEquivalenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(MpiEquivalenceTest, LossesAndParametersMatchOneRank) {
  const Case& c = GetParam();
  if (c.mesh.Product() != WorldSize()) GTEST_SKIP() << "needs " << c.mesh.Product() << " ranks";
  const ModelSpec model = c.moe ? TestMoeModel() : TestModel();
  const Corpus corpus(std::string(ShippedCorpus()), 32);
  TrainOptions options;
  PlanSpec reference_plan = PlanOf(c);
  reference_plan.mesh = MeshShape{};
  reference_plan.sequence_parallel = false;
  reference_plan.zero_stage = 0;
  reference_plan.pipeline_schedule = "1f1b";
  reference_plan.virtual_stages = 1;
  reference_plan.pipeline_layout.clear();
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

// The collectives each rank issues in a step are those the step program lists for the same plan:
// per transformer layer, kind, axes, size and order (forward, then backward in reverse), and the
// data-parallel reduction of the step. (Embedding and head differ on purpose: the runtime keeps
// them whole on every tensor rank, the program shards the vocabulary.)
TEST(MpiRuntimeTest, CollectivesMatchTheStepProgram) {
  if (WorldSize() != 2) GTEST_SKIP() << "a 2-rank check";
  const Corpus corpus(std::string(ShippedCorpus()), 32);
  for (const Case& c : {Case{"tensor_sequence", Mesh(1, 2, 1), "1f1b", 1, true}, Case{"tensor", Mesh(1, 2, 1)},
                        Case{"data", Mesh(2, 1, 1)}, Case{"data_zero1", Mesh(2, 1, 1), "1f1b", 1, false, 1},
                        Case{"data_zero2_mbs2", Mesh(2, 1, 1), "1f1b", 1, false, 2, 2},
                        Case{"data_zero3", Mesh(2, 1, 1), "1f1b", 1, false, 3},
                        Case{"fsdp", Mesh(1, 1, 1, 1, 2)}, Moe("moe_expert", 1, 2)}) {
    const ModelSpec model = c.moe ? TestMoeModel() : TestModel();
    PlanSpec plan = PlanOf(c);
    plan.dtype = "fp32";  // the runtime's activations: 4 bytes an element in the program's sizes
    Trainer trainer(model, plan, TrainOptions{}, MPI_COMM_WORLD, corpus);
    std::vector<IssuedCollective> log;
    trainer.comms().set_log(&log);
    trainer.Step();
    trainer.comms().set_log(nullptr);

    const strategies::StepProgram program = strategies::BuildStep(model, plan);
    const strategies::Stage& stage = program.stages[0];
    std::vector<IssuedCollective> want, want_gathers, want_scatters;
    for (const strategies::Task& task : strategies::StageTasks(program, 0)) {
      if (task.phase == strategies::Phase::kBackwardWeight) continue;  // computed with B here
      // The chunk's transformer layers (dense or MoE programs), backward in reverse.
      std::vector<const strategies::LayerProgram*> layers;
      for (const auto& [kind, count] : stage.chunks[static_cast<size_t>(task.chunk)].layers) {
        const strategies::LayerProgram& lp = program.Layer(kind);
        if (kind != strategies::LayerKind::kDense && kind != strategies::LayerKind::kMoe) continue;
        for (int64_t l = 0; l < count; ++l) layers.push_back(&lp);
      }
      if (task.phase != strategies::Phase::kForward) std::reverse(layers.begin(), layers.end());
      for (const strategies::LayerProgram* layer : layers) {
        for (const strategies::Op& op : layer->ops) {
          if (!op.is_comm()) continue;
          // The runtime computes weight gradients (W) with the input gradients (B).
          const bool in_task = op.phase == task.phase || (task.phase == strategies::Phase::kBackwardInput && op.phase == strategies::Phase::kBackwardWeight);
          if (!in_task) continue;
          // Tensor ops: activations in fp32. Sharded-parameter ops: bf16 in the program.
          if (op.stream == strategies::Stream::kTensor && op.phase == task.phase) {
            want.push_back({op.collective, op.axes, static_cast<int64_t>(op.comm_bytes / 4), op.name});
          } else if (op.stream == strategies::Stream::kExpert && op.phase == task.phase) {
            // Dropless routing: the all-to-all sizes follow the routing, not the capacity factor.
            want.push_back({op.collective, op.axes, -1, op.name});
          } else if (op.stream == strategies::Stream::kData && op.collective == CollectiveOp::kAllGather) {
            want_gathers.push_back({op.collective, op.axes, static_cast<int64_t>(op.comm_bytes / 2), op.name});
          } else if (op.stream == strategies::Stream::kData && op.collective == CollectiveOp::kReduceScatter) {
            want_scatters.push_back({op.collective, op.axes, static_cast<int64_t>(op.comm_bytes / 2), op.name});
          }
        }
      }
    }
    std::vector<IssuedCollective> layer_ops, step_ops, gathers, scatters;
    for (const IssuedCollective& issued : log) {
      if (issued.what.rfind("layer ", 0) == 0) layer_ops.push_back(issued);
      // Per-layer parameter gathers and gradient reduce-scatters (the prefetch interleaves the two
      // kinds, so each is compared in its own order).
      if (issued.what.rfind("sharded layer", 0) == 0) (issued.op == CollectiveOp::kAllGather ? gathers : scatters).push_back(issued);
      if (issued.what.rfind("data-parallel", 0) == 0 || issued.what.rfind("ZeRO", 0) == 0) {
        // The runtime all-reduces in buckets (a layer each) what the program costs as one op.
        const bool bucket = issued.what.find("(bucket)") != std::string::npos;
        if (bucket && !step_ops.empty() && step_ops.back().what == issued.what) {
          step_ops.back().elements += issued.elements;
        } else {
          step_ops.push_back(issued);
        }
      }
    }
    ASSERT_FALSE(want.empty() && step_ops.empty() && want_gathers.empty() && want_scatters.empty()) << c.name << ": nothing to compare";
    for (const auto& [mine, theirs] : {std::pair{&gathers, &want_gathers}, std::pair{&scatters, &want_scatters}}) {
      ASSERT_EQ(mine->size(), theirs->size()) << c.name;
      for (size_t i = 0; i < mine->size(); ++i) {
        EXPECT_EQ((*mine)[i].axes, (*theirs)[i].axes) << c.name << " " << (*mine)[i].what;
        // The runtime pads a bucket to a multiple of the group.
        EXPECT_NEAR(static_cast<double>((*mine)[i].elements), static_cast<double>((*theirs)[i].elements), 2.0) << c.name << " " << (*mine)[i].what;
      }
    }
    ASSERT_EQ(layer_ops.size(), want.size()) << c.name;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(layer_ops[i].op, want[i].op) << c.name << " #" << i << " " << layer_ops[i].what << " vs " << want[i].what;
      EXPECT_EQ(layer_ops[i].axes, want[i].axes) << c.name << " #" << i;
      if (want[i].elements >= 0) {
        EXPECT_EQ(layer_ops[i].elements, want[i].elements) << c.name << " #" << i << " " << layer_ops[i].what;
      }
    }
    // The step's data-parallel ops: same kinds and axes, in order; sizes as the parameters held.
    std::vector<const strategies::Op*> program_step;
    for (const strategies::Op& op : stage.step_ops) {
      if (op.is_comm() && op.stream == strategies::Stream::kData) program_step.push_back(&op);
    }
    ASSERT_EQ(step_ops.size(), program_step.size()) << c.name;
    for (size_t i = 0; i < step_ops.size(); ++i) {
      EXPECT_EQ(step_ops[i].op, program_step[i]->collective) << c.name << " " << step_ops[i].what;
      EXPECT_EQ(step_ops[i].axes, program_step[i]->axes) << c.name;
      // Program: bf16 gradients and parameters (2 bytes); the runtime pads each bucket (a layer,
      // the embedding, the head) to a multiple of the replicas.
      EXPECT_NEAR(static_cast<double>(step_ops[i].elements), program_step[i]->comm_bytes / 2, 2.0 * static_cast<double>(trainer.model().buckets().size()))
          << c.name << " " << step_ops[i].what;
    }
  }
}

}  // namespace
}  // namespace shardsim::runtime
