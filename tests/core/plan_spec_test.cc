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

// Whether `plan` is refused with an error naming `field` whose valid values include `valid`.
bool Refused(const json& plan, const std::string& field, const std::string& valid) {
  try {
    PlanFromJson(plan, "p.json");
  } catch (const InputError& e) {
    return e.valid().find(valid) != std::string::npos && std::string(e.what()).find(field) != std::string::npos;
  }
  return false;
}

TEST(PlanJsonTest, RoundTripsAndFillsDefaults) {
  const PlanSpec p = PlanFromJson(BasePlan(), "p.json");
  EXPECT_EQ(p.mesh.data, 8);
  EXPECT_EQ(p.mesh.pipeline, 1);
  EXPECT_EQ(p.mesh_order, DefaultMeshOrder());
  EXPECT_EQ(p.pipeline_schedule, "1f1b");
  EXPECT_EQ(PlanFromJson(json::parse(PlanToJson(p).dump()), "p.json").mesh, p.mesh);
  // The layout and the FSDP reshard switch round-trip; the switch is written as its effective
  // value (true without pipeline parallelism, false with it).
  json plan = BasePlan();
  plan["pipeline_layout"] = "E|(t|)*126L";
  plan["fsdp_reshard_after_forward"] = false;
  const PlanSpec q = PlanFromJson(plan, "p.json");
  EXPECT_EQ(q.pipeline_layout, "E|(t|)*126L");
  EXPECT_EQ(q.fsdp_reshard_after_forward, std::optional<bool>(false));
  EXPECT_EQ(PlanFromJson(json::parse(PlanToJson(q).dump()), "p.json"), q);
  EXPECT_TRUE(PlanToJson(p)["fsdp_reshard_after_forward"].get<bool>());
  json piped = BasePlan();
  piped["mesh"] = {{"data", 8}, {"pipeline", 8}};
  EXPECT_FALSE(PlanToJson(PlanFromJson(piped, "p.json"))["fsdp_reshard_after_forward"].get<bool>());
  ApplyPlanOverride(piped, "pipeline_layout=Et|(tt|)*3tL");
  ApplyPlanOverride(piped, "fsdp_reshard_after_forward=true");
  EXPECT_EQ(PlanFromJson(piped, "p.json").pipeline_layout, "Et|(tt|)*3tL");
  EXPECT_TRUE(*PlanFromJson(piped, "p.json").fsdp_reshard_after_forward);
}

// FP8 weight gathers: one byte and the recipe's weight scales (per tensor, per 128 x 128 tile, per
// 32 elements; never row-wise); the gradients keep their own width. The field needs an
// fp8 plan and a recipe a framework gathers in FP8 (that the plan gathers at all is a plan rule:
// strategies/plan_rules.cc).
TEST(PlanJsonTest, Fp8ParamGatherWidthAndChecks) {
  json plan = BasePlan();
  plan["dtype"] = "fp8";
  plan["zero_stage"] = 1;
  plan["param_gather_dtype"] = "fp8";
  PlanSpec p = PlanFromJson(plan, "p.json");
  EXPECT_DOUBLE_EQ(ParamGatherBytes(p), 1);
  EXPECT_DOUBLE_EQ(GradReduceBytes(p), 2);
  EXPECT_EQ(PlanFromJson(json::parse(PlanToJson(p).dump()), "p.json").param_gather_dtype, "fp8");
  p.fp8_recipe = "mxfp8";
  EXPECT_DOUBLE_EQ(ParamGatherBytes(p), 1 + 1.0 / 32);
  p.fp8_recipe = "blockwise";
  EXPECT_DOUBLE_EQ(ParamGatherBytes(p), 1 + 4.0 / (128 * 128));  // one scale per 128 x 128 tile
  p.fp8_recipe = "nvfp4";  // 4-bit elements, an E4M3 scale stored per row of 16 (16 x 16 blocks share it)
  EXPECT_DOUBLE_EQ(ParamGatherBytes(p), 0.5 + 1.0 / 16);
  EXPECT_DOUBLE_EQ(Fp8ElementBytes(p, 4096), 0.5 + 1.0 / 16);  // activations: a scale per 16
  EXPECT_EQ(MatmulPeakDtype(p.dtype, Fp8RecipeOf(p)), "fp4");
  EXPECT_EQ(MatmulPeakDtype("fp8", "mxfp8"), "fp8");
  EXPECT_EQ(MatmulPeakDtype("bf16", ""), "bf16");
  p.param_gather_dtype = "bf16";
  EXPECT_DOUBLE_EQ(ParamGatherBytes(p), 2);
  json bf16 = plan;
  bf16["dtype"] = "bf16";
  EXPECT_TRUE(Refused(bf16, "param_gather_dtype", "dtype fp8"));
  json rowwise = plan;
  rowwise["fp8_recipe"] = "rowwise";
  EXPECT_TRUE(Refused(rowwise, "param_gather_dtype", "tensorwise, blockwise, mxfp8 or nvfp4"));
  json unknown = plan;
  unknown["param_gather_dtype"] = "int4";
  EXPECT_TRUE(Refused(unknown, "param_gather_dtype", "fp8"));
  json nvfp4_dispatch = BasePlan();  // no framework dispatches NVFP4 rows
  nvfp4_dispatch["dtype"] = "fp8", nvfp4_dispatch["fp8_recipe"] = "nvfp4", nvfp4_dispatch["ep_dispatch_dtype"] = "fp8";
  EXPECT_TRUE(Refused(nvfp4_dispatch, "ep_dispatch_dtype", "tensorwise, rowwise, blockwise or mxfp8"));
}

