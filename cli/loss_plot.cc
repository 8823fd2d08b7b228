#include "cli/loss_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/html_text.h"
#include "core/error.h"
#include "core/json_input.h"

namespace shardsim::cli {
namespace {

// "data=2 tensor=2, 1f1b, ZeRO-1" from the report's plan.
std::string PlanLabel(const nlohmann::json& plan) {
  std::string label;
  if (plan.contains("mesh") && plan["mesh"].is_object()) {
    for (const auto& [axis, size] : plan["mesh"].items()) {
      if (size.is_number_integer() && size.get<int64_t>() > 1) label += (label.empty() ? "" : " ") + axis + "=" + std::to_string(size.get<int64_t>());
    }
  }
  if (label.empty()) label = "one rank";
  const bool pipelined = plan.contains("mesh") && plan["mesh"].is_object() && plan["mesh"].contains("pipeline") &&
                         plan["mesh"]["pipeline"].is_number_integer() && plan["mesh"]["pipeline"].get<int64_t>() > 1;
  if (pipelined && plan.contains("pipeline_schedule") && plan["pipeline_schedule"].is_string()) {
    label += ", " + plan["pipeline_schedule"].get<std::string>();
  }
  if (plan.contains("zero_stage") && plan["zero_stage"].is_number_integer() && plan["zero_stage"].get<int64_t>() > 0) {
    label += ", ZeRO-" + std::to_string(plan["zero_stage"].get<int64_t>());
  }
  return label;
}

std::string Number(double value, const char* format) {
  char text[32];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

}  // namespace

LossRun LossRunFromReport(const nlohmann::json& report, const std::string& source) {
  if (!report.is_object()) throw InputError(source, "is not a run report (a JSON object)", "the output of shardsim run --json");
  if (!report.contains("losses")) {
    throw InputError(source + ":/losses", "missing", "an array of the loss of each step", "write it with shardsim run --json > FILE");
  }
  const nlohmann::json& losses = report["losses"];
  if (!losses.is_array() || losses.empty()) throw InputError(source + ":/losses", "is not a non-empty array", "the loss of each step, in nats");
  LossRun run;
  for (size_t i = 0; i < losses.size(); ++i) {
    if (!losses[i].is_number() || !std::isfinite(losses[i].get<double>())) {
      throw InputError(source + ":/losses/" + std::to_string(i), losses[i].is_null() ? std::string("null") : JsonTypeName(losses[i]) + " " + losses[i].dump(), "a finite number of nats");
    }
    run.losses.push_back(losses[i].get<double>());
  }
  run.model = report.contains("model") && report["model"].is_string() ? report["model"].get<std::string>() : "";
  if (report.contains("first_step")) {
    if (!report["first_step"].is_number_integer() || report["first_step"].get<int64_t>() < 0) {
      throw InputError(source + ":/first_step", report["first_step"].dump(), "the step of the first loss, 0 or more");
    }
    run.first_step = report["first_step"].get<int64_t>();
  }
  run.label = report.contains("plan") && report["plan"].is_object() ? PlanLabel(report["plan"]) : source;
  return run;
}

LossRun ReadLossRun(const std::string& path) { return LossRunFromReport(ReadJsonFile(path), path); }

LossDifference LargestRelativeDifference(const std::vector<LossRun>& runs) {
  LossDifference worst;
  if (runs.size() < 2) return worst;
  const LossRun& first = runs[0];
  for (size_t r = 1; r < runs.size(); ++r) {
    const int64_t from = std::max(first.first_step, runs[r].first_step);
    const int64_t to = std::min(first.first_step + static_cast<int64_t>(first.losses.size()), runs[r].first_step + static_cast<int64_t>(runs[r].losses.size()));
    for (int64_t a = from; a < to; ++a) {
      const double want = first.losses[static_cast<size_t>(a - first.first_step)];
      const double got = runs[r].losses[static_cast<size_t>(a - runs[r].first_step)];
      const double d = want == 0 ? std::abs(got) : std::abs(got - want) / std::abs(want);
      if (worst.step < 0 || d > worst.relative) worst = {d, static_cast<int>(a), static_cast<int>(r)};
    }
  }
  return worst;
}

std::string LossPlotSvg(const std::vector<LossRun>& runs) {
  SHARDSIM_CHECK(!runs.empty() && !runs.front().losses.empty(), "a loss plot needs a run with a step");
  // Plot area in pixels, and the data's range with a margin.
  const double width = 720, height = 420, left = 70, right = 20, top = 50, bottom = 60 + 18.0 * static_cast<double>(runs.size());
  const double plot_w = width - left - right, plot_h = height - top - 60;
  // Steps by absolute number (a resumed run starts later), [first, first + steps).
  int64_t first = runs.front().first_step, end = first;
  double lo = runs.front().losses.front(), hi = lo;
  for (const LossRun& r : runs) {
    first = std::min(first, r.first_step);
    end = std::max(end, r.first_step + static_cast<int64_t>(r.losses.size()));
    for (double l : r.losses) lo = std::min(lo, l), hi = std::max(hi, l);
  }
  const size_t steps = static_cast<size_t>(end - first);
  const double pad = std::max((hi - lo) * 0.05, 1e-3);
  lo -= pad, hi += pad;
  auto x = [&](size_t step) { return left + (steps > 1 ? plot_w * static_cast<double>(step) / static_cast<double>(steps - 1) : plot_w / 2); };
  auto y = [&](double loss) { return top + plot_h * (hi - loss) / (hi - lo); };
  static const char* const kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << Coord(width) << "\" height=\"" << Coord(height + bottom - 60)
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  const std::string model = runs.front().model.empty() ? "" : " of " + runs.front().model;
  svg << "<title>Training loss" << HtmlEscape(model) << "</title>\n";
  svg << "<text x=\"" << Coord(left) << "\" y=\"24\" font-size=\"15\">Training loss" << HtmlEscape(model) << ", per step</text>\n";
  // Axes, ticks and their labels.
  svg << "<g class=\"axes\" stroke=\"#444\">\n<line x1=\"" << Coord(left) << "\" y1=\"" << Coord(top + plot_h) << "\" x2=\"" << Coord(left + plot_w)
      << "\" y2=\"" << Coord(top + plot_h) << "\"/>\n<line x1=\"" << Coord(left) << "\" y1=\"" << Coord(top) << "\" x2=\"" << Coord(left)
      << "\" y2=\"" << Coord(top + plot_h) << "\"/>\n</g>\n";
  for (int i = 0; i <= 4; ++i) {
    const double value = lo + (hi - lo) * i / 4.0;
    svg << "<text class=\"ytick\" x=\"" << Coord(left - 6) << "\" y=\"" << Coord(y(value) + 4) << "\" text-anchor=\"end\">" << Number(value, "%.3f")
        << "</text>\n";
  }
  const size_t every = std::max<size_t>(1, (steps + 9) / 10);
  for (size_t s = 0; s < steps; s += every) {
    svg << "<text class=\"xtick\" x=\"" << Coord(x(s)) << "\" y=\"" << Coord(top + plot_h + 16) << "\" text-anchor=\"middle\">" << first + static_cast<int64_t>(s)
        << "</text>\n";
  }
  svg << "<text class=\"xlabel\" x=\"" << Coord(left + plot_w / 2) << "\" y=\"" << Coord(top + plot_h + 34) << "\" text-anchor=\"middle\">step</text>\n";
  svg << "<text class=\"ylabel\" transform=\"translate(16 " << Coord(top + plot_h / 2) << ") rotate(-90)\" text-anchor=\"middle\">loss (nats)</text>\n";
  // A line per run (later runs dashed, so that equal curves stay visible), then the legend.
  for (size_t r = 0; r < runs.size(); ++r) {
    svg << "<polyline class=\"run\" fill=\"none\" stroke=\"" << kColours[r % 8] << "\" stroke-width=\"2\"" << (r > 0 ? " stroke-dasharray=\"6 4\"" : "")
        << " points=\"";
    const size_t offset = static_cast<size_t>(runs[r].first_step - first);
    for (size_t s = 0; s < runs[r].losses.size(); ++s) svg << (s ? " " : "") << Coord(x(offset + s)) << "," << Coord(y(runs[r].losses[s]));
    svg << "\"><title>" << HtmlEscape(runs[r].label) << "</title></polyline>\n";
  }
  for (size_t r = 0; r < runs.size(); ++r) {
    const double ly = top + plot_h + 52 + 18.0 * static_cast<double>(r);
    svg << "<line x1=\"" << Coord(left) << "\" y1=\"" << Coord(ly - 4) << "\" x2=\"" << Coord(left + 24) << "\" y2=\"" << Coord(ly - 4) << "\" stroke=\""
        << kColours[r % 8] << "\" stroke-width=\"2\"/><text class=\"legend\" x=\"" << Coord(left + 30) << "\" y=\"" << Coord(ly) << "\">"
        << HtmlEscape(runs[r].label) << " (" << runs[r].losses.size() << " steps, last " << Number(runs[r].losses.back(), "%.4f") << " nats)</text>\n";
  }
  const LossDifference diff = LargestRelativeDifference(runs);
  if (diff.run > 0) {
    svg << "<text class=\"difference\" x=\"" << Coord(left + plot_w) << "\" y=\"40\" text-anchor=\"end\">largest relative difference from "
        << HtmlEscape(runs.front().label) << ": " << Number(diff.relative, "%.2e") << " (step " << diff.step << ", " << HtmlEscape(runs[diff.run].label)
        << ")</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace shardsim::cli
