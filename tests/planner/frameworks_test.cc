// FrameworkGaps names what a framework cannot run of a plan, from the one table of framework
// facts; the plan JSON carries the framework.
#include "planner/frameworks.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model_presets.h"
#include "core/plan_json.h"
#include "planner/framework_facts.h"

namespace shardsim::planner {
namespace {

const ModelSpec& Llama() {
  static const ModelSpec kModel = FindModelPreset("llama3-70b")->spec;
  return kModel;
}

PlanSpec Plan(std::initializer_list<std::pair<const char*, int64_t>> axes) {
  PlanSpec p;
  for (const auto& [axis, size] : axes) p.mesh.Size(axis) = size;
  p.global_batch_size = 512;
  p.seq_len = 8192;
  return p;
}

// Whether the field a gap is about is "" (the model's) or a key --set takes ("/mesh/tensor" is
// mesh.tensor).
bool IsPlanField(const std::string& field) { return field.empty() || !OverrideKeyOf(field).empty(); }

// Whether one of the gaps contains `words`; every gap the tests meet must name a plan field.
::testing::AssertionResult Names(Framework f, const PlanSpec& plan, const std::string& words,
                                 const ModelSpec& model = Llama()) {
  const std::vector<FrameworkGap> gaps = FrameworkGapsByField(f, model, plan);
  for (const FrameworkGap& gap : gaps) {
    if (!IsPlanField(gap.field)) return ::testing::AssertionFailure() << "'" << gap.field << "' is no plan field: " << gap.text;
  }
  for (const FrameworkGap& gap : gaps) {
    if (gap.text.find(words) != std::string::npos) return ::testing::AssertionSuccess();
  }
  std::string all;
  for (const FrameworkGap& gap : gaps) all += "\n  " + gap.field + ": " + gap.text;
  return ::testing::AssertionFailure()
         << FrameworkName(f) << " gaps lack '" << words << "':" << all;
}

// Where a gap points: the field a user would change to remove it, not one no value of which does.
TEST(FrameworksTest, GapsPointAtTheFieldToChange) {
  auto field_of = [](Framework f, const PlanSpec& plan, const std::string& words) {
    for (const FrameworkGap& gap : FrameworkGapsByField(f, Llama(), plan)) {
      if (gap.text.find(words) != std::string::npos) return gap.field;
    }
    return std::string("(no gap naming '") + words + "')";
  };
  PlanSpec fp8 = Plan({{"fsdp", 64}});
  fp8.dtype = "fp8", fp8.fp8_recipe = "blockwise";
  EXPECT_EQ(field_of(Framework::kTorchtitan, fp8, "fp8 scaling"), "/fp8_recipe");
  // 80 layers on 3 stages: uneven, which the stages' count changes (no layout evens it for MaxText).
  PlanSpec uneven = Plan({{"fsdp", 8}, {"pipeline", 3}});
  uneven.global_batch_size = 24, uneven.pipeline_schedule = "gpipe";
  EXPECT_EQ(field_of(Framework::kMaxText, uneven, "splits the decoder layers evenly"), "/mesh/pipeline");
  // DeepSpeed splits sequences only by Ulysses: no context_kv value runs, the context axis is it.
  PlanSpec context = Plan({{"data", 8}, {"context", 8}});
  context.context_kv = "ring";
  EXPECT_EQ(field_of(Framework::kDeepSpeed, context, "context parallelism by ring"), "/mesh/context");
  EXPECT_EQ(field_of(Framework::kMegatronCore, Plan({{"data", 8}, {"pipeline", 8}}), "overlap.pipeline on"), "/overlap/pipeline");
  // K/V repeated to every query head: torchtitan's attention takes grouped heads (since 2026-01);
  // DeepSpeed runs the model code's, whichever it does.
  PlanSpec repeated = Plan({{"fsdp", 8}});
  repeated.repeat_kv = true;
  EXPECT_EQ(field_of(Framework::kTorchtitan, repeated, "K/V repeated"), "/repeat_kv");
  PlanSpec repeated_data = Plan({{"data", 8}});
  repeated_data.repeat_kv = true;
  EXPECT_TRUE(FrameworkGaps(Framework::kDeepSpeed, Llama(), AsFrameworkRuns(Framework::kDeepSpeed, Llama(), repeated_data)).empty());
}

TEST(FrameworksTest, Names) {
  EXPECT_EQ(FrameworkNames(),
            (std::vector<std::string>{"megatron-core", "torchtitan", "maxtext", "deepspeed"}));
  for (const std::string& name : FrameworkNames())
    EXPECT_EQ(FrameworkName(ParseFramework(name, "--framework")), name);
  EXPECT_EQ(ParseFramework("megatron", "--framework"), Framework::kMegatronCore);
  try {
    ParseFramework("torchtitn", "--framework");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "--framework");
    EXPECT_NE(e.problem().find("did you mean 'torchtitan'"), std::string::npos) << e.problem();
    EXPECT_NE(e.valid().find("megatron-core, torchtitan, maxtext, deepspeed"), std::string::npos)
        << e.valid();
  }
}

// Gradient reductions as each framework runs them: DeepSpeed's pipeline engine reduces after the
// pipeline drains (never overlapped there, a switch without a pipeline); the reduction dtype is
// each framework's default where the plan sets none, and kept where the framework has a switch.
TEST(FrameworksTest, WhenAndInWhatGradientsAreReduced) {
  PlanSpec p;
  p.mesh.data = 8;
  p.overlap.data = true;
  EXPECT_TRUE(AsFrameworkRuns(Framework::kDeepSpeed, Llama(), p).overlap.data);
  p.mesh.pipeline = 8;
  EXPECT_FALSE(AsFrameworkRuns(Framework::kDeepSpeed, Llama(), p).overlap.data);
  EXPECT_TRUE(AsFrameworkRuns(Framework::kMegatronCore, Llama(), p).overlap.data);
  EXPECT_EQ(AsFrameworkRuns(Framework::kMegatronCore, Llama(), p).grad_reduce_dtype, "fp32");  // DDP under bf16
  EXPECT_EQ(AsFrameworkRuns(Framework::kTorchtitan, Llama(), p).grad_reduce_dtype, "fp32");
  EXPECT_EQ(AsFrameworkRuns(Framework::kDeepSpeed, Llama(), p).grad_reduce_dtype, "bf16");
  EXPECT_EQ(AsFrameworkRuns(Framework::kMaxText, Llama(), p).grad_reduce_dtype, "bf16");
  EXPECT_DOUBLE_EQ(GradReduceBytes(AsFrameworkRuns(Framework::kMegatronCore, Llama(), p)), 4);
  EXPECT_DOUBLE_EQ(GradReduceBytes(AsFrameworkRuns(Framework::kDeepSpeed, Llama(), p)), 2);
  PlanSpec fsdp = p;
  fsdp.mesh.data = 1, fsdp.mesh.fsdp = 8;
  EXPECT_EQ(AsFrameworkRuns(Framework::kMegatronCore, Llama(), fsdp).grad_reduce_dtype, "bf16");  // Megatron-FSDP: the parameters'
  PlanSpec half = p;
  half.dtype = "fp16";
  EXPECT_EQ(AsFrameworkRuns(Framework::kMegatronCore, Llama(), half).grad_reduce_dtype, "fp16");
  // A set value stays; the gaps say where the framework cannot run it.
  const ModelSpec model = FindModelPreset("llama3-8b")->spec;
  p.grad_reduce_dtype = "bf16";
  EXPECT_EQ(AsFrameworkRuns(Framework::kMegatronCore, Llama(), p).grad_reduce_dtype, "bf16");  // --grad-reduce-in-bf16
  EXPECT_EQ(AsFrameworkRuns(Framework::kTorchtitan, Llama(), p).grad_reduce_dtype, "bf16");
  auto has_gap = [&](Framework f, const PlanSpec& plan) {
    for (const std::string& g : FrameworkGaps(f, model, plan)) {
      if (g.find("grad_reduce_dtype") != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_FALSE(has_gap(Framework::kMegatronCore, p));
  EXPECT_TRUE(has_gap(Framework::kTorchtitan, p));
  EXPECT_FALSE(has_gap(Framework::kMaxText, p));  // what MaxText does under bf16
  fsdp.grad_reduce_dtype = "fp32";
  EXPECT_TRUE(has_gap(Framework::kMegatronCore, fsdp));
  EXPECT_FALSE(has_gap(Framework::kDeepSpeed, fsdp));  // communication_data_type
  p.dtype = "fp32";
  p.grad_reduce_dtype.clear();
  EXPECT_DOUBLE_EQ(GradReduceBytes(p), 4);  // fp32 gradients move at their width
  EXPECT_DOUBLE_EQ(ParamGatherBytes(p), 4);
}

// DeepSpeed cuts uneven layers its own way (the first stages take the remainder): an unset layout
// is run as that, a set one must be it; MaxText refuses uneven stages.
TEST(FrameworksTest, StageLayouts) {
  PlanSpec p = Plan({{"data", 8}, {"pipeline", 6}});  // Llama 3 70B's 80 layers on 6 stages
  p.global_batch_size = 48, p.overlap.data = p.overlap.pipeline = false;
  const PlanSpec runs = AsFrameworkRuns(Framework::kDeepSpeed, Llama(), p);
  EXPECT_EQ(runs.pipeline_layout, "Et*14|t*14|(t*13|)*3t*13L");
  EXPECT_TRUE(FrameworkGaps(Framework::kDeepSpeed, Llama(), runs).empty()) << FrameworkGaps(Framework::kDeepSpeed, Llama(), runs).front();
  // shardsim's default puts the shorter stages at the ends: not what DeepSpeed runs.
  EXPECT_TRUE(Names(Framework::kDeepSpeed, p, "stage layout 13 x 2, 14 x 2, 13 x 2 (decoder layers per chunk): deepspeed splits them 14 x 2, 13 x 4"));
  PlanSpec written = p;
  written.pipeline_layout = "Et*14|t*14|t*13|t*13|t*13|t*13L";  // the same split, written out
  EXPECT_TRUE(FrameworkGaps(Framework::kDeepSpeed, Llama(), written).empty());
  // Even layers: DeepSpeed's split is the default one, and the plan keeps no layout.
  PlanSpec even = Plan({{"data", 8}, {"pipeline", 8}});
  EXPECT_EQ(AsFrameworkRuns(Framework::kDeepSpeed, Llama(), even).pipeline_layout, "");
  EXPECT_EQ(AsFrameworkRuns(Framework::kMegatronCore, Llama(), p).pipeline_layout, "");  // any layout: the plan's
  EXPECT_TRUE(Names(Framework::kMaxText, p, "splits the decoder layers evenly"));
}

// One switch for both reductions takes the value of the axis that communicates; a framework with
// one context K/V exchange runs that one.
TEST(FrameworksTest, OneSwitchAndOneExchange) {
  PlanSpec fsdp = Plan({{"fsdp", 8}});
  fsdp.overlap.fsdp = false;  // data (on by default) does not communicate here
  EXPECT_FALSE(AsFrameworkRuns(Framework::kMegatronCore, Llama(), fsdp).overlap.fsdp);
  EXPECT_FALSE(AsFrameworkRuns(Framework::kDeepSpeed, Llama(), fsdp).overlap.fsdp);
  PlanSpec data = Plan({{"data", 8}});
  data.overlap.data = false;
  EXPECT_FALSE(AsFrameworkRuns(Framework::kDeepSpeed, Llama(), data).overlap.fsdp);
  PlanSpec context = Plan({{"fsdp", 2}, {"context", 4}});
  context.zero_stage = 3;
  EXPECT_EQ(AsFrameworkRuns(Framework::kTorchtitan, Llama(), context).context_kv, "all-gather");
  EXPECT_EQ(AsFrameworkRuns(Framework::kMegatronCore, Llama(), context).context_kv, "ring");  // both: the plan's
}

// zb-h1 with one stage per rank: PyTorch's InterleavedZeroBubble needs several (the old export's
// defect); no framework runs it, nor DualPipe.
TEST(FrameworksTest, ZeroBubbleOnOneStagePerRank) {
  PlanSpec p = Plan({{"fsdp", 8}, {"pipeline", 8}});
  p.pipeline_schedule = "zb-h1";
  for (Framework f : {Framework::kMegatronCore, Framework::kTorchtitan, Framework::kMaxText,
                      Framework::kDeepSpeed}) {
    EXPECT_TRUE(Names(f, p, "pipeline schedule zb-h1"));
  }
  p.pipeline_schedule = "dualpipe";
  EXPECT_TRUE(Names(Framework::kTorchtitan, p, "pipeline schedule dualpipe"));
  p.pipeline_schedule = "zbv";
  EXPECT_TRUE(FrameworkGaps(Framework::kTorchtitan, Llama(), p).empty());
  EXPECT_TRUE(Names(Framework::kMegatronCore, p, "pipeline schedule zbv"));
}

// Gradient accumulation under pipeline parallelism: torchtitan and MaxText run a schedule per
// accumulation step, reducing gradients after each (shardsim reduces once, after the last);
// Megatron-core and DeepSpeed run one schedule over every micro-batch of a step.
TEST(FrameworksTest, PipelineRounds) {
  PlanSpec p = Plan({{"fsdp", 8}, {"pipeline", 8}});
  p.pipeline_schedule = "gpipe", p.pipeline_rounds = 2;
  for (Framework f : {Framework::kMegatronCore, Framework::kDeepSpeed}) EXPECT_TRUE(Names(f, p, "runs every micro-batch of a step in one schedule"));
  for (Framework f : {Framework::kTorchtitan, Framework::kMaxText}) EXPECT_TRUE(Names(f, p, "reduces them after each schedule"));
  // Without data parallelism nothing is reduced: rounds run as modelled.
  PlanSpec alone = Plan({{"tensor", 8}, {"pipeline", 8}});
  alone.global_batch_size = 64, alone.pipeline_schedule = "gpipe", alone.pipeline_rounds = 2;
  for (Framework f : {Framework::kTorchtitan, Framework::kMaxText}) {
    for (const FrameworkGap& gap : FrameworkGapsByField(f, Llama(), alone)) EXPECT_NE(gap.field, "/pipeline_rounds") << gap.text;
  }
  EXPECT_TRUE(Names(Framework::kMegatronCore, alone, "runs every micro-batch of a step in one schedule"));
  // MaxText's num_pipeline_microbatches is a round's: 64 micro-batches in 16 rounds of 4 on 8 stages.
  p.pipeline_rounds = 16;
  EXPECT_TRUE(Names(Framework::kMaxText, p, "4 micro-batches on 8 stages"));
}

TEST(FrameworksTest, ShardingWithPipelines) {
  PlanSpec p = AsFrameworkRuns(Framework::kDeepSpeed, Llama(), Plan({{"fsdp", 8}, {"pipeline", 8}}));
  EXPECT_TRUE(Names(Framework::kDeepSpeed, p, "fsdp with pipeline parallelism"));
  p = Plan({{"data", 8}, {"pipeline", 8}});
  p.zero_stage = 2;
  EXPECT_TRUE(Names(Framework::kDeepSpeed, p,
                    "ZeRO-2 with pipeline parallelism: deepspeed runs ZeRO up to 1"));
  // Megatron-FSDP frees gathered parameters after each forward; torchtitan keeps them by default
  // under a pipeline, as the plan does.
  p = Plan({{"fsdp", 8}, {"pipeline", 8}});
  EXPECT_TRUE(Names(Framework::kMegatronCore, p, "kept gathered"));
  EXPECT_TRUE(FrameworkGaps(Framework::kTorchtitan, Llama(), p).empty());
  EXPECT_TRUE(
      FrameworkGaps(Framework::kMegatronCore, Llama(), AsFrameworkRuns(Framework::kMegatronCore, Llama(), p))
          .empty());
}

TEST(FrameworksTest, ShardingFamilies) {
  // Megatron-FSDP's outer replicas shard nothing or the optimizer; MiCS only shards inside groups.
  PlanSpec hsdp = Plan({{"data", 2}, {"fsdp", 4}, {"tensor", 8}});
  hsdp.sequence_parallel = true;
  hsdp.zero_stage = 2;
  EXPECT_TRUE(Names(Framework::kMegatronCore, hsdp, "ZeRO-2 over data with fsdp"));
  hsdp.zero_stage = 1;
  EXPECT_TRUE(FrameworkGaps(Framework::kMegatronCore, Llama(), hsdp).empty());
  EXPECT_TRUE(Names(Framework::kDeepSpeed, hsdp, "MiCS"));
  EXPECT_TRUE(Names(Framework::kTorchtitan, hsdp, "ZeRO-1 over data"));
  EXPECT_TRUE(
      FrameworkGaps(Framework::kMaxText, Llama(), AsFrameworkRuns(Framework::kMaxText, Llama(), hsdp))
          .empty());
  // torchtitan and MaxText shard over the context ranks whatever the ZeRO stage.
  PlanSpec context = Plan({{"fsdp", 4}, {"context", 2}, {"tensor", 8}});
  context.context_kv = "all-gather";
  EXPECT_TRUE(Names(Framework::kTorchtitan, context, "only ZeRO-3 with data=1"));
  context.zero_stage = 3;
  EXPECT_TRUE(FrameworkGaps(Framework::kTorchtitan, Llama(), context).empty());
  // ZeRO-3 over data is fsdp by another name: frameworks without ZeRO over data run it.
  PlanSpec zero3 = Plan({{"data", 8}, {"tensor", 8}});
  zero3.zero_stage = 3;
  EXPECT_TRUE(FrameworkGaps(Framework::kTorchtitan, Llama(), zero3).empty());
  EXPECT_EQ(CanonicalSharding(zero3).mesh.fsdp, 8);
  EXPECT_EQ(CanonicalSharding(zero3).zero_stage, 0);
}

TEST(FrameworksTest, TensorContextExpert) {
  PlanSpec tp = Plan({{"data", 8}, {"tensor", 8}});
  EXPECT_TRUE(Names(Framework::kMaxText, tp, "without sequence parallelism"));
  tp.sequence_parallel = true;
  EXPECT_TRUE(Names(Framework::kDeepSpeed, tp, "with sequence parallelism"));
  PlanSpec ring = Plan({{"fsdp", 4}, {"context", 2}, {"tensor", 8}});
  ring.zero_stage = 3, ring.sequence_parallel = true;
  EXPECT_TRUE(Names(Framework::kTorchtitan, ring, "context parallelism by ring"));
  EXPECT_TRUE(Names(Framework::kDeepSpeed, ring, "Ulysses"));
  EXPECT_TRUE(FrameworkGaps(Framework::kMegatronCore, Llama(), ring).empty());
  const ModelSpec mixtral = FindModelPreset("mixtral-8x7b")->spec;
  PlanSpec moe = Plan({{"expert", 8}, {"tensor", 8}});
  moe.zero_stage = 3;
  EXPECT_TRUE(Names(Framework::kTorchtitan, moe, "experts split over tensor", mixtral));
  EXPECT_TRUE(FrameworkGaps(Framework::kMegatronCore, mixtral, moe).empty());
  // FP8 expert dispatch: Megatron-core's under MXFP8 only (moe_dispatch_fwd_dtype), torchtitan's never.
  moe.dtype = "fp8", moe.ep_dispatch_dtype = "fp8", moe.fp8_recipe = "mxfp8";
  EXPECT_TRUE(FrameworkGaps(Framework::kMegatronCore, mixtral, moe).empty());
  EXPECT_TRUE(Names(Framework::kTorchtitan, moe, "moves the expert all-to-alls at the activations' width", mixtral));
  moe.fp8_recipe = "blockwise";
  EXPECT_TRUE(Names(Framework::kMegatronCore, moe, "fp8 expert dispatch under blockwise scaling", mixtral));
  // DeepEP's deduplicating dispatcher: Megatron-core's flex dispatcher and torchtitan's deepep
  // backend, not MaxText's or DeepSpeed's all-to-alls; Megatron quantises the dispatch on ncclep only.
  PlanSpec deepep = Plan({{"expert", 8}, {"fsdp", 8}});
  deepep.zero_stage = 3, deepep.ep_dispatcher = "deepep";
  EXPECT_TRUE(FrameworkGaps(Framework::kMegatronCore, mixtral, deepep).empty());
  EXPECT_TRUE(FrameworkGaps(Framework::kTorchtitan, mixtral, deepep).empty());
  EXPECT_TRUE(Names(Framework::kMaxText, deepep, "deduplicated expert dispatch (ep_dispatcher deepep)", mixtral));
  EXPECT_TRUE(Names(Framework::kDeepSpeed, deepep, "send every routed copy", mixtral));
  deepep.dtype = "fp8", deepep.fp8_recipe = "mxfp8", deepep.ep_dispatch_dtype = "fp8";
  EXPECT_TRUE(Names(Framework::kMegatronCore, deepep, "fp8 expert dispatch with ep_dispatcher deepep", mixtral));
  // Round-robin routing: torchtitan's debug.moe_force_load_balance; Megatron-core's
  // --moe-router-force-load-balancing draws random scores instead (uniform routing).
  PlanSpec round_robin = Plan({{"expert", 8}, {"fsdp", 8}});
  round_robin.zero_stage = 3, round_robin.expert_routing = "round-robin";
  EXPECT_TRUE(FrameworkGaps(Framework::kTorchtitan, mixtral, round_robin).empty());
  EXPECT_TRUE(Names(Framework::kMegatronCore, round_robin, "round-robin expert routing (expert_routing)", mixtral));
  EXPECT_TRUE(Names(Framework::kMaxText, round_robin, "follow their scores", mixtral));
  // FP8 products' saved inputs: Transformer Engine keeps them in FP8, torchao and flax in 16 bits;
  // an fp8 plan that sets none gets its framework's.
  PlanSpec saved = Plan({{"fsdp", 8}});
  saved.zero_stage = 3, saved.dtype = "fp8";
  EXPECT_EQ(AsFrameworkRuns(Framework::kMegatronCore, Llama(), saved).saved_input_dtype, "fp8");
  EXPECT_EQ(AsFrameworkRuns(Framework::kTorchtitan, Llama(), saved).saved_input_dtype, "bf16");
  EXPECT_EQ(AsFrameworkRuns(Framework::kMaxText, Llama(), saved).saved_input_dtype, "bf16");
  saved.saved_input_dtype = "bf16";
  EXPECT_TRUE(Names(Framework::kMegatronCore, saved, "saved_input_dtype bf16: megatron-core keeps its FP8 products' inputs for the backward in FP8"));
  saved.saved_input_dtype = "fp8", saved.fp8_recipe = "rowwise";
  EXPECT_TRUE(Names(Framework::kTorchtitan, saved, "saved_input_dtype fp8: torchtitan keeps its FP8 products' inputs for the backward in 16 bits"));
  // FP8 weight casts: Transformer Engine under Megatron-core caches them for the step, torchao
  // casts in every pass; MaxText's profile makes no claim.
  EXPECT_EQ(AsFrameworkRuns(Framework::kMegatronCore, Llama(), saved).fp8_weight_casts, "per-step");
  EXPECT_EQ(AsFrameworkRuns(Framework::kTorchtitan, Llama(), saved).fp8_weight_casts, "per-microbatch");
  EXPECT_EQ(AsFrameworkRuns(Framework::kMaxText, Llama(), saved).fp8_weight_casts, "");
  PlanSpec casts = saved;
  casts.fp8_weight_casts = "per-step";
  EXPECT_TRUE(Names(Framework::kTorchtitan, casts, "fp8_weight_casts per-step: torchtitan casts its FP8 products' weights in every forward and backward"));
  casts.fp8_weight_casts = "per-microbatch", casts.fp8_recipe = "tensorwise";
  EXPECT_TRUE(Names(Framework::kMegatronCore, casts, "fp8_weight_casts per-microbatch: megatron-core casts its FP8 products' weights once a step"));
  // Sequence-parallel gathers of FP8 products' inputs: Transformer Engine's move FP8, the others 16
  // bits; an fp8 plan that sets none gets its framework's.
  PlanSpec gather = Plan({{"fsdp", 8}, {"tensor", 8}});
  gather.zero_stage = 3, gather.dtype = "fp8", gather.sequence_parallel = true;
  EXPECT_EQ(AsFrameworkRuns(Framework::kMegatronCore, Llama(), gather).tensor_gather_dtype, "fp8");
  EXPECT_EQ(AsFrameworkRuns(Framework::kTorchtitan, Llama(), gather).tensor_gather_dtype, "bf16");
  gather.tensor_gather_dtype = "fp8", gather.fp8_recipe = "rowwise";
  EXPECT_TRUE(Names(Framework::kTorchtitan, gather, "tensor_gather_dtype fp8: torchtitan gathers its FP8 products' inputs over tensor in 16 bits"));
  // Sequence-parallel inputs: Megatron-core gathers the shard again in the backward, torchtitan's
  // DTensor styles keep the gathered input; a plan that sets none gets its framework's.
  PlanSpec sp = Plan({{"fsdp", 8}, {"tensor", 8}});
  sp.zero_stage = 3, sp.sequence_parallel = true;
  EXPECT_EQ(AsFrameworkRuns(Framework::kMegatronCore, Llama(), sp).sequence_parallel_inputs, "regather");
  EXPECT_EQ(AsFrameworkRuns(Framework::kTorchtitan, Llama(), sp).sequence_parallel_inputs, "keep-gathered");
  sp.sequence_parallel_inputs = "keep-gathered";
  EXPECT_TRUE(Names(Framework::kMegatronCore, sp, "sequence_parallel_inputs keep-gathered: megatron-core's sequence-parallel regions keep the shard"));
  EXPECT_TRUE(FrameworkGaps(Framework::kTorchtitan, Llama(), sp).empty());
  // Pipeline buffers: Megatron-core's per transfer, torchtitan's (torch.distributed.pipelining)
  // per micro-batch; set only on pipelined plans, and the other value named as a gap.
  PlanSpec piped = Plan({{"fsdp", 8}, {"pipeline", 4}});
  piped.zero_stage = 3;
  EXPECT_EQ(AsFrameworkRuns(Framework::kMegatronCore, Llama(), piped).pipeline_buffers, "per-transfer");
  EXPECT_EQ(AsFrameworkRuns(Framework::kTorchtitan, Llama(), piped).pipeline_buffers, "per-microbatch");
  EXPECT_EQ(AsFrameworkRuns(Framework::kMaxText, Llama(), piped).pipeline_buffers, "");
  EXPECT_EQ(AsFrameworkRuns(Framework::kTorchtitan, Llama(), sp).pipeline_buffers, "");  // no pipeline
  piped.pipeline_buffers = "per-microbatch";
  EXPECT_TRUE(Names(Framework::kMegatronCore, piped, "pipeline_buffers per-microbatch: megatron-core's pipeline stages make each receive buffer per transfer"));
  EXPECT_TRUE(FrameworkGaps(Framework::kTorchtitan, Llama(), piped).empty());
  piped.pipeline_buffers = "keep-outputs";
  EXPECT_TRUE(Names(Framework::kTorchtitan, piped, "pipeline_buffers keep-outputs: torchtitan's pipeline stages keep a receive buffer per micro-batch"));
  // Weight gradients in 16 bits: torchtitan's rowwise_with_gw_hp recipe (rowwise, its default);
  // Megatron-core's --no-fp8-wgrad reaches no recipe of Transformer Engine 2; MaxText none. The
  // products then keep 16-bit inputs, whatever the framework keeps otherwise.
  PlanSpec gw = Plan({{"fsdp", 8}});
  gw.zero_stage = 3, gw.dtype = "fp8", gw.wgrad_dtype = "bf16";
  EXPECT_TRUE(FrameworkGaps(Framework::kTorchtitan, Llama(), gw).empty());  // unset recipe: its rowwise
  EXPECT_EQ(AsFrameworkRuns(Framework::kMegatronCore, Llama(), gw).saved_input_dtype, "bf16");
  EXPECT_TRUE(Names(Framework::kMegatronCore, gw, "wgrad_dtype bf16: megatron-core runs its weight-gradient products in FP8"));
  EXPECT_TRUE(Names(Framework::kMaxText, gw, "wgrad_dtype bf16: maxtext runs its weight-gradient products in FP8"));
  gw.fp8_recipe = "mxfp8";
  EXPECT_TRUE(Names(Framework::kTorchtitan, gw, "wgrad_dtype bf16: torchtitan keeps weight-gradient products 16-bit under fp8_recipe rowwise only"));
  // Routed experts: torchtitan's grouped-experts converters take no recipe, and none is NVFP4.
  gw.fp8_recipe = "rowwise";
  auto names = [&](const PlanSpec& plan, const std::string& words) {
    for (const std::string& g : FrameworkGaps(Framework::kTorchtitan, mixtral, plan)) {
      if (g.find(words) != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_TRUE(names(gw, "wgrad_dtype bf16 beside routed experts: torchtitan's grouped-experts converter"));
  gw.wgrad_dtype = "", gw.fp8_recipe = "nvfp4";
  EXPECT_TRUE(names(gw, "fp8_recipe nvfp4 beside routed experts: torchtitan has no NVFP4 grouped-experts converter"));
  gw.fp8_recipe = "mxfp8";
  EXPECT_FALSE(names(gw, "beside routed experts"));
  // Nor do they take DeepEP's dispatcher (swap_token_dispatcher).
  PlanSpec fp8_deepep = Plan({{"fsdp", 1}, {"expert", 8}});
  fp8_deepep.zero_stage = 3, fp8_deepep.dtype = "fp8", fp8_deepep.ep_dispatcher = "deepep";
  EXPECT_TRUE(names(fp8_deepep, "ep_dispatcher deepep beside FP8 routed experts"));
  fp8_deepep.dtype = "bf16";
  EXPECT_FALSE(names(fp8_deepep, "ep_dispatcher deepep beside FP8"));
  // Memory allocation: the PyTorch frameworks' caching allocator, XLA's static assignment for
  // MaxText; a plan that sets none gets its framework's, and the other value is a gap.
  for (const Framework f : {Framework::kMegatronCore, Framework::kTorchtitan, Framework::kDeepSpeed}) {
    EXPECT_EQ(AsFrameworkRuns(f, Llama(), sp).memory_allocator, "caching");
  }
  EXPECT_EQ(AsFrameworkRuns(Framework::kMaxText, Llama(), piped).memory_allocator, "static");
  PlanSpec allocated = sp;
  allocated.memory_allocator = "static";
  EXPECT_TRUE(Names(Framework::kTorchtitan, allocated, "memory_allocator static: torchtitan allocates through PyTorch's caching allocator"));
  allocated.memory_allocator = "caching";
  EXPECT_TRUE(Names(Framework::kMaxText, allocated, "memory_allocator caching: maxtext allocates its buffers by liveness at compile time (XLA)"));
  EXPECT_EQ(AsFrameworkRuns(Framework::kMaxText, Llama(), allocated).memory_allocator, "caching");  // a set one stays
  // Tensor overlap's scope: Megatron-core's userbuffers hide every region's collectives, torch's
  // micro-pipeline TP (torchtitan's async TP) only reductions of one product's output; set only
  // where tensor overlap is on, and the other value named as a gap.
  PlanSpec async_tp = sp;
  async_tp.overlap.tensor = true;
  EXPECT_EQ(AsFrameworkRuns(Framework::kMegatronCore, Llama(), async_tp).tensor_overlap_scope, "all");
  EXPECT_EQ(AsFrameworkRuns(Framework::kTorchtitan, Llama(), async_tp).tensor_overlap_scope, "single-product");
  EXPECT_EQ(AsFrameworkRuns(Framework::kMaxText, Llama(), async_tp).tensor_overlap_scope, "");
  EXPECT_EQ(AsFrameworkRuns(Framework::kTorchtitan, Llama(), sp).tensor_overlap_scope, "");  // no tensor overlap
  async_tp.tensor_overlap_scope = "single-product";
  EXPECT_TRUE(Names(Framework::kMegatronCore, async_tp, "tensor_overlap_scope single-product: megatron-core's tensor overlap hides every region's"));
  EXPECT_TRUE(FrameworkGaps(Framework::kTorchtitan, Llama(), async_tp).empty());
  async_tp.tensor_overlap_scope = "all";
  EXPECT_TRUE(Names(Framework::kTorchtitan, async_tp, "tensor_overlap_scope all: torchtitan's tensor overlap leaves reductions of summed products"));
  // How weights and Adam's state are held: Megatron-core's and DeepSpeed's optimizers keep an fp32
  // copy beside 16-bit weights, FSDP2's fp32 weights (torchtitan) and MaxText's are their own
  // master; a plan that sets none gets the framework's, fp32 plans stay fp32, another is a gap.
  EXPECT_EQ(AsFrameworkRuns(Framework::kMegatronCore, Llama(), sp).master_weights, "fp32-copy");
  EXPECT_EQ(AsFrameworkRuns(Framework::kDeepSpeed, Llama(), sp).master_weights, "fp32-copy");
  EXPECT_EQ(AsFrameworkRuns(Framework::kTorchtitan, Llama(), sp).master_weights, "fp32");
  EXPECT_EQ(AsFrameworkRuns(Framework::kMaxText, Llama(), sp).master_weights, "fp32");
  PlanSpec fp32 = sp;
  fp32.dtype = "fp32";
  EXPECT_EQ(AsFrameworkRuns(Framework::kMegatronCore, Llama(), fp32).master_weights, "");
  EXPECT_EQ(MasterWeightsOf(AsFrameworkRuns(Framework::kMegatronCore, Llama(), fp32)), "fp32");
  PlanSpec pure = sp;
  pure.master_weights = "bf16";
  EXPECT_EQ(AsFrameworkRuns(Framework::kTorchtitan, Llama(), pure).master_weights, "bf16");  // the plan's stays
  EXPECT_TRUE(Names(Framework::kTorchtitan, pure, "master_weights bf16: torchtitan holds fp32 weights, their own master"));
  pure.master_weights = "fp32-copy";
  EXPECT_FALSE(Names(Framework::kMegatronCore, pure, "master_weights"));
  EXPECT_TRUE(Names(Framework::kMaxText, pure, "master_weights fp32-copy: maxtext holds fp32 weights"));
  // Attention kernels: torchtitan runs FlexAttention (model_registry's attn_backend), the others
  // their fused kernels only; no profiled framework runs LLM Foundry's Triton kernel.
  PlanSpec flex = sp;
  flex.attention_kernel = "flex";
  EXPECT_FALSE(Names(Framework::kTorchtitan, flex, "attention_kernel"));
  EXPECT_TRUE(Names(Framework::kMegatronCore, flex, "attention_kernel flex: megatron-core runs its fused attention kernels"));
  flex.attention_kernel = "triton";
  EXPECT_TRUE(Names(Framework::kTorchtitan, flex, "attention_kernel triton: torchtitan runs no Triton FlashAttention"));
  // Hybrid models with Mamba-2 mixers: Megatron-core trains them (pretrain_mamba.py), the others
  // have no state-space layers.
  const ModelSpec nano = FindModelPreset("nemotron-3-nano-30b-a3b")->spec;
  PlanSpec hybrid = Plan({{"expert", 8}});
  hybrid.zero_stage = 1;
  EXPECT_TRUE(FrameworkGaps(Framework::kMegatronCore, nano, hybrid).empty());
  for (Framework f : {Framework::kTorchtitan, Framework::kMaxText, Framework::kDeepSpeed}) {
    EXPECT_TRUE(Names(f, hybrid, "Mamba-2 layers of 'nemotron-3-nano-30b-a3b'", nano));
  }
  // MoE parallel folding (expert_axes beyond the expert axis): Megatron-core's alone.
  PlanSpec fold = Plan({{"data", 2}, {"context", 4}, {"tensor", 2}});
  fold.zero_stage = 1, fold.sequence_parallel = true, fold.expert_axes = {"context"};
  EXPECT_TRUE(FrameworkGaps(Framework::kMegatronCore, mixtral, fold).empty());
  EXPECT_TRUE(Names(Framework::kTorchtitan, fold, "experts folded over context (expert_axes)", mixtral));
  fold.expert_axes = {"tensor", "context"};
  EXPECT_TRUE(FrameworkGaps(Framework::kMegatronCore, mixtral, fold).empty());
  EXPECT_TRUE(Names(Framework::kMaxText, fold, "experts folded over tensor, context (expert_axes): shardsim does not profile maxtext's MoE parallel folding", mixtral));
  fold.expert_axes = {"data"}, fold.mesh.fsdp = 2, fold.mesh.context = 1, fold.zero_stage = 3;  // Megatron carves experts from its inner (fsdp) ranks
  EXPECT_TRUE(Names(Framework::kMegatronCore, fold, "experts folded over data beside fsdp=2 (expert_axes)", mixtral));
  // Latent experts: Megatron-core's alone, and without its shared-expert overlap beside them.
  ModelSpec latent = mixtral;
  latent.moe->latent_size = 1024, latent.moe->num_shared_experts = 1;
  PlanSpec routed = Plan({{"expert", 8}});
  routed.zero_stage = 1;
  EXPECT_TRUE(FrameworkGaps(Framework::kMegatronCore, latent, routed).empty());
  EXPECT_TRUE(Names(Framework::kTorchtitan, routed, "routed experts in a latent width", latent));
  routed.overlap.expert = true;
  EXPECT_TRUE(Names(Framework::kMegatronCore, routed, "shared experts overlapped with the dispatch", latent));
  // FP8 weight gathers: Megatron-core's --fp8-param-gather; the others gather 16-bit weights.
  PlanSpec gathered = Plan({{"fsdp", 8}});
  gathered.zero_stage = 3, gathered.dtype = "fp8", gathered.param_gather_dtype = "fp8";
  EXPECT_TRUE(FrameworkGaps(Framework::kMegatronCore, Llama(), gathered).empty());
  for (Framework f : {Framework::kTorchtitan, Framework::kMaxText}) {
    EXPECT_TRUE(Names(f, gathered, "FP8 parameter gathers (param_gather_dtype fp8)"));
  }
  // Multi-token prediction: Megatron-core and MaxText train it from their configurations.
  ModelSpec mtp = mixtral;
  mtp.mtp_layers = 1;
  PlanSpec plain = Plan({{"expert", 8}, {"fsdp", 8}});
  plain.zero_stage = 3;
  EXPECT_TRUE(Names(Framework::kTorchtitan, plain, "multi-token prediction (1 module of 'mixtral-8x7b')", mtp));
  EXPECT_TRUE(Names(Framework::kDeepSpeed, plain, "multi-token prediction", mtp));
  EXPECT_FALSE(Names(Framework::kMaxText, plain, "multi-token prediction", mtp));
  EXPECT_FALSE(Names(Framework::kMegatronCore, plain, "multi-token prediction", mtp));
  // One module's weights at every depth: Megatron-core's repeated layer; MaxText's modules each
  // hold their own.
  mtp.mtp_layers = 2, mtp.mtp_shared_weights = true;
  EXPECT_TRUE(Names(Framework::kMaxText, plain, "sharing one module's weights (mtp_shared_weights)", mtp));
  EXPECT_FALSE(Names(Framework::kMegatronCore, plain, "mtp_shared_weights", mtp));
  // Elementwise kernels: Megatron-core's and MaxText's are fused; torchtitan runs both, but no
  // longer a fused RMSNorm beside eager kernels; async TP compiles torchtitan's model.
  PlanSpec eager = plain;
  eager.elementwise_kernels = "eager";
  EXPECT_TRUE(Names(Framework::kMegatronCore, eager, "eager elementwise kernels"));
  EXPECT_TRUE(Names(Framework::kMaxText, eager, "eager elementwise kernels"));
  EXPECT_FALSE(Names(Framework::kTorchtitan, eager, "elementwise kernels"));
  eager.elementwise_kernels = "eager-fused-norm";
  EXPECT_TRUE(Names(Framework::kTorchtitan, eager, "removed its fused_rmsnorm"));
  PlanSpec async = Plan({{"fsdp", 8}, {"tensor", 8}});
  async.sequence_parallel = true, async.overlap.tensor = true;
  EXPECT_EQ(AsFrameworkRuns(Framework::kTorchtitan, FindModelPreset("llama3-70b")->spec, async).elementwise_kernels, "fused");
  EXPECT_EQ(AsFrameworkRuns(Framework::kTorchtitan, FindModelPreset("llama3-70b")->spec, plain).elementwise_kernels, "eager");
  async.elementwise_kernels = "eager";
  EXPECT_TRUE(Names(Framework::kTorchtitan, async, "compiles the model for it"));
}

TEST(FrameworksTest, RecomputeDtypeAttentionOrder) {
  PlanSpec p = Plan({{"fsdp", 8}, {"tensor", 8}});
  p.recompute = Recompute::kSelective;
  EXPECT_TRUE(Names(Framework::kTorchtitan, p, "selective recomputation"));
  p.recompute = Recompute::kNone;
  p.dtype = "fp16";
  EXPECT_TRUE(Names(Framework::kTorchtitan, p, "fp16"));
  p.dtype = "fp8";
  EXPECT_TRUE(Names(Framework::kDeepSpeed, p, "fp8"));
  p.dtype = "bf16";
  p.flash_attention = false;
  EXPECT_TRUE(Names(Framework::kTorchtitan, p, "unfused attention"));
  // Recomputation sets and losses each framework has: torchtitan's per-op policy and eager or
  // compiled loss, MaxText's minimal, Megatron-core's fused loss only.
  p.recompute = Recompute::kSelectiveOp;
  EXPECT_TRUE(Names(Framework::kMegatronCore, p, "selective-op recomputation"));
  EXPECT_FALSE(Names(Framework::kTorchtitan, p, "recomputation"));
  p.recompute = Recompute::kMinimal;
  EXPECT_TRUE(Names(Framework::kTorchtitan, p, "minimal recomputation"));
  EXPECT_FALSE(Names(Framework::kMaxText, p, "recomputation"));
  p.recompute = Recompute::kNone;
  p.cross_entropy = "eager";
  EXPECT_TRUE(Names(Framework::kMegatronCore, p, "eager cross-entropy"));
  EXPECT_FALSE(Names(Framework::kTorchtitan, p, "cross-entropy"));
  EXPECT_EQ(AsFrameworkRuns(Framework::kTorchtitan, Llama(), Plan({{"fsdp", 8}})).cross_entropy, "eager");
  EXPECT_EQ(AsFrameworkRuns(Framework::kMegatronCore, Llama(), Plan({{"fsdp", 8}})).cross_entropy, "fused");
  EXPECT_EQ(FrameworkRecomputes(Framework::kMaxText),
            (std::vector<Recompute>{Recompute::kNone, Recompute::kMinimal, Recompute::kSaveDotWithContextExceptMlp, Recompute::kSaveDotExceptMlp,
                                    Recompute::kSaveQkvProj, Recompute::kSaveOutProj, Recompute::kFull}));
  p.cross_entropy.clear();
  PlanSpec staged = Plan({{"data", 2}, {"pipeline", 4}, {"fsdp", 8}});
  staged.sequence_parallel = true;
  EXPECT_TRUE(Names(Framework::kMaxText, staged, "mesh_order pipeline,data,fsdp"));
  staged.mesh_order = {"data", "pipeline", "fsdp", "expert", "context", "tensor"};
  EXPECT_TRUE(Names(Framework::kMegatronCore, staged, "tp-cp-ep-dp-pp"));
}

// Overlaps a framework fixes: Megatron-core's non-interleaved 1F1B never overlaps its sends;
// AsFrameworkRuns sets them as the framework runs them.
TEST(FrameworksTest, FixedOverlaps) {
  PlanSpec p = Plan({{"data", 8}, {"pipeline", 8}});
  p.fsdp_reshard_after_forward = true;
  EXPECT_TRUE(Names(Framework::kMegatronCore, p, "overlap.pipeline on"));
  EXPECT_TRUE(Names(Framework::kDeepSpeed, p, "overlap.pipeline on"));
  EXPECT_TRUE(
      FrameworkGaps(Framework::kMegatronCore, Llama(), AsFrameworkRuns(Framework::kMegatronCore, Llama(), p))
          .empty());
  PlanSpec t = Plan({{"data", 8}, {"tensor", 8}});
  t.overlap.tensor = true;
  EXPECT_TRUE(Names(Framework::kMegatronCore, t, "--tp-comm-overlap needs --sequence-parallel"));
}

TEST(FrameworksTest, PlanJsonField) {
  PlanSpec p = Plan({{"data", 8}});
  EXPECT_FALSE(PlanToJson(p).contains("framework")) << "left out when any framework will do";
  p.framework = "torchtitan";
  EXPECT_EQ(PlanFromJson(PlanToJson(p), "plan.json:").framework, "torchtitan");
  nlohmann::json j = PlanToJson(p);
  j["framework"] = "megatron";
  EXPECT_EQ(PlanFromJson(j, "plan.json:").framework, "megatron-core");
  ApplyPlanOverride(j, "framework=deepspeed");
  EXPECT_EQ(PlanFromJson(j, "plan.json:").framework, "deepspeed");
  j["framework"] = "deepspeeed";
  try {
    PlanFromJson(j, "plan.json:");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(e.where().find("framework"), std::string::npos) << e.where();
    EXPECT_NE(e.valid().find("megatron-core, torchtitan, maxtext, deepspeed"), std::string::npos)
        << e.valid();
    EXPECT_NE(e.problem().find("did you mean 'deepspeed'"), std::string::npos) << e.problem();
  }
}

// Decoder layers kept at 16 bits: Megatron-core's --first-last-layers-bf16 (each end at most a
// pipeline stage's layers), torchtitan's converter fqns (not beside routed experts, whose grouped
// converters take every layer); MaxText and DeepSpeed have no such setting.
TEST(FrameworksTest, SixteenBitLayers) {
  PlanSpec p = Plan({{"fsdp", 8}, {"pipeline", 8}});
  p.zero_stage = 3, p.dtype = "fp8", p.sixteen_bit_first_layers = 1, p.sixteen_bit_last_layers = 1;
  for (const Framework f : {Framework::kMegatronCore, Framework::kTorchtitan}) {
    for (const std::string& gap : FrameworkGaps(f, Llama(), p)) EXPECT_EQ(gap.find("16 bits"), std::string::npos) << FrameworkName(f) << ": " << gap;
  }
  EXPECT_TRUE(Names(Framework::kMaxText, p, "decoder layers kept at 16 bits (sixteen_bit_first_layers, sixteen_bit_last_layers): maxtext runs every decoder layer"));
  // DeepSpeed has no FP8 at all: the dtype's gap, not this one.
  for (const std::string& gap : FrameworkGaps(Framework::kDeepSpeed, Llama(), p)) EXPECT_EQ(gap.find("16 bits"), std::string::npos) << gap;
  p.sixteen_bit_last_layers = 11;  // 80 layers over 8 stages: 10 a stage
  EXPECT_TRUE(Names(Framework::kMegatronCore, p, "more decoder layers kept at 16 bits at one end than a pipeline stage's 10: megatron-core refuses it"));
  p.fp8_recipe = "nvfp4";  // checked under FP8 only (transformer_config.py), not under --fp4-format
  EXPECT_FALSE(Names(Framework::kMegatronCore, p, "than a pipeline stage's"));
  const ModelSpec mixtral = FindModelPreset("mixtral-8x7b")->spec;
  PlanSpec moe = Plan({{"fsdp", 1}, {"expert", 8}});
  moe.zero_stage = 3, moe.dtype = "fp8", moe.sixteen_bit_first_layers = 1;
  EXPECT_TRUE(Names(Framework::kTorchtitan, moe, "decoder layers kept at 16 bits beside routed experts", mixtral));
  moe.dtype = "bf16", moe.sixteen_bit_first_layers = 0;
  for (const std::string& gap : FrameworkGaps(Framework::kTorchtitan, mixtral, moe)) EXPECT_EQ(gap.find("16 bits"), std::string::npos) << gap;
}

}  // namespace
}  // namespace shardsim::planner
