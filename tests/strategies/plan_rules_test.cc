// The plan rules as values (strategies/plan_rules.h): what each rule rejects, with the field.
#include "strategies/plan_rules.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model_presets.h"
#include "core/plan_json.h"
#include "strategies/schedule.h"

namespace shardsim::strategies {
namespace {

using nlohmann::json;

json BasePlan() {
  return {{"mesh", {{"data", 8}, {"tensor", 8}}}, {"global_batch_size", 64}, {"seq_len", 4096}};
}

ModelSpec Model(const std::string& name) { return FindModelPreset(name)->spec; }

std::string Rejection(const json& plan, const std::string& model, int64_t devices) {
  try {
    ValidatePlan(PlanFromJson(plan, "p.json"), Model(model), devices, "cluster", "p.json:");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ValidatePlanTest, AcceptsAConsistentPlan) {
  EXPECT_EQ(Rejection(BasePlan(), "llama3-70b", 64), "");
  json moe = {{"mesh", {{"data", 2}, {"expert", 8}, {"tensor", 4}}},
              {"global_batch_size", 64},
              {"seq_len", 4096}};
  EXPECT_EQ(Rejection(moe, "mixtral-8x7b", 64), "");
}

// MoE parallel folding (expert_axes): an MoE model only, the mesh's expert axis listed, tensor
// folding with sequence parallelism, a degree dividing the experts; unknown or repeated names
// refused as the plan is read.
TEST(ValidatePlanTest, ExpertAxesFoldExpertsOverOtherRanks) {
  json folded = {{"mesh", {{"data", 2}, {"context", 4}, {"tensor", 2}}}, {"global_batch_size", 64}, {"seq_len", 8192},
                 {"sequence_parallel", true}, {"expert_axes", {"context"}}};
  EXPECT_EQ(Rejection(folded, "mixtral-8x7b", 16), "");
  folded["expert_axes"] = {"tensor", "context"};
  EXPECT_EQ(Rejection(folded, "mixtral-8x7b", 16), "");
  EXPECT_NE(Rejection(folded, "llama3-8b", 16).find("'llama3-8b' has none of"), std::string::npos);
  folded["sequence_parallel"] = false;
  EXPECT_NE(Rejection(folded, "mixtral-8x7b", 16).find("sequence parallelism"), std::string::npos);
  folded["sequence_parallel"] = true;
  folded["expert_axes"] = {"tensor", "context", "data"};  // 16 ranks for 8 experts
  EXPECT_NE(Rejection(folded, "mixtral-8x7b", 16).find("must divide num_experts=8"), std::string::npos);
  folded["mesh"]["expert"] = 2, folded["mesh"]["data"] = 1, folded["expert_axes"] = {"context"};
  EXPECT_NE(Rejection(folded, "mixtral-8x7b", 16).find("leaves out the mesh's expert=2"), std::string::npos);
  folded["expert_axes"] = {"context", "pipeline"};
  EXPECT_NE(Rejection(folded, "mixtral-8x7b", 16).find("'pipeline' is not an axis experts can be split over"), std::string::npos);
  folded["expert_axes"] = {"context", "context"};
  EXPECT_NE(Rejection(folded, "mixtral-8x7b", 16).find("listed twice"), std::string::npos);
  folded["expert_axes"] = "context";  // a string where a list belongs: the list it meant
  EXPECT_NE(Rejection(folded, "mixtral-8x7b", 16).find("got the string \"context\""), std::string::npos);
  EXPECT_NE(Rejection(folded, "mixtral-8x7b", 16).find("write [\"context\"]"), std::string::npos);
  folded["expert_axes"] = "context,expert";  // the list it meant, split at the commas
  EXPECT_NE(Rejection(folded, "mixtral-8x7b", 16).find("write [\"context\",\"expert\"]"), std::string::npos);
}

// Ring attention over local layers is not modelled: context > 1 is refused while the window is
// shorter than the sequence, allowed where the window covers it.
TEST(ValidatePlanTest, ContextRefusedOverASlidingWindow) {
  json plan = {{"mesh", {{"fsdp", 4}, {"context", 2}}}, {"global_batch_size", 8}, {"seq_len", 4096}};
  const std::string refused = Rejection(plan, "gpt-oss-20b", 8);
  EXPECT_NE(refused.find("p.json:/mesh/context"), std::string::npos) << refused;
  EXPECT_NE(refused.find("128-token window"), std::string::npos) << refused;
  plan["mesh"] = {{"fsdp", 8}};
  EXPECT_EQ(Rejection(plan, "gpt-oss-20b", 8), "");
  plan["mesh"] = {{"fsdp", 4}, {"context", 2}};
  plan["seq_len"] = 128;
  EXPECT_EQ(Rejection(plan, "gpt-oss-20b", 8), "");
}

TEST(ValidatePlanTest, MeshMustMatchDevices) {
  EXPECT_NE(Rejection(BasePlan(), "llama3-70b", 128).find("has 64 devices but cluster has 128"),
            std::string::npos);
}

TEST(ValidatePlanTest, AxesMustDivideTheModel) {
  json plan = BasePlan();
  plan["mesh"] = {{"data", 16}, {"tensor", 3}};
  plan["global_batch_size"] = 48;
  const std::string tensor = Rejection(plan, "llama3-8b", 48);
  EXPECT_NE(tensor.find("tensor=3 must divide heads=32 and kv_heads=8"), std::string::npos)
      << tensor;
  EXPECT_NE(tensor.find("valid: 1, 2, 4, 8"), std::string::npos) << tensor;

  // Stages may differ by a layer, but each holds at least one, and interleaved chunks are equal.
  plan = BasePlan();
  plan["mesh"] = {{"data", 8}, {"pipeline", 3}};
  EXPECT_EQ(Rejection(plan, "llama3-8b", 24), "");
  plan["mesh"] = {{"data", 8}, {"pipeline", 40}};
  EXPECT_NE(Rejection(plan, "llama3-8b", 320).find("pipeline=40 exceeds num_layers=32"),
            std::string::npos);
  // Interleaved chunks may be uneven too (32 layers in 6 chunks), but each holds a layer.
  plan["mesh"] = {{"data", 8}, {"pipeline", 3}};
  plan["pipeline_schedule"] = "interleaved-1f1b";
  plan["virtual_stages"] = 2;
  plan["global_batch_size"] = 96;  // 12 micro-batches per replica, a multiple of 3
  EXPECT_EQ(Rejection(plan, "llama3-8b", 24), "");
  plan["mesh"] = {{"data", 1}, {"pipeline", 8}};
  plan["global_batch_size"] = 64;
  plan["virtual_stages"] = 5;
  const std::string interleaved = Rejection(plan, "llama3-8b", 8);
  EXPECT_NE(interleaved.find("40 model chunks, more than the 32 layers"), std::string::npos)
      << interleaved;
  EXPECT_NE(interleaved.find("p.json:/virtual_stages"), std::string::npos) << interleaved;
  plan.erase("pipeline_schedule");
  plan.erase("virtual_stages");

  plan["mesh"] = {{"data", 8}, {"expert", 3}};
  plan["global_batch_size"] = 48;
  EXPECT_NE(Rejection(plan, "mixtral-8x7b", 24).find("expert=3 must divide num_experts=8"),
            std::string::npos);
  EXPECT_NE(Rejection(plan, "llama3-8b", 24).find("mixture-of-experts"), std::string::npos);
}

TEST(ValidatePlanTest, BatchSequenceAndSchedule) {
  json plan = BasePlan();
  plan["global_batch_size"] = 60;
  EXPECT_NE(Rejection(plan, "llama3-8b", 64).find("global_batch_size"), std::string::npos);
  plan = BasePlan();
  plan["micro_batch_size"] = 3;
  EXPECT_NE(Rejection(plan, "llama3-8b", 64).find("micro_batch_size=3"), std::string::npos);
  plan = BasePlan();
  plan["mesh"] = {{"data", 4}, {"context", 16}};
  plan["seq_len"] = 4112;
  EXPECT_NE(Rejection(plan, "llama3-8b", 64).find("2 x context"), std::string::npos);
  plan = BasePlan();
  plan["mesh"] = {{"data", 4}, {"pipeline", 16}};
  plan["pipeline_schedule"] = "interleaved-1f1b";
  EXPECT_NE(Rejection(plan, "llama3-8b", 64).find("virtual_stages >= 2"), std::string::npos);
  plan["virtual_stages"] = 2;
  EXPECT_EQ(Rejection(plan, "llama3-8b", 64), "");
  plan["pipeline_schedule"] = "1f1b";
  EXPECT_NE(Rejection(plan, "llama3-8b", 64).find("one model chunk per stage"), std::string::npos);
  plan["pipeline_schedule"] = "zb-v";
  const std::string unknown = Rejection(plan, "llama3-8b", 64);
  EXPECT_NE(unknown.find("unknown pipeline schedule 'zb-v'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("zbv"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("p.json:/pipeline_schedule"), std::string::npos) << unknown;
  plan["pipeline_schedule"] = "zbv";
  plan["virtual_stages"] = 1;
  plan["global_batch_size"] = 64;  // 16 micro-batches per replica on 16 stages: zbv wants 32
  EXPECT_NE(Rejection(plan, "llama3-8b", 64).find("at least 2 x pipeline = 32"), std::string::npos);
  plan["global_batch_size"] = 128;
  EXPECT_EQ(Rejection(plan, "llama3-8b", 64), "");
  // Rounds split a replica's micro-batches evenly, and each must suit the schedule.
  plan = BasePlan();
  plan["mesh"] = {{"data", 4}, {"pipeline", 16}};
  plan["global_batch_size"] = 256;  // 64 micro-batches per replica
  plan["pipeline_rounds"] = 3;
  const std::string uneven = Rejection(plan, "llama3-8b", 64);
  EXPECT_NE(uneven.find("p.json:/pipeline_rounds"), std::string::npos) << uneven;
  EXPECT_NE(uneven.find("must divide the 64 micro-batches"), std::string::npos) << uneven;
  plan["pipeline_rounds"] = 4;
  EXPECT_EQ(Rejection(plan, "llama3-8b", 64), "");
  plan["pipeline_schedule"] = "zbv";  // 16 a round; zbv wants 2 x pipeline = 32 per schedule
  const std::string short_round = Rejection(plan, "llama3-8b", 64);
  EXPECT_NE(short_round.find("p.json:/pipeline_rounds"), std::string::npos) << short_round;
  EXPECT_NE(short_round.find("leaves 16 of the 64 micro-batches per replica to each schedule"), std::string::npos) << short_round;
  EXPECT_NE(short_round.find("at least 2 x pipeline = 32 micro-batches per schedule"), std::string::npos) << short_round;
  EXPECT_NE(short_round.find("valid: 1, 2 "), std::string::npos) << short_round;  // the rounds zbv runs
  plan["pipeline_rounds"] = 3;  // not a divisor: the valid ones are those the schedule runs
  EXPECT_NE(Rejection(plan, "llama3-8b", 64).find("valid: 1, 2 "), std::string::npos) << Rejection(plan, "llama3-8b", 64);
  plan["pipeline_rounds"] = 2;
  EXPECT_EQ(Rejection(plan, "llama3-8b", 64), "");
  plan["global_batch_size"] = 32;  // 8 per replica: too few for one schedule, the batch is the field
  EXPECT_NE(Rejection(plan, "llama3-8b", 64).find("p.json:/global_batch_size"), std::string::npos) << Rejection(plan, "llama3-8b", 64);
  // A schedule the estimate walks whole (each of several rounds, or GPipe's) is bounded
  // (kMaxWalkedRound); one schedule of 1F1B over as many is costed at any count.
  plan = BasePlan();
  plan["mesh"] = {{"data", 4}, {"pipeline", 16}};
  plan["seq_len"] = 1;
  plan["global_batch_size"] = 4 * 2 * (kMaxWalkedRound + 1);  // rounds of 65,537 per replica
  plan["pipeline_rounds"] = 2;
  const std::string walked = Rejection(plan, "llama3-8b", 64);
  EXPECT_NE(walked.find("p.json:/pipeline_rounds: 65537 micro-batches per replica in each 1f1b schedule of the 2 rounds"), std::string::npos) << walked;
  EXPECT_NE(walked.find("valid: at most 65536 a schedule"), std::string::npos) << walked;
  plan["pipeline_rounds"] = 1;
  EXPECT_EQ(Rejection(plan, "llama3-8b", 64), "");
  plan["pipeline_schedule"] = "gpipe";
  EXPECT_NE(Rejection(plan, "llama3-8b", 64).find("p.json:/pipeline_schedule: 131074 micro-batches per replica in each gpipe schedule"), std::string::npos)
      << Rejection(plan, "llama3-8b", 64);
  // Without a pipeline there is no schedule to repeat.
  plan = BasePlan();
  plan["pipeline_rounds"] = 2;
  EXPECT_NE(Rejection(plan, "llama3-8b", 64).find("p.json:/pipeline_rounds: pipeline_rounds=2 without pipeline parallelism"), std::string::npos)
      << Rejection(plan, "llama3-8b", 64);
  plan = BasePlan();
  plan["mesh_order"] = {"data", "tensor"};
  EXPECT_NE(Rejection(plan, "llama3-8b", 64).find("mesh_order"), std::string::npos);
  plan = BasePlan();
  plan["seq_len"] = 4096;
  EXPECT_NE(Rejection(plan, "gpt3-175b", 64).find("learned positions"), std::string::npos);
}

// How weights are held must fit the dtype (fp32 training holds fp32 weights, fp16 keeps an fp32
// master), and an attention kernel needs blockwise attention: each refused naming its field, in
// the plans the search makes as in plan files.
TEST(ValidatePlanTest, MasterWeightsAndAttentionKernelFitTheirPlan) {
  json plan = BasePlan();
  plan["master_weights"] = "bf16";
  EXPECT_EQ(Rejection(plan, "llama3-70b", 64), "");
  plan["dtype"] = "fp32";
  EXPECT_NE(Rejection(plan, "llama3-70b", 64).find("master_weights bf16 with dtype fp32"), std::string::npos);
  plan["dtype"] = "fp16";
  EXPECT_NE(Rejection(plan, "llama3-70b", 64).find("master_weights bf16 with dtype fp16"), std::string::npos);
  plan["master_weights"] = "fp32-copy";
  EXPECT_EQ(Rejection(plan, "llama3-70b", 64), "");
  json kernel = BasePlan();
  kernel["attention_kernel"] = "triton";
  EXPECT_EQ(Rejection(kernel, "llama3-70b", 64), "");
  kernel["flash_attention"] = false;
  const std::optional<Infeasibility> bad = CheckPlan(PlanFromJson(kernel, "p.json"), Model("llama3-70b"), 64, "cluster");
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->field, "attention_kernel");
}

TEST(ValidatePlanTest, CheckPlanReturnsTheFieldWithoutThrowing) {
  json plan = BasePlan();
  plan["mesh"] = {{"data", 16}, {"tensor", 3}};
  plan["global_batch_size"] = 48;
  const std::optional<Infeasibility> bad =
      CheckPlan(PlanFromJson(plan, "p.json"), Model("llama3-8b"), 48, "cluster");
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->field, "mesh/tensor");
  EXPECT_FALSE(bad->valid.empty());
  EXPECT_FALSE(CheckPlan(PlanFromJson(BasePlan(), "p.json"), Model("llama3-70b"), 64, "cluster")
                   .has_value());
}

}  // namespace
}  // namespace shardsim::strategies
