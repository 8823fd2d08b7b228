// `shardsim calibrate --from-runs` on a small group: with too few runs to fit each efficiency the
// rates move as one scale; the report says so, when even that is weakly determined, and that with
// no more runs than efficiencies it moved it can match them exactly (its RMS then says nothing).
#include <algorithm>

#include "tests/cli/cli_test_util.h"

namespace shardsim::cli_test {
namespace {

using nlohmann::json;

class CliCalibrateRunsTest : public CliTest {};

json MeasuredRun(const std::string& id, int64_t batch, double seconds, const char* split, int64_t seq = 4096) {
  const json plan = {{"mesh", {{"data", 8}}}, {"global_batch_size", batch}, {"seq_len", seq}};
  return {{"id", id}, {"model", "llama3-8b"}, {"cluster", "dgx-h100:8"}, {"plan", plan}, {"measured", {{"step_time_s", seconds}}}, {"split", split}};
}

TEST_F(CliCalibrateRunsTest, FewFitRunsAreFlaggedAndAnExactFitSaysSo) {
  // One bf16 fit run: matmul and attention both act on it, two efficiencies for one time; too few
  // to fit each, so they move as one scale, and one run for that one figure is still too few.
  const json one = {{"runs", json::array({MeasuredRun("a", 16, 1.1, "fit"), MeasuredRun("b", 32, 2.3, "test")})}};
  const CliResult exact = RunShardsim({"calibrate", "--from-runs", WriteJson("one.json", one)});
  ASSERT_EQ(exact.exit_code, 0) << exact.err;
  EXPECT_NE(exact.out.find("note: 1 fit run for 2 efficiencies acting on them (fitting each needs 4): matmul, attention fitted as one scale (x"),
            std::string::npos) << exact.out;
  EXPECT_NE(exact.out.find("note: fitted on 1 run for 1 figure (their common scale): the figures are weakly determined"), std::string::npos) << exact.out;
  EXPECT_NE(exact.out.find("; no more runs than fitted figures (1)"), std::string::npos) << exact.out;
  // Three fit runs for the two: still fewer than twice as many, so one scale, which they determine.
  json runs = json::array({MeasuredRun("a", 16, 1.1, "fit"), MeasuredRun("b", 32, 2.3, "fit"), MeasuredRun("c", 64, 4.4, "fit")});
  const std::string three_path = WriteJson("three.json", {{"runs", runs}});
  const CliResult three = RunShardsim({"calibrate", "--from-runs", three_path});
  ASSERT_EQ(three.exit_code, 0) << three.err;
  EXPECT_NE(three.out.find("note: 3 fit runs for 2 efficiencies acting on them (fitting each needs 4)"), std::string::npos) << three.out;
  EXPECT_EQ(three.out.find("weakly determined"), std::string::npos) << three.out;
  json report;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"calibrate", "--from-runs", three_path, "--json"}), &report));
  EXPECT_TRUE(report["groups"][0]["determined"].get<bool>());
  EXPECT_TRUE(report["groups"][0]["tied"].get<bool>());
  // The scale keeps the starts' ratio.
  double matmul = 0, attention = 0, matmul_start = 0, attention_start = 0;
  for (const json& f : report["groups"][0]["parameters"]) {
    if (f["name"] == "matmul") matmul = f["value"].get<double>(), matmul_start = f["start"].get<double>();
    if (f["name"] == "attention") attention = f["value"].get<double>(), attention_start = f["start"].get<double>();
  }
  ASSERT_GT(attention_start, 0);
  EXPECT_NE(matmul, matmul_start);
  EXPECT_NEAR(matmul / attention, matmul_start / attention_start, 1e-9);
  // Four runs at one sequence length (their batches differ) count as enough to fit each, but they
  // cannot tell matmul from attention: no standard error, a note, not determined.
  runs.push_back(MeasuredRun("d", 8, 0.6, "fit"));
  const CliResult alike = RunShardsim({"calibrate", "--from-runs", WriteJson("alike.json", {{"runs", runs}})});
  ASSERT_EQ(alike.exit_code, 0) << alike.err;
  EXPECT_NE(alike.out.find("note: these fit runs do not tell the fitted figures apart"), std::string::npos) << alike.out;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"calibrate", "--from-runs", WriteJson("alike.json", {{"runs", runs}}), "--json"}), &report));
  EXPECT_FALSE(report["groups"][0]["determined"].get<bool>());
  // Four at sequence lengths of 2K to 16K tell them apart: no note, determined, not tied.
  runs = json::array({MeasuredRun("a", 128, 3.6, "fit", 2048), MeasuredRun("b", 64, 3.9, "fit", 4096), MeasuredRun("c", 32, 4.3, "fit", 8192),
                      MeasuredRun("d", 16, 5.2, "fit", 16384)});
  const CliResult enough = RunShardsim({"calibrate", "--from-runs", WriteJson("four.json", {{"runs", runs}})});
  ASSERT_EQ(enough.exit_code, 0) << enough.err;
  EXPECT_EQ(enough.out.find("note: "), std::string::npos) << enough.out;
  EXPECT_NE(enough.out.find("start: its cluster's efficiencies, fitted to published runs (data/fitted_presets.json"), std::string::npos) << enough.out;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"calibrate", "--from-runs", WriteJson("four.json", {{"runs", runs}}), "--json"}), &report));
  EXPECT_TRUE(report["groups"][0]["determined"].get<bool>());
  EXPECT_FALSE(report["groups"][0]["tied"].get<bool>());
  // Four runs for two figures leave two degrees of freedom: each fitted figure has its error.
  for (const json& f : report["groups"][0]["parameters"]) {
    if (f["fit_runs"].get<int64_t>() > 0 && !f["at_bound"].get<bool>()) {
      EXPECT_GT(f["relative_error"].get<double>(), 0) << f;
    }
  }
  // One run for its one scale is an exact fit: no error to give, in the JSON or the text.
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"calibrate", "--from-runs", WriteJson("one.json", one), "--json"}), &report));
  for (const json& f : report["groups"][0]["parameters"]) EXPECT_TRUE(f["relative_error"].is_null()) << f;
  EXPECT_EQ(exact.out.find("+/-"), std::string::npos) << exact.out;
  // Fit runs far slower than any efficiency in bounds explains: the figures stop at their lower
  // bounds, and the report says they are a set standing in for what the model lacks.
  const json slow = {{"runs", json::array({MeasuredRun("a", 16, 110.0, "fit"), MeasuredRun("b", 32, 230.0, "fit"), MeasuredRun("c", 64, 440.0, "fit")})}};
  const CliResult bounded = RunShardsim({"calibrate", "--from-runs", WriteJson("slow.json", slow)});
  ASSERT_EQ(bounded.exit_code, 0) << bounded.err;
  EXPECT_NE(bounded.out.find("(at bound)"), std::string::npos) << bounded.out;
  EXPECT_NE(bounded.out.find("stopped at a bound"), std::string::npos) << bounded.out;
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

