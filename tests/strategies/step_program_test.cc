#include "strategies/step_program.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "core/error.h"
#include "strategies/build_step.h"
#include "strategies/context_parallel.h"
#include "strategies/memory_model.h"
#include "strategies/op_names.h"
#include "strategies/saved_tensors.h"
#include "strategies/data_parallel.h"
#include "tests/strategies/test_models.h"

namespace shardsim::strategies {
namespace {

// FLOPs the whole step executes (all devices), without recomputation.
double ProgramFlops(const StepProgram& program) {
  const PlanSpec& p = program.plan;
  double per_pipeline = 0;  // one data-parallel replica's pipeline
  for (size_t s = 0; s < program.stages.size(); ++s) {
    const Stage& stage = program.stages[s];
    for (const Task& task : StageTasks(program, static_cast<int64_t>(s))) {
      for (const auto& [kind, count, sixteen_bit] : stage.chunks[static_cast<size_t>(task.chunk)].layers) {
        per_pipeline += static_cast<double>(count) * PhaseFlops(program.Layer(kind), task.phase);
      }
    }
  }
  return per_pipeline * static_cast<double>(p.mesh.tensor) * static_cast<double>(p.mesh.data * p.mesh.fsdp * p.mesh.expert);
}

// The step program's FLOPs add up to the closed form: 6 N per token for the matmuls and PaLM's
// 12 L S D attention term (full attention: an unfused kernel computes every block).
TEST(StepProgramTest, FlopsAddUpToSixNPlusAttention) {
  // (With tensor parallelism an MoE router runs on every tensor rank, redundantly: tensor = 1.)
  for (const auto& [name, tensor] : {std::pair{"llama3-8b", 4}, std::pair{"mixtral-8x7b", 1}}) {
    const ModelSpec m = FindModelPreset(name)->spec;
    PlanSpec p = Plan(2, tensor, 2, 32, 4096);
    p.flash_attention = false;
    const StepProgram program = BuildStep(m, p);
    EXPECT_NEAR(ProgramFlops(program) / program.palm_flops_per_step, 1.0, 1e-9) << name;
    // A blockwise kernel skips the masked half: the program then matches the causal count.
    p.flash_attention = true;
    const StepProgram flash = BuildStep(m, p);
    EXPECT_NEAR(ProgramFlops(flash) / flash.model_flops_per_step, 1.0, 1e-9) << name;
  }
  // DeepSeek-V3 with its multi-token-prediction module: its layer and the shared head again, on
  // the last stage. (MLA's latent norms count as parameters in 6N but run no product: 3e-6.)
  {
    ModelSpec m = FindModelPreset("deepseek-v3")->spec;  // without its module
    const StepProgram base = BuildStep(m, Plan(2, 1, 2, 32, 4096));
    EXPECT_NEAR(ProgramFlops(base) / base.model_flops_per_step, 1.0, 1e-5);
    m.mtp_layers = 1;
    const StepProgram program = BuildStep(m, Plan(2, 1, 2, 32, 4096));
    EXPECT_NEAR(ProgramFlops(program) / program.model_flops_per_step, 1.0, 1e-5);
    EXPECT_GT(program.model_flops_per_step, 1.01 * base.model_flops_per_step);
    const auto& last = program.stages.back().chunks.back().layers;
    ASSERT_GE(last.size(), 2u);
    EXPECT_EQ(last[last.size() - 2], (LayerRun{.kind = LayerKind::kMtp, .count = 1}));  // after the layers, before the head
    EXPECT_EQ(last.back().kind, LayerKind::kHead);
    EXPECT_GT(program.stages.back().params(), program.stages.front().params());
  }
  // gpt-oss: local layers over a 128-token window alternating with global ones. A blockwise
  // kernel reads the window's keys as the causal count does; an unfused one computes every block,
  // as PaLM's count counts it (both within the biases, parameters in 6N but additions in the
  // program).
  const ModelSpec oss = FindModelPreset("gpt-oss-20b")->spec;
  PlanSpec p = Plan(2, 1, 2, 32, 4096);
  const StepProgram flash = BuildStep(oss, p);
  EXPECT_NEAR(ProgramFlops(flash) / flash.model_flops_per_step, 1.0, 1e-3);
  EXPECT_LT(flash.model_flops_per_step, 0.9 * flash.palm_flops_per_step);
  p.flash_attention = false;
  const StepProgram unfused = BuildStep(oss, p);
  EXPECT_NEAR(ProgramFlops(unfused) / unfused.palm_flops_per_step, 1.0, 1e-3);
}

// A hybrid model's multi-token-prediction modules run their pattern's layers: the program's FLOPs
// are the model's count with them; shared weights hold one module's parameters for both depths.
TEST(StepProgramTest, HybridMtpModulesRunTheirPattern) {
  ModelSpec m = FindModelPreset("nemotron-3-nano-30b-a3b")->spec;
  PlanSpec p = Plan(4, 1, 1, 32, 4096);  // one stage: no embedding copy beside the modules
  p.recompute = Recompute::kFull;
  const StepProgram base = BuildStep(m, p);
  m.mtp_layers = 2;
  m.mtp_pattern = "*E";
  const StepProgram own = BuildStep(m, p);
  EXPECT_NEAR(ProgramFlops(own) / own.model_flops_per_step, 1.0, 1e-5);
  EXPECT_GT(own.model_flops_per_step, 1.01 * base.model_flops_per_step);
  const LayerProgram& module = own.Layer(LayerKind::kMtp);
  auto has = [&module](std::string_view name) {
    return std::any_of(module.ops.begin(), module.ops.end(), [&](const Op& op) { return op.name.find(name) != std::string::npos; });
  };
  EXPECT_TRUE(has("qkv"));
  EXPECT_TRUE(has("experts"));
  EXPECT_FALSE(has("mamba"));
  const auto& last = own.stages.back().chunks.back().layers;
  ASSERT_GE(last.size(), 2u);
  EXPECT_EQ(last[last.size() - 2], (LayerRun{.kind = LayerKind::kMtp, .count = 2}));
  m.mtp_shared_weights = true;
  const StepProgram shared = BuildStep(m, p);
  EXPECT_DOUBLE_EQ(shared.model_flops_per_step, own.model_flops_per_step);
  const double module_params = own.stages.back().params() - shared.stages.back().params();
  EXPECT_GT(module_params, 0);
  EXPECT_NEAR(shared.stages.back().params() - base.stages.back().params(), module_params, 1e-6 * module_params);
}

TEST(StepProgramTest, TensorParallelIssuesTwoAllReducesEachWay) {
  const ModelSpec m = GptModel(8, 1024, 16);
  PlanSpec p = Plan(1, 4, 1, 4, 2048);
  p.micro_batch_size = 2;
  const StepProgram program = BuildStep(m, p);
  const double bsd = 2.0 * 2048 * 1024 * 2;  // b x S x D x 2 bytes
  int forward = 0, backward = 0;
  for (const Op& op : program.layer_programs[0].ops) {
    if (op.stream != Stream::kTensor) continue;
    EXPECT_EQ(op.collective, CollectiveOp::kAllReduce) << op.name;
    EXPECT_DOUBLE_EQ(op.comm_bytes, bsd) << op.name;
    (op.phase == Phase::kForward ? forward : backward) += 1;
  }
  EXPECT_EQ(forward, 2);
  EXPECT_EQ(backward, 2);
  // Sequence parallel: the same volume as reduce-scatter + all-gather, two each way, and the two
  // column-parallel regions' inputs gathered again in backward (only the shards are kept:
  // Korthikanti et al. 2022, section 4.2.2).
  p.sequence_parallel = true;
  std::map<std::pair<int, CollectiveOp>, int> count;
  const StepProgram sequence_parallel = BuildStep(m, p);
  for (const Op& op : sequence_parallel.layer_programs[0].ops) {
    if (op.stream != Stream::kTensor) continue;
    EXPECT_DOUBLE_EQ(op.comm_bytes, bsd) << op.name;
    ++count[{static_cast<int>(op.phase), op.collective}];
  }
  EXPECT_EQ((count[{static_cast<int>(Phase::kForward), CollectiveOp::kAllGather}]), 2);
  EXPECT_EQ((count[{static_cast<int>(Phase::kForward), CollectiveOp::kReduceScatter}]), 2);
  EXPECT_EQ((count[{static_cast<int>(Phase::kBackwardInput), CollectiveOp::kAllGather}]), 4);
  EXPECT_EQ((count[{static_cast<int>(Phase::kBackwardInput), CollectiveOp::kReduceScatter}]), 2);
}

// Tensor-parallel overlap pairs each collective with its own product: the forward all-gather
// with the product that reads what it gathers, the reduce-scatter with the one whose output it
// reduces, the sequence-parallel regather with the input-gradient product it runs beside. Without
// overlap.tensor only the regather (always asynchronous) has one.
TEST(StepProgramTest, TensorCollectivesOverlapTheirOwnProduct) {
  const ModelSpec m = FindModelPreset("llama3-8b")->spec;
  PlanSpec p = Plan(1, 4, 1, 4, 2048);
  p.sequence_parallel = true;
  p.overlap.tensor = true;
  auto partners = [&](const PlanSpec& plan) {
    const StepProgram program = BuildStep(m, plan);
    const std::vector<Op>& ops = program.Layer(LayerKind::kDense).ops;
    std::map<std::pair<std::string, int>, std::string> out;
    for (size_t i = 0; i < ops.size(); ++i) {
      const int64_t partner = OverlapPartner(ops, i);
      if (partner >= 0) {
        EXPECT_EQ(ops[static_cast<size_t>(partner)].phase, ops[i].phase) << ops[i].name;
        out[{ops[i].name, static_cast<int>(ops[i].phase)}] = ops[static_cast<size_t>(partner)].name;
      } else {
        EXPECT_FALSE(ops[i].is_comm() && ops[i].stream == Stream::kTensor && ops[i].overlapped && ops[i].phase == Phase::kForward) << ops[i].name;
      }
    }
    return out;
  };
  const int forward = static_cast<int>(Phase::kForward), backward = static_cast<int>(Phase::kBackwardInput);
  auto overlapped = partners(p);
  EXPECT_EQ((overlapped[{std::string(ops::kTensorEnterAttention), forward}]), ops::kQkv);
  EXPECT_EQ((overlapped[{std::string(ops::kTensorExitAttention), forward}]), ops::kAttentionOut);
  EXPECT_EQ((overlapped[{ops::Grad(ops::kTensorExitAttention), backward}]), ops::Dgrad(ops::kAttentionOut));
  EXPECT_EQ((overlapped[{ops::Grad(ops::kTensorEnterAttention), backward}]), ops::Dgrad(ops::kQkv));
  EXPECT_EQ((overlapped[{ops::Grad(ops::Regather(ops::kTensorEnterAttention)), backward}]), ops::Dgrad(ops::kQkv));
  // The loss's all-reduces reduce the cross-entropy's output, not a product's: none.
  const StepProgram overlapping = BuildStep(m, p);
  const std::vector<Op>& head = overlapping.Layer(LayerKind::kHead).ops;
  int loss_reductions = 0;
  for (size_t i = 0; i < head.size(); ++i) {
    if (head[i].name != ops::kTensorLossMax && head[i].name != ops::kTensorLossSum) continue;
    ++loss_reductions;
    EXPECT_EQ(OverlapPartner(head, i), -1) << head[i].name;
  }
  EXPECT_EQ(loss_reductions, 2);
  p.overlap.tensor = false;
  const auto blocking = partners(p);
  EXPECT_EQ(blocking.size(), 2u);  // the two regathers (attention, MLP)
  EXPECT_EQ((blocking.at({ops::Grad(ops::Regather(ops::kTensorEnterAttention)), backward})), ops::Dgrad(ops::kQkv));
}

TEST(StepProgramTest, ExpertAllToAllMovesTheRoutedTokens) {
  const ModelSpec m = FindModelPreset("mixtral-8x7b")->spec;
  PlanSpec p = Plan(2, 1, 1, 16, 4096);
  p.mesh.expert = 4;
  p.micro_batch_size = 1;
  const StepProgram program = BuildStep(m, p);
  int a2a = 0;
  for (const Op& op : program.layer_programs[1].ops) {
    if (op.stream != Stream::kExpert) continue;
    EXPECT_EQ(op.collective, CollectiveOp::kAllToAll);
    EXPECT_DOUBLE_EQ(op.comm_bytes, 4096.0 * 2 /*top-2*/ * 4096 /*D*/ * 2);
    ++a2a;
  }
  EXPECT_EQ(a2a, 4);  // dispatch and combine, forward and backward
  // FP8 dispatch (block-wise: a 4-byte scale per 128 elements): the rows toward the experts (the
  // dispatch, the combine's backward) at 1 + 4/128 bytes, those back at 2.
  p.dtype = "fp8", p.fp8_recipe = "blockwise", p.ep_dispatch_dtype = "fp8";
  std::map<std::string, double> bytes;
  const StepProgram fp8 = BuildStep(m, p);
  for (const Op& op : fp8.Layer(LayerKind::kMoe).ops) {
    if (op.stream == Stream::kExpert) bytes[op.name] = op.comm_bytes;
  }
  const double rows = 4096.0 * 2 * 4096;
  EXPECT_DOUBLE_EQ(bytes[std::string(ops::kExpertDispatch)], rows * (1 + 4.0 / 128));
  EXPECT_DOUBLE_EQ(bytes[ops::Grad(ops::kExpertCombine)], rows * (1 + 4.0 / 128));
  EXPECT_DOUBLE_EQ(bytes[std::string(ops::kExpertCombine)], rows * 2);
  EXPECT_DOUBLE_EQ(bytes[ops::Grad(ops::kExpertDispatch)], rows * 2);
  EXPECT_EQ(bytes.size(), 4u);
  // Over tensor, the gathers toward the experts keep the dispatch width, the reductions 16 bits.
  p.mesh.tensor = 2, p.sequence_parallel = true;
  const StepProgram split = BuildStep(m, p);
  std::map<std::string, double> tensor;
  for (const Op& op : split.Layer(LayerKind::kMoe).ops) {
    if (op.stream == Stream::kTensor) tensor[op.name] = op.comm_bytes;
  }
  EXPECT_DOUBLE_EQ(tensor[std::string(ops::kTensorEnterExperts)], rows * (1 + 4.0 / 128));
  EXPECT_DOUBLE_EQ(tensor[ops::Grad(ops::kTensorExitExperts)], rows * (1 + 4.0 / 128));
  EXPECT_DOUBLE_EQ(tensor[ops::Grad(ops::kTensorEnterExperts)], rows * 2);
  EXPECT_DOUBLE_EQ(tensor[std::string(ops::kTensorExitExperts)], rows * 2);
}

// MoE parallel folding (Megatron-core): the experts split over the context ranks (and, with
// expert tensor size 1, the tensor ranks) instead of an expert axis. The all-to-alls run over
// those axes and move the same rows per rank; each rank holds E / degree experts; expert
// gradients are not reduced over the axes the experts are split over (dense ones still are);
// folded over tensor, the experts run whole on each rank's own rows, with no gather over tensor
// and the same FLOPs.
TEST(StepProgramTest, MoeParallelFoldingSplitsExpertsOverContextAndTensor) {
  const ModelSpec m = FindModelPreset("mixtral-8x7b")->spec;  // 8 experts
  auto moe_ops = [](const StepProgram& program) {
    std::map<std::string, Op> ops;
    for (const Op& op : program.Layer(LayerKind::kMoe).ops) ops[op.name] = op;
    return ops;
  };
  const std::string dispatch(ops::kExpertDispatch), enter(ops::kTensorEnterExperts), up(ops::kExpertsUp);
  PlanSpec p = Plan(2, 2, 1, 16, 8192);
  p.mesh.context = 4, p.sequence_parallel = true, p.zero_stage = 1;
  const StepProgram plain = BuildStep(m, p);
  EXPECT_EQ(moe_ops(plain).count(dispatch), 0u);  // no expert axis: no all-to-all
  p.expert_axes = {"context"};
  const StepProgram context = BuildStep(m, p);
  const std::map<std::string, Op> folded = moe_ops(context);
  ASSERT_EQ(folded.count(dispatch), 1u);
  EXPECT_EQ(folded.at(dispatch).axes, (std::vector<std::string>{"context"}));
  // Each rank sends its own (sequence-parallel) tokens' top-2 copies: 8192 / 4 context / 2 tensor.
  EXPECT_DOUBLE_EQ(folded.at(dispatch).comm_bytes, 8192.0 / 4 / 2 * 2 * 4096 * 2);
  EXPECT_NEAR(context.stages[0].expert_params * 4, plain.stages[0].expert_params, 1);
  EXPECT_EQ(ReplicaAxes(p, ParamKind::kExpert), (std::vector<std::string>{"data"}));
  EXPECT_EQ(ReplicaAxes(p, ParamKind::kDense), (std::vector<std::string>{"data", "context"}));
  // Folded over tensor too: whole experts, no gather over tensor, the same FLOPs.
  p.mesh.data = 1;
  const StepProgram halves = BuildStep(m, p);
  p.expert_axes = {"tensor", "context"};
  const StepProgram whole = BuildStep(m, p);
  const std::map<std::string, Op> w = moe_ops(whole), h = moe_ops(halves);
  EXPECT_EQ(w.at(dispatch).axes, (std::vector<std::string>{"tensor", "context"}));
  EXPECT_EQ(w.count(enter), 0u);
  EXPECT_EQ(h.count(enter), 1u);
  EXPECT_DOUBLE_EQ(w.at(up).flops, h.at(up).flops);
  EXPECT_EQ(w.at(up).n, 2 * h.at(up).n);
  EXPECT_NEAR(whole.stages[0].expert_params, halves.stages[0].expert_params, 1);  // E/8 whole = E/4 halves
}

// Ring attention: c-1 sends of the local K/V block forward, 2(c-1) backward (K/V and dK/dV); the
// all-gather variant gathers the whole sequence's K/V once and reduce-scatters the gradients.
TEST(StepProgramTest, ContextParallelVolumes) {
  const ModelSpec m = FindModelPreset("llama3-8b")->spec;  // 8 K/V heads of 128
  PlanSpec p = Plan(1, 1, 1, 1, 32768);
  p.mesh.context = 4;
  const double block = 32768.0 / 4 * (2 * 8 * 128) * 2;  // tokens x (K + V) x 2 bytes
  int forward = 0, backward = 0;
  const StepProgram ring = BuildStep(m, p);
  for (const Op& op : ring.layer_programs[0].ops) {
    if (op.stream != Stream::kContext) continue;
    EXPECT_EQ(op.collective, CollectiveOp::kPermute);
    EXPECT_DOUBLE_EQ(op.comm_bytes, block);
    (op.phase == Phase::kForward ? forward : backward) += 1;
  }
  EXPECT_EQ(forward, 3);
  EXPECT_EQ(backward, 6);
  p.context_kv = "all-gather";
  std::vector<CollectiveOp> ops;
  const StepProgram gathered = BuildStep(m, p);
  for (const Op& op : gathered.layer_programs[0].ops) {
    if (op.stream != Stream::kContext) continue;
    EXPECT_DOUBLE_EQ(op.comm_bytes, 4 * block);
    ops.push_back(op.collective);
  }
  EXPECT_EQ(ops, (std::vector<CollectiveOp>{CollectiveOp::kAllGather, CollectiveOp::kAllGather, CollectiveOp::kReduceScatter}));
  // K/V repeated to the 32 query heads before the attention (repeat_kv): four times as wide.
  p.repeat_kv = true;
  EXPECT_EQ(AttentionKvWidth(m, p), 2 * 32 * 128);
  int context_ops = 0;
  const StepProgram repeated = BuildStep(m, p);  // held: a range over a temporary's member dangles
  for (const Op& op : repeated.layer_programs[0].ops) {
    if (op.stream != Stream::kContext) continue;
    EXPECT_DOUBLE_EQ(op.comm_bytes, 4 * 4 * block);
    ++context_ops;
  }
  EXPECT_EQ(context_ops, 3);  // the forward's gather, the backward's gather again, dK/dV's reduce-scatter
}

// What one device holds of other context ranks' K/V for the layer at work: the all-gather's
// c - 1 blocks, the ring's one in flight; repeat_kv widens them, saved K/V too (but not under
// selective-op, which keeps the projection's own output); a model without GQA has nothing to repeat.
TEST(StepProgramTest, ContextKvAndRepeatedKvMemory) {
  const ModelSpec m = FindModelPreset("llama3-8b")->spec;  // 32 heads, 8 K/V heads of 128
  PlanSpec p = Plan(1, 1, 1, 1, 32768);
  EXPECT_DOUBLE_EQ(ContextKvBytes(m, p, 8192), 0);
  p.mesh.context = 4;
  const double block = 8192.0 * (2 * 8 * 128) * 2;
  EXPECT_DOUBLE_EQ(ContextKvBytes(m, p, 8192), block);
  p.context_kv = "all-gather";
  EXPECT_DOUBLE_EQ(ContextKvBytes(m, p, 8192), 3 * block);
  const double k = TensorBytesPerToken(LayerTensor::kK, m, p, false);
  p.repeat_kv = true;
  EXPECT_DOUBLE_EQ(ContextKvBytes(m, p, 8192), 4 * 3 * block);
  EXPECT_DOUBLE_EQ(TensorBytesPerToken(LayerTensor::kK, m, p, false), 4 * k);
  p.recompute = Recompute::kSelectiveOp;
  EXPECT_DOUBLE_EQ(TensorBytesPerToken(LayerTensor::kK, m, p, false), k);
  ModelSpec mha = m;
  mha.num_kv_heads = mha.num_heads;
  EXPECT_FALSE(RepeatsKv(mha, p));
  // The memory model holds it once per stage that runs attention: not on a stage of the
  // embedding alone.
  PlanSpec staged = Plan(1, 1, 3, 4, 32768);
  staged.mesh.context = 4, staged.context_kv = "all-gather", staged.pipeline_layout = "E|t*16|t*16L";
  const double gathered = ContextKvBytes(m, staged, 8192);
  const MemoryReport with = EstimateMemory(BuildStep(m, staged));
  staged.mesh.context = 1, staged.seq_len = 8192;  // the same tokens per device, nothing gathered
  const MemoryReport without = EstimateMemory(BuildStep(m, staged));
  EXPECT_DOUBLE_EQ(with.stages[0].activations, without.stages[0].activations);
  EXPECT_NEAR(with.stages[1].activations - without.stages[1].activations, gathered, 1);
}

TEST(StepProgramTest, RecomputationRepeatsForwardWork) {
  const ModelSpec m = GptModel(4, 1024, 16);
  PlanSpec p = Plan(1, 1, 1, 4, 2048);
  const double forward = PhaseFlops(BuildStep(m, p).layer_programs[0], Phase::kForward);
  p.recompute = Recompute::kFull;
  EXPECT_DOUBLE_EQ(PhaseFlops(BuildStep(m, p).layer_programs[0], Phase::kRecompute), forward);
  p.recompute = Recompute::kSelective;
  const double selective = PhaseFlops(BuildStep(m, p).layer_programs[0], Phase::kRecompute);
  EXPECT_GT(selective, 0);
  EXPECT_LT(selective, forward / 4);
}

TEST(StepProgramTest, SchedulesValidateAndDumpsAreDeterministic) {
  const ModelSpec m = FindModelPreset("llama3-8b")->spec;
  for (std::string s : {"gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zbv", "dualpipe"}) {
    PlanSpec p = Plan(2, 2, 4, 64, 2048);
    p.pipeline_schedule = s;
    p.virtual_stages = s == "interleaved-1f1b" ? 2 : 1;
    const StepProgram program = BuildStep(m, p);
    EXPECT_EQ(ValidateSchedule(program), "") << s;
    EXPECT_EQ(DumpProgram(program), DumpProgram(BuildStep(m, p))) << s;
  }
}

// DualPipe holds two model copies per stage (DeepSeek-V3 Table 2: parameters 2x) and feeds half
// the micro-batches from each end.
TEST(StepProgramTest, DualPipeRunsBothDirections) {
  const ModelSpec m = FindModelPreset("llama3-8b")->spec;
  PlanSpec p = Plan(2, 2, 4, 32, 2048);
  const double one_f_one_b = BuildStep(m, p).stages[1].params();
  p.pipeline_schedule = "dualpipe";
  const StepProgram dual = BuildStep(m, p);
  EXPECT_NEAR(dual.stages[1].params() / one_f_one_b, 2.0, 1e-9);
  EXPECT_EQ(dual.layout.paths.size(), 2u);
  EXPECT_EQ(dual.layout.paths[1].front(), (std::pair<int64_t, int64_t>{3, 1}));  // flowing up starts at the last stage
  int down = 0, up = 0;
  for (const Task& t : StageTasks(dual, 0)) {
    if (t.phase != Phase::kForward) continue;
    (t.chunk == 0 ? down : up) += 1;
    EXPECT_EQ(DirectionOf(dual, t.microbatch, dual.microbatches), t.chunk);
  }
  EXPECT_EQ(down, 8);
  EXPECT_EQ(up, 8);
  // The directions' counts, summed without a visit per micro-batch, are the visits' (whole
  // schedules and part of one, in rounds).
  for (int64_t rounds : {1, 2, 4}) {
    PlanSpec r = p;
    r.pipeline_rounds = rounds;
    const StepProgram program = BuildStep(m, r);
    for (int64_t count : {int64_t{1}, int64_t{3}, program.microbatches / 2 + 1, program.microbatches}) {
      std::vector<int64_t> visited(2, 0);
      for (int64_t mb = 0; mb < count; ++mb) ++visited[static_cast<size_t>(DirectionOf(program, mb, count))];
      EXPECT_EQ(MicrobatchesPerDirection(program, count), visited) << rounds << " rounds, " << count << " micro-batches";
    }
  }
}

std::vector<const Op*> StepCollectives(const StepProgram& program, size_t stage) {
  std::vector<const Op*> ops;
  for (const Op& op : program.stages[stage].step_ops) {
    if (op.is_comm()) ops.push_back(&op);
  }
  return ops;
}

// Context ranks see other tokens of the same sequences: their gradients are reduced too.
TEST(DataParallelTest, ContextRanksReduceGradients) {
  PlanSpec p = Plan(1, 2, 1, 4, 8192);
  p.mesh.context = 4;
  p.zero_stage = 1;
  const StepProgram program = BuildStep(FindModelPreset("llama3-8b")->spec, p);
  const auto ops = StepCollectives(program, 0);
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0]->collective, CollectiveOp::kReduceScatter);
  EXPECT_EQ(ops[0]->axes, (std::vector<std::string>{"context"}));
}

