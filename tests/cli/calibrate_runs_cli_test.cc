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

}  // namespace
}  // namespace shardsim::cli_test
