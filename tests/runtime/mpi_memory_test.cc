// `shardsim-runtime train --json` reports each rank's peak bytes per category (memory_bytes):
// run under mpiexec with 2 ranks, tiny-dense in fp32 trains 2 steps and rank 0 checks the report
// against the memory model (strategies::EstimateMemory) of the same model and plan: parameters,
// gradients and optimizer state within 10% (they are the same numbers of fp32 elements), and the
// saved activations within 10% (the runtime keeps Korthikanti's set per layer, plus the head's
// final-norm tensors and the attention's log-sum-exp, which the model leaves out).
#include <mpi.h>

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/inputs.h"
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

// Trains tiny-dense for 2 steps with `plan` (JSON) on every rank, and checks on rank 0 every
// rank's report against the memory model of its stage.
void ExpectReportMatchesModel(const nlohmann::json& plan) {
  const std::string path = ::testing::TempDir() + "memory_plan_rank" + std::to_string(Rank()) + ".json";
  std::ofstream(path) << plan.dump();
  const strategies::MemoryReport model = strategies::EstimateMemory(strategies::BuildStep(LoadModel("tiny-dense"), LoadPlan(path, {})));
  TrainCommandOptions options;
  options.model = "tiny-dense";
  options.plan = path;
  options.steps = 2;
  options.json = true;
  if (Rank() == 0) ::testing::internal::CaptureStdout();
  RunTrainCommand(options);
  std::filesystem::remove(path);
  if (Rank() != 0) return;
  const nlohmann::json report = nlohmann::json::parse(::testing::internal::GetCapturedStdout());
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

TEST(MpiMemoryTest, DataParallelReportMatchesTheMemoryModel) {
  if (WorldSize() != 2) GTEST_SKIP() << "needs 2 ranks";
  ExpectReportMatchesModel(Plan({{"data", 2}}));
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

}  // namespace
}  // namespace shardsim::runtime
