#include "tests/runtime/equivalence_harness.h"

#include <mpi.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "core/model_presets.h"
#include "strategies/build_step.h"
#include "strategies/op_keys.h"
#include "strategies/op_names.h"
#include "runtime/trainer.h"

namespace shardsim::runtime::equivalence {

PlanSpec PlanOf(const Case& c) {
  PlanSpec p;
  p.mesh = c.mesh;
  p.global_batch_size = c.global_batch_size;
  p.seq_len = 32;
  p.micro_batch_size = c.micro_batch_size;
  p.pipeline_schedule = c.schedule;
  p.virtual_stages = c.virtual_stages;
  p.sequence_parallel = c.sequence_parallel;
  p.sequence_parallel_inputs = c.sequence_parallel_inputs;
  p.zero_stage = c.zero_stage;
  p.pipeline_layout = c.layout;
  p.recompute = c.recompute;
  p.pipeline_rounds = c.pipeline_rounds;
  return p;
}

Case InRounds(Case c, int64_t rounds) {
  c.name += "_rounds" + std::to_string(rounds);
  c.pipeline_rounds = rounds;
  return c;
}

MeshShape Mesh(int64_t data, int64_t tensor, int64_t pipeline, int64_t context, int64_t fsdp, int64_t expert) {
  MeshShape m;
  m.data = data, m.tensor = tensor, m.pipeline = pipeline, m.context = context, m.fsdp = fsdp, m.expert = expert;
  return m;
}

Case Moe(std::string name, int64_t data, int64_t expert, int64_t pipeline, int64_t context, int64_t fsdp, int64_t zero_stage) {
  Case c{std::move(name), Mesh(data, 1, pipeline, context, fsdp, expert)};
  c.zero_stage = zero_stage;
  c.moe = true;
  return c;
}

ModelSpec ModelOf(const Case& c) {
  if (c.model) return *c.model;
  return c.moe ? TestMoeModel() : TestModel();
}

void ExpectMatchesOneRank(const Case& c) {
  const ModelSpec model = ModelOf(c);
  const Corpus corpus(std::string(ShippedCorpus()), 32);
  TrainOptions options;
  PlanSpec reference_plan = PlanOf(c);
  reference_plan.mesh = MeshShape{};
  reference_plan.sequence_parallel = false;
  reference_plan.zero_stage = 0;
  reference_plan.pipeline_schedule = "1f1b";
  reference_plan.virtual_stages = 1;
  reference_plan.pipeline_rounds = 1;  // one stage: plain gradient accumulation
  reference_plan.pipeline_layout.clear();
  reference_plan.recompute = Recompute::kNone;
  Trainer reference(model, reference_plan, options, MPI_COMM_SELF, corpus);
  Trainer sharded(model, PlanOf(c), options, MPI_COMM_WORLD, corpus);
  // Under the sanitizers (about 5 times slower) 4 steps: each step runs the same code, and the
  // release build's 10 check how the differences grow.
#ifdef SHARDSIM_SANITIZE
  constexpr int kSteps = 4;
#else
  constexpr int kSteps = 10;
#endif
  for (int step = 0; step < kSteps; ++step) {
    const double want = reference.Step().loss;
    const double got = sharded.Step().loss;
    EXPECT_NEAR(got / want, 1.0, 1e-4) << c.name << " step " << step << ": " << got << " vs " << want;
  }
  EXPECT_LT(RelativeParamDistance(sharded, reference), 1e-3) << c.name;
}

void ExpectTraceMatchesProgram(const Case& c) {
  const Corpus corpus(std::string(ShippedCorpus()), 32);
  const ModelSpec model = ModelOf(c);
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
    // Sizes of tensor ops, but the routed experts' rows (dropless: they follow the routing; the
    // program costs them at its capacity factor).
    const bool routed = op.name == strategies::ops::kTensorEnterExperts || op.name == strategies::ops::kTensorExitExperts ||
                        op.name == strategies::ops::Grad(strategies::ops::kTensorEnterExperts) ||
                        op.name == strategies::ops::Grad(strategies::ops::kTensorExitExperts);
    if (op.stream == strategies::Stream::kTensor && !routed && issued.key.find("/-/") == std::string::npos) {
      EXPECT_EQ(static_cast<double>(issued.elements) * 4, op.comm_bytes) << c.name << " " << issued.key;
    }
  }
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) { return info.param.name; }

TEST_P(EquivalenceTest, LossesAndParametersMatchOneRank) {
  const Case& c = GetParam();
  if (c.mesh.Product() != WorldSize()) GTEST_SKIP() << "needs " << c.mesh.Product() << " ranks";
  ExpectMatchesOneRank(c);
}

TEST_P(EquivalenceTest, TraceMatchesTheStepProgram) {
  const Case& c = GetParam();
  if (c.mesh.Product() != WorldSize()) GTEST_SKIP() << "needs " << c.mesh.Product() << " ranks";
  ExpectTraceMatchesProgram(c);
}

}  // namespace shardsim::runtime::equivalence
