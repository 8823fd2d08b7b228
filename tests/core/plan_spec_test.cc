#include "core/plan_spec.h"

#include <algorithm>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/model_presets.h"
#include "core/plan_json.h"

namespace shardsim {
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

TEST(PlanJsonTest, RoundTripsAndFillsDefaults) {
  const PlanSpec p = PlanFromJson(BasePlan(), "p.json");
  EXPECT_EQ(p.mesh.data, 8);
  EXPECT_EQ(p.mesh.pipeline, 1);
  EXPECT_EQ(p.mesh_order, DefaultMeshOrder());
  EXPECT_EQ(p.pipeline_schedule, PipelineSchedule::kOneFOneB);
  EXPECT_EQ(PlanFromJson(json::parse(PlanToJson(p).dump()), "p.json"), p);
}

TEST(PlanJsonTest, OverridesApplyInOrder) {
  json plan = BasePlan();
  ApplyPlanOverride(plan, "mesh.tensor=4");
  ApplyPlanOverride(plan, "mesh.pipeline=2");
  ApplyPlanOverride(plan, "pipeline_schedule=interleaved-1f1b");
  ApplyPlanOverride(plan, "sequence_parallel=true");
  ApplyPlanOverride(plan, "mesh_order=data,pipeline,fsdp,expert,context,tensor");
  const PlanSpec p = PlanFromJson(plan, "p.json");
  EXPECT_EQ(p.mesh.tensor, 4);
  EXPECT_EQ(p.mesh.pipeline, 2);
  EXPECT_EQ(p.pipeline_schedule, PipelineSchedule::kInterleavedOneFOneB);
  EXPECT_TRUE(p.sequence_parallel);
  EXPECT_EQ(p.mesh_order.front(), "data");
  try {
    ApplyPlanOverride(plan, "mesh.tensr=2");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(e.problem().find("mesh.tensor"), std::string::npos);
  }
  ApplyPlanOverride(plan, "mesh.tensor=abc");
  EXPECT_THROW(PlanFromJson(plan, "p.json"), InputError);
}

TEST(ValidatePlanTest, AcceptsAConsistentPlan) {
  EXPECT_EQ(Rejection(BasePlan(), "llama3-70b", 64), "");
  json moe = {{"mesh", {{"data", 2}, {"expert", 8}, {"tensor", 4}}}, {"global_batch_size", 64}, {"seq_len", 4096}};
  EXPECT_EQ(Rejection(moe, "mixtral-8x7b", 64), "");
}

TEST(ValidatePlanTest, MeshMustMatchDevices) {
  EXPECT_NE(Rejection(BasePlan(), "llama3-70b", 128).find("has 64 devices but cluster has 128"), std::string::npos);
}

TEST(ValidatePlanTest, AxesMustDivideTheModel) {
  json plan = BasePlan();
  plan["mesh"] = {{"data", 16}, {"tensor", 3}};
  plan["global_batch_size"] = 48;
  const std::string tensor = Rejection(plan, "llama3-8b", 48);
  EXPECT_NE(tensor.find("tensor=3 must divide heads=32 and kv_heads=8"), std::string::npos) << tensor;
  EXPECT_NE(tensor.find("valid: 1, 2, 4, 8"), std::string::npos) << tensor;

  // Stages may differ by a layer, but each holds at least one, and interleaved chunks are equal.
  plan = BasePlan();
  plan["mesh"] = {{"data", 8}, {"pipeline", 3}};
  EXPECT_EQ(Rejection(plan, "llama3-8b", 24), "");
  plan["mesh"] = {{"data", 8}, {"pipeline", 40}};
  EXPECT_NE(Rejection(plan, "llama3-8b", 320).find("pipeline=40 exceeds num_layers=32"), std::string::npos);
  plan["mesh"] = {{"data", 8}, {"pipeline", 3}};
  plan["pipeline_schedule"] = "interleaved-1f1b";
  plan["virtual_stages"] = 2;
  const std::string interleaved = Rejection(plan, "llama3-8b", 24);
  EXPECT_NE(interleaved.find("pipeline x virtual_stages = 3 x 2 must divide num_layers=32"), std::string::npos) << interleaved;
  plan.erase("pipeline_schedule");
  plan.erase("virtual_stages");

  plan["mesh"] = {{"data", 8}, {"expert", 3}};
  plan["global_batch_size"] = 48;
  EXPECT_NE(Rejection(plan, "mixtral-8x7b", 24).find("expert=3 must divide num_experts=8"), std::string::npos);
  EXPECT_NE(Rejection(plan, "llama3-8b", 24).find("mixture-of-experts"), std::string::npos);
}

TEST(LayersPerPartTest, EvenOrShorterAtTheEnds) {
  EXPECT_EQ(LayersPerPart(32, 4), (std::vector<int64_t>{8, 8, 8, 8}));
  // Llama 3 405B: one layer fewer on the first and the last of 16 stages.
  std::vector<int64_t> llama(16, 8);
  llama.front() = llama.back() = 7;
  EXPECT_EQ(LayersPerPart(126, 16), llama);
  // DeepSeek-V3's 61 layers on 16 stages: three shorter stages, the ends first.
  std::vector<int64_t> deepseek(16, 4);
  deepseek[0] = deepseek[15] = deepseek[1] = 3;
  EXPECT_EQ(LayersPerPart(61, 16), deepseek);
  EXPECT_EQ(LayersPerPart(32, 3), (std::vector<int64_t>{10, 11, 11}));
  EXPECT_EQ(LayersPerPart(5, 5), (std::vector<int64_t>{1, 1, 1, 1, 1}));
  for (int64_t layers : {7, 61, 80, 126}) {
    for (int64_t parts = 1; parts <= layers; ++parts) {
      const std::vector<int64_t> split = LayersPerPart(layers, parts);
      int64_t sum = 0;
      for (int64_t n : split) sum += n;
      EXPECT_EQ(sum, layers);
      EXPECT_LE(*std::max_element(split.begin(), split.end()) - *std::min_element(split.begin(), split.end()), 1);
    }
  }
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
  plan = BasePlan();
  plan["mesh_order"] = {"data", "tensor"};
  EXPECT_NE(Rejection(plan, "llama3-8b", 64).find("mesh_order"), std::string::npos);
  plan = BasePlan();
  plan["seq_len"] = 4096;
  EXPECT_NE(Rejection(plan, "gpt3-175b", 64).find("learned positions"), std::string::npos);
}

TEST(PlanShapeTest, ReplicasAndMicrobatches) {
  json plan = {{"mesh", {{"data", 4}, {"fsdp", 2}, {"pipeline", 4}}}, {"global_batch_size", 64}, {"seq_len", 2048},
               {"micro_batch_size", 2}};
  const PlanShape s = DerivePlanShape(PlanFromJson(plan, "p.json"));
  EXPECT_EQ(s.devices, 32);
  EXPECT_EQ(s.batch_replicas, 8);
  EXPECT_EQ(s.num_microbatches, 4);
  EXPECT_EQ(s.tokens_per_step, 64 * 2048);
}

}  // namespace
}  // namespace shardsim
