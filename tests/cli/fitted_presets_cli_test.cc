// The presets' fitted efficiencies (data/fitted_presets.json): a preset runs at its system's
// fitted figures by default and at the catalogue's with ,efficiency=catalogue; the shipped figures
// are what calibrate --from-runs fits afresh on the shipped runs (scripts/refit_presets.sh), for
// exactly the systems whose fit the runs determine.
#include <cmath>
#include <fstream>

#include "tests/cli/cli_test_util.h"

namespace shardsim::cli_test {
namespace {

using nlohmann::json;

class CliFittedPresetsTest : public CliTest {};

json ReadJson(const std::string& path) { return json::parse(std::ifstream(path)); }

json EfficiencyOf(const std::string& cluster) {
  json described;
  EXPECT_TRUE(IsJsonSuccess(RunShardsim({"describe", "--cluster", cluster, "--json"}), &described));
  return described.is_object() ? described["cluster"]["spec"]["efficiency"] : json();
}

// Every figure of `expected` (nested objects included, `source` aside) in `actual`, within a part
// in a million.
void ExpectSameFigures(const json& actual, const json& expected, const std::string& where) {
  for (const auto& [key, value] : expected.items()) {
    if (key == "source") continue;
    ASSERT_TRUE(actual.contains(key)) << where << ": no " << key << " in " << actual.dump();
    if (value.is_object()) {
      ExpectSameFigures(actual[key], value, where + "." + key);
    } else {
      EXPECT_NEAR(actual[key].get<double>(), value.get<double>(), 1e-6 * std::abs(value.get<double>())) << where << "." << key;
    }
  }
  for (const auto& [key, value] : actual.items()) EXPECT_TRUE(expected.contains(key)) << where << ": " << key << " not expected";
}

TEST_F(CliFittedPresetsTest, PresetsRunAtTheirSystemsFittedFiguresOrTheCataloguesOnRequest) {
  const json fitted = ReadJson(SHARDSIM_FITTED_PRESETS_JSON).at("systems");
  const json hardware = ReadJson(SHARDSIM_HARDWARE_JSON).at("systems");
  ASSERT_TRUE(fitted.contains("dgx-h100"));
  const json h100 = EfficiencyOf("dgx-h100:8");
  ExpectSameFigures(h100, fitted["dgx-h100"]["efficiency"], "dgx-h100:8");
  EXPECT_NE(h100["source"].get<std::string>().find("fitted to published runs in data/fitted_presets.json (dgx-h100; the preset with ,efficiency=catalogue"), std::string::npos) << h100.dump();
  // The options keep their meaning beside it.
  ExpectSameFigures(EfficiencyOf("dgx-h100:16,oversubscription=2,efficiency=catalogue"), hardware["dgx-h100"]["efficiency"], "catalogue");
  // A system of another's compute (data/hardware.json fitted_from) takes its fitted figures beside
  // its own HBM figure, saying so; the catalogue's on request.
  ASSERT_FALSE(fitted.contains("dgx-h200"));
  ASSERT_EQ(hardware["dgx-h200"]["fitted_from"]["system"], "dgx-h100");
  json carried = fitted["dgx-h100"]["efficiency"];
  carried["hbm"] = hardware["dgx-h200"]["efficiency"]["hbm"];
  ASSERT_NE(carried["hbm"], fitted["dgx-h100"]["efficiency"]["hbm"]);
  const json h200 = EfficiencyOf("dgx-h200:16");
  ExpectSameFigures(h200, carried, "dgx-h200:16");
  const std::string h200_source = h200["source"];
  EXPECT_NE(h200_source.find("dgx-h100's, carried to dgx-h200 (data/hardware.json fitted_from: the same GH100"), std::string::npos) << h200_source;
  EXPECT_NE(h200_source.find("its hbm 0.89 its own catalogue figure"), std::string::npos) << h200_source;
  EXPECT_EQ(h200_source.find("kept from the catalogue"), std::string::npos) << h200_source;  // dgx-h100's own hbm clause dropped
  ExpectSameFigures(EfficiencyOf("dgx-h200:16,efficiency=catalogue"), hardware["dgx-h200"]["efficiency"], "dgx-h200 catalogue");
  // A system the runs do not determine keeps the catalogue's figures, and cannot ask for fitted ones.
  ASSERT_FALSE(fitted.contains("tpu-v5e"));
  ExpectSameFigures(EfficiencyOf("tpu-v5e:16x16"), hardware["tpu-v5e"]["efficiency"], "tpu-v5e");
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--cluster", "tpu-v5e:16x16,efficiency=fitted"}),
                           {"tpu-v5e has no fitted efficiencies", "catalogue here; fitted on ", "dgx-h100", "dgx-h200", "calibrate --from-runs"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--cluster", "dgx-h100:8,efficiency=fast"}),
                           {"efficiency 'fast' is not fitted or catalogue", "fitted (the default here", "e.g. dgx-h100:8,efficiency=catalogue"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--cluster", "tpu-v5e:16x16,efficiency=catalog"}),
                           {"did you mean 'catalogue'", "catalogue (the default here", "e.g. tpu-v5e:16x16,efficiency=catalogue"}));
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--cluster", "local,efficiency=catalogue"}), {"unknown option 'efficiency'"}));
  // A cluster file keeps its own figures at another size: the option is refused there, naming the preset.
  const std::string file = PathOf("h100.cluster.json");
  ASSERT_EQ(RunShardsim({"describe", "--cluster", "dgx-h100:8", "--write-cluster", file}).exit_code, 0);
  ExpectSameFigures(EfficiencyOf(file + ":16"), fitted["dgx-h100"]["efficiency"], "file at 16");
  EXPECT_TRUE(IsInputError(RunShardsim({"describe", "--cluster", file + ":16,oversubscription=2,efficiency=catalogue"}),
                           {"a cluster file keeps its own efficiencies", "dgx-h100:16,oversubscription=2,efficiency=catalogue"}));
  // plan says where its efficiencies come from: a preset's fitted defaults, the catalogue's, or a
  // cluster file's own (a file of the catalogue's figures with one changed).
  auto efficiencies_line = [](const std::string& cluster) {
    const CliResult r = RunShardsim({"plan", "--model", "llama3-8b", "--cluster", cluster, "--global-batch-tokens", "1M", "--seq-len", "4096"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const size_t at = r.out.find("efficiencies: ");
    std::string line = at == std::string::npos ? std::string() : r.out.substr(at, r.out.find(';', at) - at);
    for (size_t wrap = line.find("\n    "); wrap != std::string::npos; wrap = line.find("\n    ")) line.replace(wrap, 5, " ");  // the text wraps
    return line;
  };
  EXPECT_EQ(efficiencies_line("dgx-h100:8"), "efficiencies: fitted to published runs (data/fitted_presets.json), or ,efficiency=catalogue for the catalogue's");
  EXPECT_EQ(efficiencies_line("dgx-h100:8,efficiency=catalogue"), "efficiencies: the catalogue's (data/hardware.json)");
  EXPECT_EQ(efficiencies_line("dgx-h200:8"),
            "efficiencies: dgx-h100's fit to published runs (data/fitted_presets.json, the same compute), hbm 0.89 dgx-h200's own, or "
            ",efficiency=catalogue for the catalogue's");
  EXPECT_EQ(efficiencies_line(file + ":16"), "efficiencies: fitted to published runs (data/fitted_presets.json)");  // a file keeps its figures
  json own = ReadJson(file);
  own["efficiency"]["matmul"] = 0.5;
  EXPECT_EQ(efficiencies_line(WriteJson("own.cluster.json", own)), "efficiencies: the cluster file's own (its efficiency.source)");
  // calibrate's --catalogue belongs to --from-runs.
  EXPECT_TRUE(IsInputError(RunShardsim({"calibrate", "--catalogue"}), {"--catalogue", "only with --from-runs"}));
  // The presets list says which systems run at fitted figures.
  json presets;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"presets", "--json"}), &presets));
  for (const json& c : presets["clusters"]) {
    const json& own = hardware[c["name"].get<std::string>()];
    const std::string from = own.contains("fitted_from") ? own["fitted_from"]["system"].get<std::string>() : "";
    EXPECT_EQ(c["efficiency"] == "fitted", fitted.contains(c["name"].get<std::string>()) || fitted.contains(from)) << c.dump();
    EXPECT_EQ(c["fitted_from"], fitted.contains(from) ? json(from) : json()) << c.dump();
  }
  const CliResult text = RunShardsim({"presets"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  const size_t line = text.out.find("efficiencies: fitted to published runs (data/fitted_presets.json, docs/calibrate_runs.md) on ");
  ASSERT_NE(line, std::string::npos) << text.out;
  EXPECT_NE(text.out.substr(line, text.out.find('\n', line) - line).find("dgx-h100"), std::string::npos) << text.out;
  EXPECT_NE(text.out.substr(line, text.out.find('\n', line) - line).find("dgx-h200 (dgx-h100's compute figures)"), std::string::npos) << text.out;
}

// The shipped figures are a fresh fit from the catalogue's figures: each group named after a
// catalogue system with a converged fit on at least twice as many fit runs as fitted efficiencies,
// each fitted on its own (not `tied`), has its figures shipped, and no other system has any. A change to the cost model that moves the fit fails here until
// scripts/refit_presets.sh is run.
TEST_F(CliFittedPresetsTest, ShippedFiguresAreAFreshFitOfTheShippedRuns) {
  const json fitted = ReadJson(SHARDSIM_FITTED_PRESETS_JSON).at("systems");
  const json hardware = ReadJson(SHARDSIM_HARDWARE_JSON).at("systems");
  json report;
  ASSERT_TRUE(IsJsonSuccess(RunShardsim({"calibrate", "--from-runs", SHARDSIM_MEASURED_RUNS_JSON, "--catalogue", "--json", "--out-dir", PathOf("fit")}),
                            &report));
  std::set<std::string> determined;
  for (const json& g : report["groups"]) {
    const std::string group = g["group"];
    if (!hardware.contains(group) || !g["determined"].get<bool>() || g["tied"].get<bool>()) continue;
    determined.insert(group);
    ASSERT_TRUE(fitted.contains(group)) << group << " is determined by its fit runs but has no shipped figures: run scripts/refit_presets.sh";
    ExpectSameFigures(fitted[group]["efficiency"], ReadJson(PathOf("fit/" + group + ".cluster.json"))["efficiency"],
                      group + " (stale: run scripts/refit_presets.sh)");
  }
  for (const auto& [system, figures] : fitted.items()) EXPECT_TRUE(determined.count(system)) << system << " has shipped figures no fit determines";
  EXPECT_GE(determined.size(), 5u);
}

}  // namespace
}  // namespace shardsim::cli_test