// How often FP8 products cast their weights: written only when set and read back; an fp8 plan's
// field (a bf16 plan is refused naming it), one of the two values.
TEST(PlanJsonTest, Fp8WeightCastsChecks) {
  json plan = BasePlan();
  plan["dtype"] = "fp8";
  EXPECT_FALSE(PlanToJson(PlanFromJson(plan, "p.json")).contains("fp8_weight_casts"));
  plan["fp8_weight_casts"] = "per-step";
  const PlanSpec p = PlanFromJson(plan, "p.json");
  EXPECT_EQ(p.fp8_weight_casts, "per-step");
  EXPECT_EQ(PlanFromJson(json::parse(PlanToJson(p).dump()), "p.json").fp8_weight_casts, "per-step");
  json bf16 = plan;
  bf16["dtype"] = "bf16";
  EXPECT_TRUE(Refused(bf16, "fp8_weight_casts", "dtype fp8"));
  json unknown = plan;
  unknown["fp8_weight_casts"] = "per-layer";
  EXPECT_TRUE(Refused(unknown, "fp8_weight_casts", "per-microbatch, per-step"));
}

// An fp8 plan's decoder layers kept at 16 bits: written only when set and read back; refused
// outside fp8 plans and below 0, with a hint. AtSixteenBits leaves none of the FP8 recipe's fields
// set (Fp8RecipeFields), the two lists kept in step.
TEST(PlanJsonTest, SixteenBitLayersAndTheRecipesFields) {
  json plan = BasePlan();
  plan["dtype"] = "fp8";
  EXPECT_FALSE(PlanToJson(PlanFromJson(plan, "p.json")).contains("sixteen_bit_first_layers"));
  plan["sixteen_bit_first_layers"] = 2, plan["sixteen_bit_last_layers"] = 1;
  const PlanSpec p = PlanFromJson(plan, "p.json");
  EXPECT_EQ(p.sixteen_bit_first_layers, 2);
  EXPECT_EQ(p.sixteen_bit_last_layers, 1);
  EXPECT_TRUE(SixteenBitLayer(p, 10, 1) && !SixteenBitLayer(p, 10, 2) && !SixteenBitLayer(p, 10, 8) && SixteenBitLayer(p, 10, 9));
  const PlanSpec back = PlanFromJson(json::parse(PlanToJson(p).dump()), "p.json");
  EXPECT_EQ(back.sixteen_bit_first_layers, 2);
  EXPECT_EQ(back.sixteen_bit_last_layers, 1);
  json bf16 = plan;
  bf16["dtype"] = "bf16";
  EXPECT_TRUE(Refused(bf16, "sixteen_bit_first_layers", "dtype fp8"));
  json negative = plan;
  negative["sixteen_bit_last_layers"] = -1;
  try {
    PlanFromJson(negative, "p.json");
    ADD_FAILURE() << "accepted -1";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("sixteen_bit_last_layers"), std::string::npos);
    EXPECT_NE(e.hint().find("docs/cli.md"), std::string::npos) << e.what();
  }
  // Every field of the recipe set, then none left at 16 bits.
  json all = plan;
  all["fp8_recipe"] = "tensorwise", all["ep_dispatch_dtype"] = "fp8", all["saved_input_dtype"] = "fp8", all["param_gather_dtype"] = "fp8";
  all["fp8_weight_casts"] = "per-step", all["tensor_gather_dtype"] = "fp8";
  const PlanSpec full = PlanFromJson(all, "p.json");
  PlanSpec with_wgrad = full;
  with_wgrad.saved_input_dtype = "", with_wgrad.wgrad_dtype = "bf16";  // wgrad bf16 refuses fp8 saved inputs
  for (const PlanSpec& fp8 : {full, with_wgrad}) {
    const json written = PlanToJson(fp8), sixteen = PlanToJson(AtSixteenBits(fp8));
    EXPECT_EQ(sixteen["dtype"], "bf16");
    int set = 0;
    for (const std::string& field : Fp8RecipeFields()) {
      set += written.contains(field) ? 1 : 0;
      EXPECT_FALSE(sixteen.contains(field)) << field;
    }
    EXPECT_EQ(set, 8);  // all but the one the other excludes
  }
}