// ZeRO-3 without fsdp gathers every layer's parameters over the data axis, and reduce-scatters
// its gradients, instead of the step's all-reduce.
TEST(DataParallelTest, ZeroThreeGathersPerLayer) {
  PlanSpec p = Plan(8, 1, 1, 8, 2048);
  p.zero_stage = 3;
  const StepProgram program = BuildStep(FindModelPreset("llama3-8b")->spec, p);
  EXPECT_TRUE(StepCollectives(program, 0).empty());
  int gathers = 0, scatters = 0;
  for (const Op& op : program.layer_programs[0].ops) {
    if (op.stream != Stream::kData) continue;
    EXPECT_EQ(op.axes, (std::vector<std::string>{"data"}));
    (op.collective == CollectiveOp::kAllGather ? gathers : scatters) += 1;
  }
  EXPECT_EQ(gathers, 2);
  EXPECT_EQ(scatters, 1);
}

// ZeRO-2 shards the gradients over the replicas, so each micro-batch's backward reduce-scatters
// them per layer; the step keeps only the all-gather of the updated parameters.
TEST(DataParallelTest, ZeroTwoReduceScattersEveryMicroBatch) {
  PlanSpec p = Plan(8, 1, 1, 32, 2048);
  p.zero_stage = 2;
  const StepProgram program = BuildStep(FindModelPreset("llama3-8b")->spec, p);
  EXPECT_EQ(program.microbatches, 4);
  const auto ops = StepCollectives(program, 0);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0]->collective, CollectiveOp::kAllGather);
  int gathers = 0, scatters = 0;
  for (const Op& op : program.layer_programs[0].ops) {
    if (op.stream != Stream::kData) continue;
    EXPECT_EQ(op.axes, (std::vector<std::string>{"data"}));
    EXPECT_EQ(op.phase, Phase::kBackwardWeight);
    (op.collective == CollectiveOp::kAllGather ? gathers : scatters) += 1;
  }
  EXPECT_EQ(gathers, 0);
  EXPECT_EQ(scatters, 1);
  const ShardDegrees d = Sharding(p, ParamKind::kDense);
  EXPECT_EQ(d.params, 1);
  EXPECT_EQ(d.grads, 8);
  EXPECT_EQ(d.optimizer, 8);
}

