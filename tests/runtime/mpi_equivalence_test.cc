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
  std::string layout = "";  // pipeline_layout
  Recompute recompute = Recompute::kNone;
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
  p.recompute = c.recompute;
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
  reference_plan.recompute = Recompute::kNone;
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
  };
  int ran = 0;
  for (const Case& c : cases) {
    if (c.mesh.Product() != WorldSize()) continue;
    ++ran;
    const ModelSpec model = c.moe ? TestMoeModel() : TestModel();
    PlanSpec plan = PlanOf(c);
    plan.dtype = "fp32";  // the runtime's activations: 4 bytes an element in the program's sizes
    Trainer trainer(model, plan, TrainOptions{}, MPI_COMM_WORLD, corpus);
    std::vector<IssuedCollective> log;
    trainer.comms().set_log(&log);
    trainer.EnableTrace(true);
    trainer.Step();
    trainer.comms().set_log(nullptr);

    const int64_t stage = trainer.comms().Coordinate("pipeline");
    std::map<std::string, strategies::Op> program;
    for (const strategies::KeyedOp& k : strategies::StageOps(trainer.program(), stage)) program.emplace(k.key, k.op);
    std::set<std::string> traced;
    for (const TraceEvent& e : trainer.trace_events()) traced.insert(e.key);
    std::vector<std::string> missing, extra;
    for (const auto& [key, op] : program) {
      if (!traced.count(key)) missing.push_back(key);
    }
    for (const std::string& key : traced) {
      if (!program.count(key)) extra.push_back(key);
    }
    auto first = [](const std::vector<std::string>& keys) {
      std::string text;
      for (size_t i = 0; i < keys.size() && i < 12; ++i) text += " " + keys[i];
      return text + (keys.size() > 12 ? " ..." : "");
    };
    EXPECT_TRUE(missing.empty()) << c.name << ": " << missing.size() << " program ops never traced:" << first(missing);
    EXPECT_TRUE(extra.empty()) << c.name << ": " << extra.size() << " traced ops the program lacks:" << first(extra);
    EXPECT_GT(traced.size(), 20u) << c.name;
    for (const TraceEvent& e : trainer.trace_events()) {
      const auto it = program.find(e.key);
      if (it == program.end()) continue;
      const strategies::Op& op = it->second;
      const std::string want = !op.is_comm() ? (op.kind == strategies::ComputeKind::kOptimizer ? "optimizer" : "compute") : strategies::ToString(op.stream);
      EXPECT_EQ(e.category, want) << c.name << " " << e.key;
    }
    // Where the schedule runs a micro-batch's W apart from its B, every W op of that chunk and
    // micro-batch starts after its B task's ops end.
    const strategies::StepProgram& prog = trainer.program();
    const std::vector<strategies::Task> tasks = strategies::StageTasks(prog, stage);
    std::set<std::pair<int64_t, int64_t>> apart;  // (chunk, micro-batch)
    for (size_t i = 0; i < tasks.size(); ++i) {
      if (tasks[i].phase != strategies::Phase::kBackwardInput) continue;
      const bool next_is_w = i + 1 < tasks.size() && tasks[i + 1].phase == strategies::Phase::kBackwardWeight &&
                             tasks[i + 1].chunk == tasks[i].chunk && tasks[i + 1].microbatch == tasks[i].microbatch;
      if (!next_is_w) apart.insert({tasks[i].chunk, tasks[i].microbatch});
    }
    std::map<std::string, int64_t> chunk_of;  // layer label -> chunk
    for (int64_t ch = 0; ch < prog.layout.chunks; ++ch) {
      const strategies::ChunkLayout& l = prog.layout.Chunk(stage, ch);
      if (l.embedding) chunk_of[std::string(strategies::kEmbeddingLayer)] = ch;
      if (l.head) chunk_of[std::string(strategies::kHeadLayer)] = ch;
      for (int64_t layer = l.first_layer; layer < l.first_layer + l.layers; ++layer) chunk_of[strategies::DecoderLayer(layer)] = ch;
      chunk_of[strategies::ChunkLayer(ch)] = ch;
    }
    std::map<std::pair<int64_t, int64_t>, double> b_end, w_start;
    for (const TraceEvent& e : trainer.trace_events()) {
      const auto it = program.find(e.key);
      if (it == program.end()) continue;
      const size_t a = e.key.find('/'), b = e.key.find('/', a + 1), d = e.key.rfind('/');
      const std::string label = e.key.substr(a + 1, b - a - 1), mb = e.key.substr(d + 1);
      if (mb == "-" || !chunk_of.count(label)) continue;
      const std::pair<int64_t, int64_t> at{chunk_of[label], std::stoll(mb)};
      if (!apart.count(at)) continue;
      if (it->second.phase == strategies::Phase::kBackwardWeight) {
        w_start[at] = w_start.count(at) ? std::min(w_start[at], e.start_s) : e.start_s;
      } else if (it->second.phase != strategies::Phase::kForward) {
        b_end[at] = std::max(b_end[at], e.start_s + e.duration_s);
      }
    }
    for (const auto& [at, start] : w_start) {
      EXPECT_GE(start, b_end[at]) << c.name << ": a W op of chunk " << at.first << " micro-batch " << at.second << " ran inside its B task";
    }
    ASSERT_FALSE(log.empty() && c.mesh.Product() > 1 && c.mesh.pipeline == 1) << c.name;
    for (const IssuedCollective& issued : log) {
      const auto it = program.find(issued.key);
      ASSERT_NE(it, program.end()) << c.name << ": " << issued.what << " issued under '" << issued.key << "', not a program op";
      const strategies::Op& op = it->second;
      EXPECT_TRUE(op.is_comm()) << c.name << ": " << issued.what << " issued inside compute op " << issued.key;
      EXPECT_EQ(issued.op, op.collective) << c.name << " " << issued.key << ": " << issued.what;
      EXPECT_EQ(issued.axes, op.axes) << c.name << " " << issued.key << ": " << issued.what;
      if (op.stream == strategies::Stream::kTensor && issued.key.find("/-/") == std::string::npos) {
        EXPECT_EQ(static_cast<double>(issued.elements) * 4, op.comm_bytes) << c.name << " " << issued.key;
      }
    }
  }
  if (ran == 0) GTEST_SKIP() << "no case for " << WorldSize() << " ranks";
}

}  // namespace
}  // namespace shardsim::runtime