// A run's names and provenance are checked where they would mislead: a group naming a path, a
// framework one typo from a profiled one, a peak above the device's memory, a preset the run
// names (the error names the run's field, not a flag); and an empty --from-runs is refused
// rather than read as absent (which would measure this machine instead).
TEST_F(CliCalibrateRunsTest, RunNamesAndEmptyValuesAreChecked) {
  auto refused = [&](json run, const std::string& field, const std::string& words) {
    const CliResult r = RunShardsim({"calibrate", "--from-runs", WriteJson("bad.json", {{"runs", json::array({run})}}), "--no-fit"});
    EXPECT_EQ(r.exit_code, 2) << field << ": " << r.out;
    EXPECT_NE(r.err.find("bad.json:/runs/0"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("/" + field + ":"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(words), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  };
  json run = MeasuredRun("a", 16, 1.1, "test");
  run["group"] = "../elsewhere";
  refused(run, "group", "path separator");
  run["group"] = ".hidden";
  refused(run, "group", "starts with a dot");
  run = MeasuredRun("a\tb", 16, 1.1, "test");
  refused(run, "id", "control character");
  run = MeasuredRun("a", 16, 1.1, "test");
  run["framework"] = "megatron-cor";
  refused(run, "framework", "did you mean 'megatron-core'");
  run["framework"] = "composer";  // another framework's name is provenance
  const CliResult provenance = RunShardsim({"calibrate", "--from-runs", WriteJson("ok.json", {{"runs", json::array({run})}}), "--no-fit"});
  EXPECT_EQ(provenance.exit_code, 0);
  EXPECT_NE(provenance.out.find("Frameworks named as provenance only (no profile: those runs are costed as their plans say): composer"), std::string::npos)
      << provenance.out;
  json provenance_json;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"calibrate", "--from-runs", PathOf("ok.json"), "--no-fit", "--json"}), &provenance_json));
  EXPECT_EQ(provenance_json["provenance_only_frameworks"], json::array({"composer"}));
  run = MeasuredRun("a", 16, 1.1, "test");
  run["peak_memory_gib"] = 5000;
  refused(run, "peak_memory_gib", "out of range");
  run = MeasuredRun("a", 16, 1.1, "test");
  run["model"] = "llama9-1t";
  refused(run, "model", "llama9-1t");
  const CliResult empty = RunShardsim({"calibrate", "--from-runs", ""});
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_NE(empty.err.find("--from-runs: is given an empty value"), std::string::npos) << empty.err;
}

