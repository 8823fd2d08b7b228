// `calibrate --from-runs`'s pieces: the runs file reader's errors, the error statistics, and the
// fit recovering efficiencies that generated a set of step times.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <string>

#include <nlohmann/json.hpp>

#include "core/cluster_json.h"
#include "core/error.h"
#include "core/inputs.h"
#include "core/model_presets.h"
#include "core/plan_json.h"
#include "validation/measured_runs.h"
#include "validation/runs_fit.h"
#include "validation/runs_report.h"

namespace shardsim::validation {
namespace {

using nlohmann::json;

std::string WriteTemp(const std::string& name, const json& value) {
  const std::string path = testing::TempDir() + name;
  std::ofstream(path) << value.dump(1);
  return path;
}

json RunJson(const std::string& id, int64_t seq, const std::string& cluster) {
  return {{"id", id},
          {"model", "llama3-8b"},
          {"cluster", cluster},
          {"plan", {{"global_batch_size", 64}, {"seq_len", seq}, {"dtype", "bf16"}, {"micro_batch_size", 1}, {"mesh", {{"data", 8}}}}},
          {"measured", {{"step_time_s", 10.0}}}};
}

// The runs of `path` with the step times their own (truth) cluster predicts, then pointed at the
// preset dgx-h100:8 (at its fitted defaults) for the fit to find that cluster's efficiencies again.
std::vector<PublishedRun> TimedOnTheirCluster(const std::string& path) {
  std::vector<PublishedRun> runs = ReadMeasuredRuns(path);
  const std::vector<GroupFit> generated = FitRuns(runs, {.fit = false, .source_path = "generated"});
  EXPECT_EQ(generated.size(), 1u);
  if (generated.size() != 1) return runs;
  for (size_t i = 0; i < runs.size(); ++i) {
    runs[i].step_time_s = generated[0].results[i].predicted_s;
    runs[i].cluster = "dgx-h100:8";
  }
  return runs;
}

// A runs file of `seqs`-long runs on a dgx-h100:8 whose matmul and attention efficiencies are
// these (the measured times still to be made: TimedOnTheirCluster).
std::string RunsOnTruth(const std::string& name, double matmul, double attention, std::initializer_list<int64_t> seqs) {
  ClusterSpec truth = LoadCluster("dgx-h100:8");
  truth.efficiency.matmul = matmul;
  truth.efficiency.attention = attention;
  const std::string truth_path = WriteTemp(name + ".cluster.json", ClusterToJson(truth));
  json list = json::array();
  for (int64_t seq : seqs) list.push_back(RunJson(name + std::to_string(seq), seq, truth_path));
  return WriteTemp(name + ".json", {{"runs", list}});
}

TEST(MeasuredRunsTest, ReadsTheShippedRunsFile) {
  const std::vector<PublishedRun> runs = ReadMeasuredRuns(std::string(SHARDSIM_SOURCE_DIR) + "/tests/data/measured_runs.json");
  EXPECT_GT(runs.size(), 150u);
  int64_t test = 0;
  for (const PublishedRun& r : runs) {
    test += r.fit ? 0 : 1;
    EXPECT_GT(r.step_time_s, 0) << r.id;
  }
  EXPECT_GT(test, 50);
}

TEST(MeasuredRunsTest, DuplicateIdNamesTheRun) {
  const std::string path = WriteTemp("dup.json", {{"runs", {RunJson("a", 4096, "dgx-h100:8"), RunJson("a", 8192, "dgx-h100:8")}}});
  try {
    ReadMeasuredRuns(path);
    FAIL() << "duplicate ids accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/runs/1/id"), std::string::npos) << e.what();
  }
}