// Llama 3 405B on 16 stages: 126 layers, one fewer on the first and the last stage.
TEST(StepProgramTest, UnevenStagesHoldOneLayerLessAtTheEnds) {
  const StepProgram program = BuildStep(FindModelPreset("llama3-405b")->spec, Plan(128, 8, 16, 2048, 8192));
  ASSERT_EQ(program.stages.size(), 16u);
  int64_t total = 0;
  for (size_t s = 0; s < program.stages.size(); ++s) {
    int64_t layers = 0;
    for (const auto& [kind, count, sixteen_bit] : program.stages[s].chunks[0].layers) layers += kind == LayerKind::kDense ? count : 0;
    EXPECT_EQ(layers, s == 0 || s == 15 ? 7 : 8) << "stage " << s;
    total += layers;
  }
  EXPECT_EQ(total, 126);
}

// Hybrid sharding: fsdp shards everything 8 ways; the 2 data replicas all-reduce their shards.
TEST(DataParallelTest, HybridShardingReducesShardsOverReplicas) {
  PlanSpec p = Plan(2, 1, 1, 16, 2048);
  p.mesh.fsdp = 8;
  const StepProgram program = BuildStep(FindModelPreset("llama3-8b")->spec, p);
  const auto ops = StepCollectives(program, 0);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0]->collective, CollectiveOp::kAllReduce);
  EXPECT_NEAR(ops[0]->comm_bytes, program.stages[0].params() / 8 * 2, 1.0);
}