// A group without fit runs is not reported as fitted: its test runs use the catalogue, said so,
// and statistics over no runs are dashes (JSON: the count alone).
TEST_F(CliCalibrateRunsTest, AGroupWithoutFitRunsSaysItWasNotFitted) {
  const json runs = {{"runs", json::array({MeasuredRun("a", 16, 1.1, "test"), MeasuredRun("b", 32, 2.3, "test")})}};
  const CliResult text = RunShardsim({"calibrate", "--from-runs", WriteJson("tests_only.json", runs)});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("not fitted: the group has no fit runs"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("RMS of log"), std::string::npos) << text.out;
  json report;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"calibrate", "--from-runs", WriteJson("tests_only.json", runs), "--json"}), &report));
  EXPECT_TRUE(report["groups"][0]["converged"].is_null());
  EXPECT_TRUE(report["groups"][0]["iterations"].is_null());
  EXPECT_FALSE(report["groups"][0]["fitted"].get<bool>());
  EXPECT_TRUE(report["groups"][0]["rms_log_error"].is_null());
  EXPECT_EQ(report["summary"]["fit"], json({{"runs", 0}}));
}

// calibrate --from-runs costs each run as its framework runs it: a torchtitan run that leaves the
// loss and the gradient dtype unset is predicted as `estimate` predicts the plan with
// framework=torchtitan (eager loss, fp32 reductions, torchtitan's overlaps), not as the bare plan.
TEST_F(CliCalibrateRunsTest, CostsEachRunAsItsFrameworkRunsIt) {
  const json plan = {{"mesh", {{"fsdp", 8}}}, {"global_batch_size", 16}, {"seq_len", 8192}, {"micro_batch_size", 2}, {"recompute", "selective-op"}};
  const json runs = {{"runs", json::array({{{"id", "tt"}, {"model", "llama3-8b"}, {"cluster", "dgx-h100:8"}, {"plan", plan},
                                             {"framework", "torchtitan"}, {"measured", {{"step_time_s", 2.0}}}}})}};
  json calibrated, framework, bare;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"calibrate", "--from-runs", WriteJson("runs.json", runs), "--no-fit", "--json"}), &calibrated));
  const std::string plan_path = WriteJson("plan.json", plan);
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--plan", plan_path, "--set", "framework=torchtitan", "--json"}), &framework));
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"estimate", "--model", "llama3-8b", "--cluster", "dgx-h100:8", "--plan", plan_path, "--json"}), &bare));
  EXPECT_FALSE(calibrated["groups"][0]["fitted"].get<bool>()) << "--no-fit: no fit ran, though the run is a fit run";
  EXPECT_TRUE(calibrated["groups"][0]["converged"].is_null());
  const json& run = calibrated["groups"][0]["runs"][0];
  EXPECT_NEAR(run["predicted_step_time_s"].get<double>(), framework["step_time_s"].get<double>(), 1e-9);
  const double gib = 1024.0 * 1024 * 1024;
  EXPECT_NEAR(run["predicted_memory_gib"].get<double>(), framework["memory"]["peak_bytes_per_device"].get<double>() / gib, 1e-6);
  EXPECT_GT(framework["memory"]["peak_bytes_per_device"].get<double>(), bare["memory"]["peak_bytes_per_device"].get<double>() + 5 * gib)
      << "torchtitan's eager loss holds more than the fused default";
  EXPECT_FALSE(run["predicted_above_hbm"].get<bool>());
}

// A run predicted above its device's HBM is marked so, in the JSON and the text.
TEST_F(CliCalibrateRunsTest, RunsPredictedAboveTheirHbmAreMarked) {
  const json unsharded = {{"mesh", {{"data", 8}}}, {"global_batch_size", 8}, {"seq_len", 4096}};
  const json over = {{"runs", json::array({{{"id", "ddp70b"}, {"model", "llama3-70b"}, {"cluster", "dgx-h100:8"}, {"plan", unsharded},
                                             {"measured", {{"step_time_s", 20.0}}}}})}};
  const std::string over_path = WriteJson("over.json", over);
  json calibrated;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"calibrate", "--from-runs", over_path, "--no-fit", "--json"}), &calibrated));
  const json& run = calibrated["groups"][0]["runs"][0];
  EXPECT_TRUE(run["predicted_above_hbm"].get<bool>());
  EXPECT_GT(run["predicted_memory_gib"].get<double>(), run["hbm_gib"].get<double>());
  EXPECT_NEAR(run["hbm_gib"].get<double>(), 81559.0 / 1024, 0.01) << "the H100's HBM as the cluster spec gives it";
  EXPECT_EQ(calibrated["summary"]["predicted_above_hbm"], 1);
  const CliResult text = RunShardsim({"calibrate", "--from-runs", over_path, "--no-fit"});
  ASSERT_TRUE(text.exited && text.exit_code == 0) << text.err;
  EXPECT_NE(text.out.find(" > 79.6 HBM"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("1 of the 1 runs are predicted above their device's HBM"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace shardsim::cli_test