TEST(MeasuredRunsTest, MissingMeasurementAndUnknownKeysAreRefused) {
  json run = RunJson("a", 4096, "dgx-h100:8");
  run.erase("measured");
  EXPECT_THROW(ReadMeasuredRuns(WriteTemp("missing.json", {{"runs", {run}}})), InputError);
  json extra = RunJson("a", 4096, "dgx-h100:8");
  extra["measurd"] = 1;
  EXPECT_THROW(ReadMeasuredRuns(WriteTemp("extra.json", {{"runs", {extra}}})), InputError);
  json both = RunJson("a", 4096, "dgx-h100:8");
  both["measured"]["tokens_per_s_per_device"] = 1000;
  EXPECT_THROW(ReadMeasuredRuns(WriteTemp("both.json", {{"runs", {both}}})), InputError);
}

TEST(RunsReportTest, MedianAndNearestRankP90) {
  const ErrorStats s = StatsOf({0.10, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09, 0.01});
  EXPECT_EQ(s.runs, 10);
  EXPECT_NEAR(s.median, 0.055, 1e-12);  // even count: the mean of the middle two
  EXPECT_NEAR(s.p90, 0.09, 1e-12);
}

// Signed errors: the absolute statistics as before, the median keeping its sign, and the counts
// of runs predicted below their measurement and within 10% of it.
TEST(RunsReportTest, SignedErrorsShowTheDirection) {
  const ErrorStats s = StatsOf({-0.30, -0.05, 0.02, -0.12, 0.10});
  EXPECT_EQ(s.runs, 5);
  EXPECT_NEAR(s.median, 0.10, 1e-12);
  EXPECT_NEAR(s.median_signed, -0.05, 1e-12);
  EXPECT_EQ(s.below, 3);
  EXPECT_EQ(s.within_tenth, 3);  // -0.05, 0.02 and 0.10 (inclusive)
  const ErrorStats none = StatsOf({});
  EXPECT_EQ(none.runs, 0);
  EXPECT_EQ(none.below, 0);
}

// Step times predicted on a cluster whose matmul and attention efficiencies are known: fitting the
// preset to them finds those efficiencies again.
TEST(RunsFitTest, RecoversTheEfficienciesThatMadeTheTimes) {
  std::vector<PublishedRun> runs = TimedOnTheirCluster(RunsOnTruth("truth", 0.55, 0.35, {2048, 4096, 8192, 16384, 32768, 65536}));
  const std::vector<GroupFit> fitted = FitRuns(runs, {.fit = true, .source_path = "generated"});
  ASSERT_EQ(fitted.size(), 1u);
  for (const FittedParameter& p : fitted[0].parameters) {
    if (p.name == "matmul") {
      EXPECT_NEAR(p.value, 0.55, 0.01);
    } else if (p.name == "attention") {
      EXPECT_NEAR(p.value, 0.35, 0.01);
    }
    // Times the model made itself leave no scatter: a (near) zero relative error where fitted.
    if (p.fit_runs > 0) {
      EXPECT_LT(p.relative_error, 1e-3) << p.name;
    }
  }
  for (const RunResult& r : fitted[0].results) EXPECT_NEAR(r.error, 0, 0.01) << r.run->id;
}

