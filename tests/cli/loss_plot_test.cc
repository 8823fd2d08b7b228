// The loss plot (cli/loss_plot.h) from hand-written run reports, in process: a line per run with
// a point per step, the legend, the axes with units, the largest difference; bad reports refused
// naming the field.
#include "cli/loss_plot.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace shardsim::cli {
namespace {

using nlohmann::json;

json Report(std::vector<double> losses, json mesh) {
  return {{"losses", losses}, {"model", "tiny-dense"}, {"plan", {{"mesh", mesh}, {"pipeline_schedule", "1f1b"}, {"zero_stage", 1}}}};
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(LossPlotTest, DrawsALinePerRunWithAPointPerStepAndTheLegend) {
  const LossRun a = LossRunFromReport(Report({5.5, 4.8, 4.1}, {{"data", 2}, {"tensor", 1}}), "a.json");
  const LossRun b = LossRunFromReport(Report({5.5, 4.81, 4.1}, {{"data", 1}}), "b.json");
  EXPECT_EQ(a.label, "data=2, ZeRO-1");
  EXPECT_EQ(b.label, "one rank, ZeRO-1");
  const std::string svg = LossPlotSvg({a, b});
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(Count(svg, "<polyline class=\"run\""), 2);
  // Three points in each line.
  const std::regex points("points=\"([^\"]*)\"");
  int lines = 0;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), points); it != std::sregex_iterator(); ++it, ++lines) {
    EXPECT_EQ(Count((*it)[1].str(), ","), 3) << (*it)[1].str();
  }
  EXPECT_EQ(lines, 2);
  EXPECT_NE(svg.find("loss (nats)"), std::string::npos);
  EXPECT_NE(svg.find(">step<"), std::string::npos);
  EXPECT_NE(svg.find("Training loss of tiny-dense"), std::string::npos);
  EXPECT_NE(svg.find("data=2, ZeRO-1 (3 steps, last 4.1000 nats)"), std::string::npos);
  EXPECT_NE(svg.find("largest relative difference from data=2, ZeRO-1: 2.08e-03 (step 1, one rank, ZeRO-1)"), std::string::npos) << svg;
  const LossDifference d = LargestRelativeDifference({a, b});
  EXPECT_NEAR(d.relative, 0.01 / 4.8, 1e-12);
  EXPECT_EQ(d.step, 1);
  EXPECT_EQ(d.run, 1);
  // One run: no difference drawn; labels are escaped.
  LossRun odd = a;
  odd.label = "<script>";
  const std::string one = LossPlotSvg({odd});
  EXPECT_EQ(one.find("largest relative difference"), std::string::npos);
  EXPECT_EQ(one.find("<script>"), std::string::npos);
  EXPECT_NE(one.find("&lt;script&gt;"), std::string::npos);
}

// A resumed run (first_step) is drawn and compared at its own steps.
TEST(LossPlotTest, ResumedRunsLineUpByStep) {
  json late = Report({4.8, 4.1}, {{"data", 2}});
  late["first_step"] = 1;
  const LossRun a = LossRunFromReport(Report({5.5, 4.8, 4.1}, {{"data", 1}}), "a.json");
  const LossRun b = LossRunFromReport(late, "b.json");
  EXPECT_EQ(b.first_step, 1);
  const LossDifference d = LargestRelativeDifference({a, b});
  EXPECT_EQ(d.relative, 0.0);
  EXPECT_EQ(d.run, 1);
  const std::string svg = LossPlotSvg({a, b});
  EXPECT_NE(svg.find(">2</text>"), std::string::npos);  // the last step's tick
  // A plan whose mesh is not an object only loses its label's details.
  json odd = Report({1.0}, 5);
  EXPECT_EQ(LossRunFromReport(odd, "o.json").label, "one rank, ZeRO-1");
  odd["plan"]["mesh"] = {{"pipeline", "x"}};
  EXPECT_NO_THROW(LossRunFromReport(odd, "o.json"));
  json negative = Report({1.0}, {{"data", 1}});
  negative["first_step"] = -1;
  EXPECT_THROW(LossRunFromReport(negative, "n.json"), InputError);
}

TEST(LossPlotTest, ReportsWithoutLossesAreRefusedNamingTheField) {
  auto message = [](const json& report) {
    try {
      LossRunFromReport(report, "r.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message(json::array()).find("r.json"), std::string::npos);
  EXPECT_NE(message(json{{"model", "x"}}).find("r.json:/losses"), std::string::npos);
  EXPECT_NE(message(json{{"losses", json::array()}}).find("r.json:/losses"), std::string::npos);
  EXPECT_NE(message(json{{"losses", {1.0, "x"}}}).find("r.json:/losses/1"), std::string::npos);
  EXPECT_THROW(ReadLossRun("/nonexistent/run.json"), InputError);
}

}  // namespace
}  // namespace shardsim::cli
