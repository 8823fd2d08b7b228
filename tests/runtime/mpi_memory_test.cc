// `shardsim-runtime train --json` reports each rank's peak bytes per category (memory_bytes):
// run under mpiexec with 2 ranks, tiny-dense in fp32 trains 2 steps and rank 0 checks the report
// against the memory model (strategies::EstimateMemory) of the same model and plan: parameters,
// gradients and optimizer state within 10% (they are the same numbers of fp32 elements), and the
// saved activations within 10% (the runtime keeps Korthikanti's set per layer, plus the head's
// final-norm tensors and the attention's log-sum-exp, which the model leaves out).
#include <mpi.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/inputs.h"
#include "core/model_json.h"
#include "core/plan_json.h"
#include "runtime/train_command.h"
#include "strategies/build_step.h"
#include "strategies/memory_model.h"

namespace shardsim::runtime {
namespace {

int Rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int WorldSize() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

// Trains `model` (a preset name or a model JSON) with `plan` for 2 steps on every rank; returns
// the report of `train --json` on rank 0 (null elsewhere).
nlohmann::json Train(const std::string& model, const nlohmann::json& plan) {
  const std::string path = ::testing::TempDir() + "memory_plan_rank" + std::to_string(Rank()) + ".json";
  std::ofstream(path) << plan.dump();
  TrainCommandOptions options;
  options.model = model;
  options.plan = path;
  options.steps = 2;
  options.json = true;
  if (Rank() == 0) ::testing::internal::CaptureStdout();
  RunTrainCommand(options);
  std::filesystem::remove(path);
  return Rank() == 0 ? nlohmann::json::parse(::testing::internal::GetCapturedStdout()) : nlohmann::json();
}

// Trains tiny-dense for 2 steps with `plan` (JSON) on every rank, and checks on rank 0 every
// rank's report against the memory model of its stage.
void ExpectReportMatchesModel(const nlohmann::json& plan) {
  const nlohmann::json report = Train("tiny-dense", plan);
  if (Rank() != 0) return;
  const strategies::MemoryReport model =
      strategies::EstimateMemory(strategies::BuildStep(LoadModel("tiny-dense"), PlanFromJson(plan, "the test's plan")));
  const nlohmann::json& ranks = report.at("memory_bytes");
  ASSERT_EQ(ranks.size(), static_cast<size_t>(WorldSize()));
  for (size_t r = 0; r < ranks.size(); ++r) {
    const nlohmann::json& got = ranks[r];
    EXPECT_EQ(got.at("rank").get<int>(), static_cast<int>(r));
    const int64_t stage = got.at("stage").get<int64_t>();
    ASSERT_GE(stage, 0);
    ASSERT_LT(stage, static_cast<int64_t>(model.stages.size()));
    const strategies::MemoryBreakdown& want = model.stages[static_cast<size_t>(stage)];
    const std::string where = "rank " + std::to_string(r) + " stage " + std::to_string(stage) + " of " + plan.dump();
    auto near = [&](const char* key, double model_bytes) {
      const double runtime_bytes = got.at(key).get<double>();
      ASSERT_GT(model_bytes, 0) << where << " " << key;
      EXPECT_LE(std::abs(runtime_bytes / model_bytes - 1), 0.10) << where << " " << key << ": runtime " << runtime_bytes << " bytes, model " << model_bytes;
    };
    near("params", want.params);
    near("grads", want.grads);
    near("optimizer", want.optimizer);
    near("activations", want.activations);
    // The states are held throughout, all at once; the peak total is no more than the peaks' sum.
    const double states = got.at("params").get<double>() + got.at("grads").get<double>() + got.at("optimizer").get<double>();
    const double peaks = states + got.at("activations").get<double>() + got.at("buffers").get<double>();
    EXPECT_GE(got.at("peak_total").get<double>(), states) << where;
    EXPECT_LE(got.at("peak_total").get<double>(), peaks) << where;
    EXPECT_GT(got.at("buffers").get<double>(), 0) << where;
  }
}

nlohmann::json Plan(const nlohmann::json& mesh) {
  return {{"mesh", mesh}, {"global_batch_size", 8}, {"seq_len", 256}, {"dtype", "fp32"}};
}

// The report's step time: the median of the steps after the first (the warm-up's first touches
// and cold caches are not a step's time); of the only step when there is one.
TEST(TrainReportTest, MedianStepTimeLeavesOutTheWarmUp) {
  EXPECT_DOUBLE_EQ(MedianStepTime({9.0, 1.0, 3.0, 2.0}), 2.0);
  EXPECT_DOUBLE_EQ(MedianStepTime({9.0, 1.0, 3.0}), 2.0);
  EXPECT_DOUBLE_EQ(MedianStepTime({5.0}), 5.0);
  EXPECT_DOUBLE_EQ(MedianStepTime({}), 0.0);
}

TEST(MpiMemoryTest, DataParallelReportMatchesTheMemoryModel) {
  if (WorldSize() != 2) GTEST_SKIP() << "needs 2 ranks";
  ExpectReportMatchesModel(Plan({{"data", 2}}));
}

// Expert parallelism with dropless routing: each rank reports the routed rows its activations
// held at their peak (received by its experts, sent by its tokens), and the memory model at that
// routing is within 10% of its activations (validation/compare.h evaluates it so).
TEST(MpiMemoryTest, ExpertRanksReportTheRoutingTheirActivationsHeld) {
  if (WorldSize() != 2) GTEST_SKIP() << "needs 2 ranks";
  const nlohmann::json plan = Plan({{"expert", 2}});
  const nlohmann::json report = Train("tiny-moe", plan);
  if (Rank() != 0) return;
  const strategies::StepProgram program = strategies::BuildStep(LoadModel("tiny-moe"), PlanFromJson(plan, "the test's plan"));
  const double balanced = strategies::EstimateMemory(program).stages[0].activations;
  const double row = strategies::ExpertRowActivationBytes(program.model, program.plan);
  for (const nlohmann::json& got : report.at("memory_bytes")) {
    ASSERT_TRUE(got.contains("expert_rows_at_activation_peak")) << got.dump();
    const int64_t received = got["expert_rows_at_activation_peak"].at("received").get<int64_t>();
    const int64_t sent = got["expert_rows_at_activation_peak"].at("sent").get<int64_t>();
    // 256 tokens x top-2 per MoE layer, 4 layers: the copies one micro-batch's tokens route.
    EXPECT_EQ(sent, 4 * 256 * 2) << got.dump();
    EXPECT_GT(received, 0) << got.dump();
    const double measured = got.at("activations").get<double>();
    EXPECT_LE(std::abs((balanced + static_cast<double>(received - sent) * row) / measured - 1), 0.10) << got.dump();
  }
  // The routing's load on the expert ranks: the busiest one's rows over the mean, above balanced
  // (1: an untrained router never splits every pass evenly) and at most everything on one rank
  // (the group's 2 ranks).
  ASSERT_TRUE(report.contains("expert_load_imbalance")) << report.dump();
  const double load = report["expert_load_imbalance"].get<double>();
  EXPECT_GT(load, 1.0);
  EXPECT_LE(load, 2.0);
}

TEST(MpiMemoryTest, ZeroOneShardsTheOptimizerStateAsTheModelDoes) {
  if (WorldSize() != 2) GTEST_SKIP() << "needs 2 ranks";
  nlohmann::json plan = Plan({{"data", 2}});
  plan["zero_stage"] = 1;
  ExpectReportMatchesModel(plan);
}

TEST(MpiMemoryTest, PipelineStagesMatchTheirStageOfTheModel) {
  if (WorldSize() != 2) GTEST_SKIP() << "needs 2 ranks";
  nlohmann::json plan = Plan({{"pipeline", 2}});
  plan["pipeline_schedule"] = "gpipe";  // every micro-batch in flight on both stages
  ExpectReportMatchesModel(plan);
}

// Trains `model` with `plan` for 2 steps on every rank; returns, on rank 0, the largest peak total
// of the runtime's accounting over the ranks and the largest growth of a rank's resident set (the
// report's peak over the steps less the resident set before the trainer was built).
std::pair<double, double> PeakBytes(const std::string& model, const nlohmann::json& plan) {
  const nlohmann::json report = Train(model, plan);
  if (Rank() != 0) return {0, 0};
  double peak = 0, growth = 0;
  for (const nlohmann::json& r : report.at("memory_bytes")) {
    peak = std::max(peak, r.at("peak_total").get<double>());
    if (r.contains("resident_peak")) {
      growth = std::max(growth, r.at("resident_peak").get<double>() - r.at("resident_base").get<double>());
    }
  }
  return {peak, growth};
}

// FSDP over 4 ranks with ZeRO-3 holds a quarter of the parameters, gradients and optimizer
// state, and each layer's gathered parameters and full gradients only while it runs: its peak per
// rank falls by at least 2.5x against plain data parallelism over 4 (ZeRO-0), by the runtime's
// accounting and, as a cross-check, by the growth of the process's resident set (which also holds
// MPI's and the allocator's own memory). A deep, narrow model, so that one layer is a small part
// of the whole.
TEST(MpiMemoryTest, FsdpZeroThreeFreesWhatItShards) {
  if (WorldSize() != 4) GTEST_SKIP() << "needs 4 ranks";
  ModelSpec m = LoadModel("tiny-dense");
  m.name = "deep-narrow";
  m.num_layers = 64;
  m.hidden_size = 128;
  m.num_heads = 4;
  m.num_kv_heads = 4;
  m.head_dim = 32;
  m.ffn_hidden_size = 512;
  const std::string model = ::testing::TempDir() + "memory_model_rank" + std::to_string(Rank()) + ".json";
  std::ofstream(model) << ModelToJson(m).dump();
  nlohmann::json plan = {{"global_batch_size", 4}, {"seq_len", 32}, {"dtype", "fp32"}};
  plan["mesh"] = {{"fsdp", 4}};
  plan["zero_stage"] = 3;
  const auto [fsdp, fsdp_rss] = PeakBytes(model, plan);
  plan["mesh"] = {{"data", 4}};
  plan["zero_stage"] = 0;
  const auto [data, data_rss] = PeakBytes(model, plan);
  std::filesystem::remove(model);
  if (Rank() != 0) return;
  std::printf("peak per rank: data 4 ZeRO-0 %.1f MiB, fsdp 4 ZeRO-3 %.1f MiB (%.2fx); resident-set growth %.1f MiB vs %.1f MiB (%.2fx)\n",
              data / 1048576, fsdp / 1048576, data / fsdp, data_rss / 1048576, fsdp_rss / 1048576, data_rss / fsdp_rss);
  EXPECT_GE(data / fsdp, 2.5) << "runtime accounting: data " << data << " bytes, fsdp " << fsdp;
#if !defined(__SANITIZE_ADDRESS__)  // AddressSanitizer's allocator keeps freed memory in quarantine
  if (fsdp_rss > 0) {
    // The resident set also holds what the accounting does not see (MPI's collective buffers, the
    // heap's and the page pool's slack, as a caching allocator's reserved memory): 2.24x to 2.52x
    // over runs on a loaded 2-core machine (2026-11-26). Not freeing what FSDP shards gives ~1x.
    EXPECT_GE(data_rss / fsdp_rss, 2.0) << "resident set: data " << data_rss << " bytes, fsdp " << fsdp_rss;
  }
#endif
}

}  // namespace
}  // namespace shardsim::runtime
