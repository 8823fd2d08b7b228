// `shardsim calibrate --from-runs` on a small group: the report says when the fit had too few runs
// to determine its figures, and that with no more runs than efficiencies it moved it can match them
// exactly (its RMS then says nothing).
#include "tests/cli/cli_test_util.h"

namespace shardsim::cli_test {
namespace {

using nlohmann::json;

class CliCalibrateRunsTest : public CliTest {};

json MeasuredRun(const std::string& id, int64_t batch, double seconds, const char* split) {
  const json plan = {{"mesh", {{"data", 8}}}, {"global_batch_size", batch}, {"seq_len", 4096}};
  return {{"id", id}, {"model", "llama3-8b"}, {"cluster", "dgx-h100:8"}, {"plan", plan}, {"measured", {{"step_time_s", seconds}}}, {"split", split}};
}

TEST_F(CliCalibrateRunsTest, FewFitRunsAreFlaggedAndAnExactFitSaysSo) {
  // One bf16 fit run: matmul and attention both act on it, two efficiencies for one time.
  const json one = {{"runs", json::array({MeasuredRun("a", 16, 1.1, "fit"), MeasuredRun("b", 32, 2.3, "test")})}};
  const CliResult exact = RunShardsim({"calibrate", "--from-runs", WriteJson("one.json", one)});
  ASSERT_EQ(exact.exit_code, 0) << exact.err;
  EXPECT_NE(exact.out.find("note: fitted on 1 run only: the figures are weakly determined; no more runs than fitted efficiencies (2)"), std::string::npos)
      << exact.out;
  // Three fit runs (kFewFitRuns): determined enough, no note.
  const json three = {{"runs", json::array({MeasuredRun("a", 16, 1.1, "fit"), MeasuredRun("b", 32, 2.3, "fit"), MeasuredRun("c", 64, 4.4, "fit"),
                                             MeasuredRun("d", 8, 0.6, "test")})}};
  const CliResult enough = RunShardsim({"calibrate", "--from-runs", WriteJson("three.json", three)});
  ASSERT_EQ(enough.exit_code, 0) << enough.err;
  EXPECT_EQ(enough.out.find("note: fitted on"), std::string::npos) << enough.out;
}

// The summaries carry the errors' direction: one test run measured far slower than any
// prediction (predicted too fast), one far faster, each JSON summary and the text table say so.
TEST_F(CliCalibrateRunsTest, SummariesSayWhichWayThePredictionsErr) {
  const json runs = {{"runs", json::array({MeasuredRun("slow", 16, 1000.0, "test"), MeasuredRun("fast", 16, 0.001, "test"),
                                            MeasuredRun("fit", 16, 1.0, "fit")})}};
  json report;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"calibrate", "--from-runs", WriteJson("two_ways.json", runs), "--no-fit", "--json"}), &report));
  const json& test = report["summary"]["test"];
  EXPECT_EQ(test["runs"], 2);
  EXPECT_EQ(test["predicted_below"], 1);  // the run measured at 1000 s
  EXPECT_EQ(test["within_10_percent"], 0);
  EXPECT_GT(test["median_abs_error"].get<double>(), 0.5);
  EXPECT_LE(test["median_error"].get<double>(), test["median_abs_error"].get<double>());
  const CliResult text = RunShardsim({"calibrate", "--from-runs", WriteJson("two_ways.json", runs), "--no-fit"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("predicted too fast  within 10%"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace shardsim::cli_test