// Times made with the backward passes at 0.6 of the forward rates, by runs that redo different
// amounts of forward work (recomputation none and full): the fit finds the share and the forward
// matmul rate again. Runs that all redo the same cannot tell the two apart: there `backward` is
// not fitted and keeps the cluster's own (dgx-h100:8's fitted default).
TEST(RunsFitTest, RecoversTheBackwardShareWhereRecomputationDiffers) {
  ClusterSpec truth = LoadCluster("dgx-h100:8");
  truth.efficiency.matmul = 0.7;
  truth.efficiency.attention = 0.35;
  truth.efficiency.backward = 0.6;
  const std::string truth_path = WriteTemp("backward.cluster.json", ClusterToJson(truth));
  json list = json::array();
  for (int64_t seq : {2048, 8192, 32768}) {
    for (const char* recompute : {"none", "full"}) {
      json run = RunJson(std::string(recompute) + std::to_string(seq), seq, truth_path);
      run["plan"]["recompute"] = recompute;
      list.push_back(run);
    }
  }
  std::vector<PublishedRun> runs = TimedOnTheirCluster(WriteTemp("backward.json", {{"runs", list}}));
  auto value = [](const GroupFit& g, const std::string& name) {
    for (const FittedParameter& p : g.parameters) {
      if (p.name == name) return p;
    }
    return FittedParameter{};
  };
  const GroupFit fitted = FitRuns(runs, {.fit = true, .source_path = "generated"})[0];
  EXPECT_NEAR(value(fitted, "backward").value, 0.6, 0.02);
  EXPECT_NEAR(value(fitted, "matmul").value, 0.7, 0.02);
  for (const RunResult& r : fitted.results) EXPECT_NEAR(r.error, 0, 0.01) << r.run->id;
  EXPECT_NEAR(ClusterFromJson(ClusterToJson(fitted.cluster), "fitted").efficiency.backward, 0.6, 0.02);

  std::vector<PublishedRun> same;
  for (const PublishedRun& r : runs) {
    if (r.plan.recompute == Recompute::kFull) same.push_back(r);
  }
  const GroupFit one_kind = FitRuns(same, {.fit = true, .source_path = "generated"})[0];
  EXPECT_EQ(value(one_kind, "backward").fit_runs, 0);
  EXPECT_DOUBLE_EQ(value(one_kind, "backward").value, LoadCluster("dgx-h100:8").efficiency.backward);
}

// Four runs for matmul, attention and backward are too few to fit each: the rates move as one
// scale of their starts (the preset's fitted defaults) and backward, which the two recomputations
// tell apart, beside it. Times made at 0.8 of the starts' rates and backward 0.6 are found again.
TEST(RunsFitTest, TooFewRunsFitTheRatesAsOneScale) {
  const ClusterSpec start = LoadCluster("dgx-h100:8");
  ClusterSpec truth = start;
  truth.efficiency.matmul = 0.8 * start.efficiency.matmul;
  truth.efficiency.attention = 0.8 * start.efficiency.Attention();
  truth.efficiency.backward = 0.6;
  const std::string truth_path = WriteTemp("tied.cluster.json", ClusterToJson(truth));
  json list = json::array();
  for (int64_t seq : {2048, 32768}) {
    for (const char* recompute : {"none", "full"}) {
      json run = RunJson(std::string(recompute) + std::to_string(seq), seq, truth_path);
      run["plan"]["recompute"] = recompute;
      list.push_back(run);
    }
  }
  const GroupFit fitted = FitRuns(TimedOnTheirCluster(WriteTemp("tied.json", {{"runs", list}})), {.fit = true, .source_path = "generated"})[0];
  EXPECT_TRUE(fitted.tied);
  EXPECT_EQ(fitted.FreeParameters(), 2);
  EXPECT_TRUE(fitted.Determined());
  for (const FittedParameter& p : fitted.parameters) {
    if (p.name == "matmul") {
      EXPECT_NEAR(p.value, truth.efficiency.matmul, 0.01);
    }
    if (p.name == "attention") {
      EXPECT_NEAR(p.value, truth.efficiency.attention, 0.01);
    }
    if (p.name == "backward") {
      EXPECT_NEAR(p.value, 0.6, 0.02);
    }
  }
  for (const RunResult& r : fitted.results) EXPECT_NEAR(r.error, 0, 0.01) << r.run->id;
  EXPECT_NE(fitted.cluster.efficiency.source.find("matmul, attention as one scale (x0.800)"), std::string::npos) << fitted.cluster.efficiency.source;
}