TEST(DataParallelTest, TiedEmbeddingsCountOnce) {
  const ModelSpec m = GptModel(4, 1024, 16);  // tied
  const StepProgram one_stage = BuildStep(m, Plan(1, 1, 1, 4, 2048));
  // Everything but the biases (which the step program does not carry as matmul weights).
  EXPECT_NEAR(one_stage.stages[0].params() / static_cast<double>(CountParams(m).total), 1.0, 1e-3);
  const StepProgram two_stages = BuildStep(m, Plan(1, 1, 2, 4, 2048));
  EXPECT_EQ(two_stages.stages[1].step_ops.front().name, "tied_embedding_grad_sync");
}

TEST(StepProgramTest, LayersStayFewWhateverTheDepth) {
  const StepProgram program = BuildStep(FindModelPreset("llama3-405b")->spec, Plan(1024, 8, 2, 2048, 8192));
  // dense, moe (empty), embedding, head, the local kinds, mtp and the hybrid blocks (empty), and
  // the decoder kinds' 16-bit twins (empty: the plan keeps no layer at 16 bits)
  EXPECT_EQ(program.layer_programs.size(), 22u);
  for (size_t k = kLayerKinds; k < program.layer_programs.size(); ++k) EXPECT_TRUE(program.layer_programs[k].ops.empty());
  int64_t layers = 0;
  for (const Stage& stage : program.stages) {
    for (const auto& [kind, count, sixteen_bit] : stage.chunks[0].layers) layers += kind == LayerKind::kDense ? count : 0;
  }
  EXPECT_EQ(layers, 126);
}