// How weights and Adam's state are held: written only when set and read back; unset, fp32-copy
// (fp32 for fp32 plans); another value is refused naming the field (which dtypes allow which is a
// plan rule: strategies/plan_rules.cc).
TEST(PlanJsonTest, MasterWeights) {
  json plan = BasePlan();
  EXPECT_EQ(MasterWeightsOf(PlanFromJson(plan, "p.json")), "fp32-copy");
  EXPECT_FALSE(PlanToJson(PlanFromJson(plan, "p.json")).contains("master_weights"));
  plan["master_weights"] = "bf16";
  const PlanSpec p = PlanFromJson(plan, "p.json");
  EXPECT_EQ(MasterWeightsOf(p), "bf16");
  EXPECT_EQ(PlanFromJson(json::parse(PlanToJson(p).dump()), "p.json").master_weights, "bf16");
  json fp32 = plan;
  fp32["dtype"] = "fp32";
  fp32["master_weights"] = "fp32";
  EXPECT_EQ(PlanFromJson(fp32, "p.json").master_weights, "fp32");
  fp32.erase("master_weights");
  EXPECT_EQ(MasterWeightsOf(PlanFromJson(fp32, "p.json")), "fp32");
  json unknown = plan;
  unknown["master_weights"] = "fp16";
  EXPECT_TRUE(Refused(unknown, "master_weights", "fp32-copy, fp32, bf16"));
}

// The attention kernel: unset is flash (unfused without flash_attention), a set one round-trips;
// another value is refused naming the field and the valid ones (that it needs flash_attention is a
// plan rule).
TEST(PlanJsonTest, AttentionKernel) {
  json plan = BasePlan();
  EXPECT_EQ(AttentionKernelOf(PlanFromJson(plan, "p.json")), "flash");
  plan["attention_kernel"] = "triton";
  const PlanSpec p = PlanFromJson(plan, "p.json");
  EXPECT_EQ(AttentionKernelOf(p), "triton");
  EXPECT_EQ(PlanFromJson(json::parse(PlanToJson(p).dump()), "p.json").attention_kernel, "triton");
  json unfused = BasePlan();
  unfused["flash_attention"] = false;
  EXPECT_EQ(AttentionKernelOf(PlanFromJson(unfused, "p.json")), "unfused");
  json unknown = plan;
  unknown["attention_kernel"] = "xformers";
  EXPECT_TRUE(Refused(unknown, "attention_kernel", "flash, triton, flex"));
}