// A rate that starts at its bound does not hold the others: the scale moves as far as the loosest
// rate may, each rate stopping at its own bound. Starting at matmul 0.95 (its upper bound) and
// attention 0.30, runs made at attention 0.45 are found again (scale 1.5, matmul held at 0.95);
// a start outside its bounds is first brought into them.
TEST(RunsFitTest, ARateAtItsBoundDoesNotHoldTheTiedScale) {
  std::vector<PublishedRun> runs = ReadMeasuredRuns(RunsOnTruth("bound", 0.95, 0.45, {2048, 8192, 32768}));
  const GroupFit generated = FitRuns(runs, {.fit = false, .source_path = "generated"})[0];
  const ClusterSpec truth = LoadCluster(runs.front().cluster);
  for (const double start_matmul : {0.95, 0.99}) {
    ClusterSpec start = truth;
    start.efficiency.matmul = start_matmul;
    start.efficiency.attention = 0.30;
    const std::string start_path = WriteTemp("bound_start.cluster.json", ClusterToJson(start));
    for (size_t i = 0; i < runs.size(); ++i) {
      runs[i].step_time_s = generated.results[i].predicted_s;
      runs[i].cluster = start_path;
    }
    const GroupFit fitted = FitRuns(runs, {.fit = true, .source_path = "generated"})[0];
    ASSERT_TRUE(fitted.tied);
    for (const FittedParameter& p : fitted.parameters) {
      if (p.name == "matmul") {
        EXPECT_DOUBLE_EQ(p.value, 0.95) << start_matmul;
      }
      if (p.name == "attention") {
        EXPECT_NEAR(p.value, 0.45, 0.01) << start_matmul;
      }
    }
    EXPECT_NEAR(fitted.tied_scale, 1.5, 0.03) << start_matmul;
  }
}

// A scaling recipe's FP8 GEMMs get their own efficiency, fitted on the runs that use it only:
// row-wise runs made at 0.30 and per-tensor ones at 0.60 are told apart, and the fitted cluster
// writes both (fp8_matmul, fp8_matmul_recipes.rowwise).
TEST(RunsFitTest, EachFp8RecipeHasItsOwnEfficiency) {
  ClusterSpec truth = LoadCluster("dgx-h100:8");
  truth.efficiency.attention = 0.35;
  truth.efficiency.fp8_matmul = 0.60;
  truth.efficiency.fp8_matmul_recipes["rowwise"] = 0.30;
  const std::string truth_path = WriteTemp("fp8.cluster.json", ClusterToJson(truth));
  json list = json::array();
  for (int64_t seq : {2048, 8192, 32768, 65536}) {
    for (const char* recipe : {"tensorwise", "rowwise"}) {
      json run = RunJson(std::string(recipe) + std::to_string(seq), seq, truth_path);
      run["plan"]["dtype"] = "fp8";
      run["plan"]["fp8_recipe"] = recipe;
      list.push_back(run);
    }
  }
  std::vector<PublishedRun> runs = TimedOnTheirCluster(WriteTemp("fp8.json", {{"runs", list}}));
  const std::vector<GroupFit> fitted = FitRuns(runs, {.fit = true, .source_path = "generated"});
  bool rowwise = false;
  for (const FittedParameter& p : fitted[0].parameters) {
    if (p.name == "fp8_matmul") {
      EXPECT_NEAR(p.value, 0.60, 0.02);
    }
    if (p.name == "fp8_matmul.rowwise") {
      EXPECT_NEAR(p.value, 0.30, 0.02);
      rowwise = true;
    }
  }
  EXPECT_TRUE(rowwise) << "no row-wise parameter";
  for (const RunResult& r : fitted[0].results) EXPECT_NEAR(r.error, 0, 0.02) << r.run->id;
  const ClusterSpec back = ClusterFromJson(ClusterToJson(fitted[0].cluster), "fitted");
  EXPECT_NEAR(back.efficiency.Fp8Matmul("rowwise"), 0.30, 0.02);
  EXPECT_NEAR(back.efficiency.Fp8Matmul("tensorwise"), 0.60, 0.02);
}