// A model with local layers runs them as their own kinds, in the model's pattern, each stage
// holding what its layers are; their attention reads the window's keys, the rest is the same.
TEST(StepProgramTest, LocalLayersAreTheirOwnKind) {
  ModelSpec m = FindModelPreset("llama3-8b")->spec;
  m.sliding_window = SlidingWindowSpec{.window = 1024, .global_every = 4};  // layers 3, 7, ... global
  const StepProgram program = BuildStep(m, Plan(1, 1, 4, 8, 8192));
  ASSERT_FALSE(program.Layer(LayerKind::kDenseLocal).ops.empty());
  EXPECT_TRUE(program.Layer(LayerKind::kMoeLocal).ops.empty());
  for (const Stage& stage : program.stages) {
    std::vector<std::pair<LayerKind, int64_t>> layers;
    for (const LayerRun& run : stage.chunks[0].layers) {
      if (IsTransformerLayer(run.kind)) layers.push_back({run.kind, run.count});
    }
    // Eight layers per stage: three local, one global, twice.
    const std::vector<std::pair<LayerKind, int64_t>> expected = {
        {LayerKind::kDenseLocal, 3}, {LayerKind::kDense, 1}, {LayerKind::kDenseLocal, 3}, {LayerKind::kDense, 1}};
    EXPECT_EQ(layers, expected);
  }
  auto attention_flops = [](const LayerProgram& layer) {
    for (const Op& op : layer.ops) {
      if (op.kind == ComputeKind::kAttention && op.phase == Phase::kForward) return op.flops;
    }
    return 0.0;
  };
  const double global = attention_flops(program.Layer(LayerKind::kDense)), local = attention_flops(program.Layer(LayerKind::kDenseLocal));
  EXPECT_NEAR(local / global, (1024 - 1024.0 * 1024 / (2 * 8192)) / 4096, 1e-12);
  EXPECT_EQ(program.Layer(LayerKind::kDense).ops.size(), program.Layer(LayerKind::kDenseLocal).ops.size());
}