// The expert dispatcher: alltoall or deepep, round-tripped; it deduplicates only where an expert
// axis runs all-to-alls; another value is refused naming the field and the valid ones.
TEST(PlanJsonTest, EpDispatcher) {
  json plan = BasePlan();
  plan["mesh"] = {{"data", 8}, {"expert", 8}};
  plan["ep_dispatcher"] = "deepep";
  const PlanSpec p = PlanFromJson(plan, "p.json");
  EXPECT_TRUE(DeduplicatesDispatch(p));
  EXPECT_EQ(PlanFromJson(json::parse(PlanToJson(p).dump()), "p.json").ep_dispatcher, "deepep");
  plan["mesh"] = {{"data", 64}};
  EXPECT_FALSE(DeduplicatesDispatch(PlanFromJson(plan, "p.json")));
  plan["ep_dispatcher"] = "nccl";
  try {
    PlanFromJson(plan, "p.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "p.json:/ep_dispatcher");
    EXPECT_EQ(e.valid(), "alltoall, deepep");
  }
}

// A JSON pointer into a plan names the --set key that changes it; anything else names none.
TEST(PlanJsonTest, OverrideKeyOfAPointer) {
  EXPECT_EQ(OverrideKeyOf("/fp8_recipe"), "fp8_recipe");
  EXPECT_EQ(OverrideKeyOf("/overlap/tensor"), "overlap.tensor");
  EXPECT_EQ(OverrideKeyOf("/mesh/pipeline"), "mesh.pipeline");
  EXPECT_EQ(OverrideKeyOf("/mesh"), "");
  EXPECT_EQ(OverrideKeyOf("/mesh/warp"), "");
  EXPECT_EQ(OverrideKeyOf("fp8_recipe"), "");
  EXPECT_EQ(OverrideKeyOf(""), "");
}

// repeat_kv reads and writes back; written only when set, so plans without it print as before.
TEST(PlanJsonTest, RepeatKv) {
  json plan = BasePlan();
  EXPECT_FALSE(PlanFromJson(plan, "p.json").repeat_kv);
  EXPECT_FALSE(PlanToJson(PlanFromJson(plan, "p.json")).contains("repeat_kv"));
  ApplyPlanOverride(plan, "repeat_kv=true");
  const PlanSpec p = PlanFromJson(plan, "p.json");
  EXPECT_TRUE(p.repeat_kv);
  EXPECT_TRUE(PlanFromJson(PlanToJson(p), "again").repeat_kv);
  EXPECT_EQ(PlanFieldChoices("repeat_kv"), (std::vector<std::string>{"true", "false"}));
  EXPECT_EQ(PlanFieldChoices("fp8_recipe"), Fp8RecipeNames());
  EXPECT_TRUE(PlanFieldChoices("seq_len").empty());
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
  EXPECT_EQ(p.pipeline_schedule, "interleaved-1f1b");
  EXPECT_TRUE(p.sequence_parallel);
  EXPECT_EQ(p.mesh_order.front(), "data");
  // A list field takes a,b or a JSON list, [] being the empty one.
  json lists = plan;
  ApplyPlanOverride(lists, "expert_axes=[\"tensor\",\"expert\"]");
  EXPECT_EQ(lists["expert_axes"], json::array({"tensor", "expert"}));
  ApplyPlanOverride(lists, "expert_axes=[]");
  EXPECT_EQ(lists["expert_axes"], json::array());
  ApplyPlanOverride(lists, "expert_axes=tensor,expert");
  EXPECT_EQ(lists["expert_axes"], json::array({"tensor", "expert"}));
  try {
    ApplyPlanOverride(plan, "mesh.tensr=2");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(e.problem().find("mesh.tensor"), std::string::npos);
  }
  ApplyPlanOverride(plan, "mesh.tensor=abc");
  EXPECT_THROW(PlanFromJson(plan, "p.json"), InputError);
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