// An attention kernel other than flash gets its own efficiency, fitted on the runs that run it
// only: Triton runs made at 0.15 and flash ones at 0.45 are told apart, the fitted cluster writes
// both (attention, attention_kernels.triton), and a kernel no fit run uses falls back to
// attention's.
TEST(RunsFitTest, EachAttentionKernelHasItsOwnEfficiency) {
  ClusterSpec truth = LoadCluster("dgx-h100:8");
  truth.efficiency.matmul = 0.6;
  truth.efficiency.attention = 0.45;
  truth.efficiency.attention_kernels["triton"] = 0.15;
  const std::string truth_path = WriteTemp("kernels.cluster.json", ClusterToJson(truth));
  json list = json::array();
  for (int64_t seq : {2048, 8192, 32768, 65536}) {
    for (const char* kernel : {"flash", "triton"}) {
      json run = RunJson(std::string(kernel) + std::to_string(seq), seq, truth_path);
      run["plan"]["attention_kernel"] = kernel;
      list.push_back(run);
    }
  }
  json flex = RunJson("flex", 8192, truth_path);
  flex["plan"]["attention_kernel"] = "flex";
  flex["split"] = "test";
  list.push_back(flex);
  std::vector<PublishedRun> runs = TimedOnTheirCluster(WriteTemp("kernels.json", {{"runs", list}}));
  const std::vector<GroupFit> fitted = FitRuns(runs, {.fit = true, .source_path = "generated"});
  bool triton = false, flex_fitted = false;
  for (const FittedParameter& p : fitted[0].parameters) {
    if (p.name == "attention") {
      EXPECT_NEAR(p.value, 0.45, 0.02);
    }
    if (p.name == "attention.triton") {
      EXPECT_NEAR(p.value, 0.15, 0.01);
      triton = true;
    }
    if (p.name == "attention.flex") flex_fitted = p.fit_runs > 0;
  }
  EXPECT_TRUE(triton) << "no Triton parameter";
  EXPECT_FALSE(flex_fitted);
  for (const RunResult& r : fitted[0].results) {
    if (r.run->fit) {
      EXPECT_NEAR(r.error, 0, 0.02) << r.run->id;
    }
  }
  const ClusterSpec back = ClusterFromJson(ClusterToJson(fitted[0].cluster), "fitted");
  EXPECT_NEAR(back.efficiency.Attention("triton"), 0.15, 0.01);
  EXPECT_NEAR(back.efficiency.Attention("flex"), back.efficiency.Attention(), 1e-12);  // no flex figure: attention's
  EXPECT_FALSE(back.efficiency.attention_kernels.count("flex"));
}

// Unfused attention (flash_attention false) runs its products at the matmul share: its runs are
// not the attention efficiency's (it acts on the flash runs only), get no kernel parameter of their
// own, and still fit their matmul share.
TEST(RunsFitTest, UnfusedAttentionRunsAreTheMatmulShares) {
  ClusterSpec truth = LoadCluster("dgx-h100:8");
  truth.efficiency.matmul = 0.6;
  truth.efficiency.attention = 0.3;
  const std::string truth_path = WriteTemp("unfused.cluster.json", ClusterToJson(truth));
  json list = json::array();
  for (int64_t seq : {2048, 4096, 8192}) {
    for (bool flash : {true, false}) {
      json run = RunJson(std::string(flash ? "flash" : "unfused") + std::to_string(seq), seq, truth_path);
      run["plan"]["flash_attention"] = flash;
      list.push_back(run);
    }
  }
  std::vector<PublishedRun> runs = TimedOnTheirCluster(WriteTemp("unfused.json", {{"runs", list}}));
  const std::vector<GroupFit> fitted = FitRuns(runs, {.fit = true, .source_path = "generated"});
  bool attention = false, matmul = false;
  for (const FittedParameter& p : fitted[0].parameters) {
    EXPECT_EQ(p.name.find("unfused"), std::string::npos) << p.name;
    if (p.name == "attention") {
      attention = true;
      EXPECT_EQ(p.fit_runs, 3);  // the flash runs
      EXPECT_NEAR(p.value, 0.3, 0.03);
    }
    if (p.name == "matmul") {
      matmul = true;
      EXPECT_EQ(p.fit_runs, 6);
      EXPECT_NEAR(p.value, 0.6, 0.02);
    }
  }
  EXPECT_TRUE(attention && matmul);
  for (const RunResult& r : fitted[0].results) EXPECT_NEAR(r.error, 0, 0.02) << r.run->id;
}

}  // namespace
}  // namespace shardsim::validation
