#include "core/run_cost.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace shardsim {
namespace {

// Llama 3 405B's budget (15.6T tokens) on 16,384 GPUs at 2.5 M tokens/s: the arithmetic by hand.
TEST(CostOfTrainingTest, TimeIsTokensOverRateAndDeviceHoursFollow) {
  const TrainingRun run = CostOfTraining(15.6e12, 2.5e6, 16384, 2.0);
  EXPECT_DOUBLE_EQ(run.tokens, 15.6e12);
  EXPECT_DOUBLE_EQ(run.seconds, 15.6e12 / 2.5e6);
  EXPECT_DOUBLE_EQ(run.device_hours, 15.6e12 / 2.5e6 * 16384 / 3600);
  EXPECT_TRUE(run.priced);
  EXPECT_DOUBLE_EQ(run.cost, run.device_hours * 2.0);
  const std::string text = DescribeTrainingRun(run);
  EXPECT_NE(text.find("72.22 days"), std::string::npos) << text;
  EXPECT_NE(text.find("device-hours on 16384 devices"), std::string::npos) << text;
  EXPECT_NE(text.find("cost 56.8 M at 2 per device-hour"), std::string::npos) << text;
}

TEST(CostOfTrainingTest, UnpricedRunHasNoCost) {
  const TrainingRun run = CostOfTraining(1e9, 1e5, 8, 0);
  EXPECT_FALSE(run.priced);
  EXPECT_EQ(run.cost, 0);
  EXPECT_EQ(DescribeTrainingRun(run).find("cost"), std::string::npos);
  const nlohmann::json j = TrainingRunJson(run);
  EXPECT_TRUE(j["cost"].is_null());
  EXPECT_TRUE(j["price_per_device_hour"].is_null());
  EXPECT_DOUBLE_EQ(j["seconds"].get<double>(), 1e4);
  EXPECT_DOUBLE_EQ(j["device_hours"].get<double>(), 1e4 * 8 / 3600);
}

TEST(CostOfTrainingDeathTest, BrokenCallersAbort) {
  EXPECT_DEATH(CostOfTraining(1e9, 0, 8, 0), "tokens_per_s");
  EXPECT_DEATH(CostOfTraining(1e9, 1e5, 0, 0), "devices");
}

}  // namespace
}  // namespace shardsim