// The planner builds plans that differ only in schedule through one LayerCache (layer programs
// and step ops shared); each program must equal the one built without it, whatever came before.
TEST(StepProgramTest, LayerCacheBuildsWhatBuildStepBuildsAlone) {
  for (const char* name : {"llama3-8b", "mixtral-8x7b", "deepseek-v3", "gpt-oss-20b", "deepseek-v3+mtp2"}) {
    ModelSpec m = FindModelPreset(std::string(name).substr(0, std::string(name).find('+')))->spec;
    if (std::string(name).ends_with("+mtp2")) m.mtp_layers = 2;
    LayerCache cache;
    TaskLists lists;
    for (int64_t zero : {0, 1}) {
      for (Recompute recompute : {Recompute::kNone, Recompute::kFull}) {
        for (const auto& [schedule, v] : {std::pair<std::string, int64_t>{"1f1b", 1}, {"interleaved-1f1b", 2}, {"zb-h1", 1}, {"zbv", 2}, {"dualpipe", 1}, {"gpipe", 1}}) {
          PlanSpec p = Plan(2, 2, 4, 32, 4096);
          p.zero_stage = zero, p.recompute = recompute, p.pipeline_schedule = schedule, p.virtual_stages = v;
          p.micro_batch_size = 1;
          if (m.num_layers % 8 != 0 && schedule == "interleaved-1f1b") continue;
          const std::string alone = DumpProgram(BuildStep(m, p));
          StepProgram shared = BuildStep(m, p, &lists, &cache);
          EXPECT_EQ(DumpProgram(shared), alone) << name << " " << schedule << " zero " << zero;
          cache.Recycle(std::move(shared));
        }
      }
    }
  }
}

}  // namespace
}  // namespace shardsim::strategies
