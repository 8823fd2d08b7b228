#include "planner/pareto_plot.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace shardsim::planner {
namespace {

std::string Number(double v, const char* format = "%.3g") {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, format, v);
  return buffer;
}

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n') out += '?';  // not allowed in XML
    else out += c;
  }
  return out;
}

}  // namespace

std::string ParetoSvg(const std::vector<RankedPlan>& pareto, double hbm_bytes, const std::string& title) {
  constexpr double kWidth = 640, kHeight = 400, kLeft = 80, kRight = 20, kTop = 40, kBottom = 50;
  const double gib = 1073741824.0;
  double max_memory = hbm_bytes / gib, max_rate = 1;
  for (const RankedPlan& p : pareto) {
    max_memory = std::max(max_memory, p.report.memory.peak.total() / gib);
    max_rate = std::max(max_rate, p.report.tokens_per_s);
  }
  max_memory *= 1.05;
  max_rate *= 1.1;
  auto x = [&](double memory) { return kLeft + memory / max_memory * (kWidth - kLeft - kRight); };
  auto y = [&](double rate) { return kHeight - kBottom - rate / max_rate * (kHeight - kTop - kBottom); };
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg << "<text x=\"" << kLeft << "\" y=\"24\" font-size=\"14\">" << Escape(title) << "</text>\n";
  svg << "<line x1=\"" << kLeft << "\" y1=\"" << kHeight - kBottom << "\" x2=\"" << kWidth - kRight << "\" y2=\"" << kHeight - kBottom << "\" stroke=\"black\"/>\n";
  svg << "<line x1=\"" << kLeft << "\" y1=\"" << kTop << "\" x2=\"" << kLeft << "\" y2=\"" << kHeight - kBottom << "\" stroke=\"black\"/>\n";
  for (int i = 0; i <= 4; ++i) {
    const double memory = max_memory * i / 4, rate = max_rate * i / 4;
    svg << "<text x=\"" << x(memory) << "\" y=\"" << kHeight - kBottom + 16 << "\" text-anchor=\"middle\">" << Number(memory) << "</text>\n";
    svg << "<text x=\"" << kLeft - 6 << "\" y=\"" << y(rate) + 4 << "\" text-anchor=\"end\">" << Number(rate) << "</text>\n";
  }
  svg << "<text x=\"" << (kLeft + kWidth - kRight) / 2 << "\" y=\"" << kHeight - 12 << "\" text-anchor=\"middle\">memory per device (GiB)</text>\n";
  svg << "<text x=\"16\" y=\"" << (kTop + kHeight - kBottom) / 2 << "\" transform=\"rotate(-90 16 " << (kTop + kHeight - kBottom) / 2
      << ")\" text-anchor=\"middle\">tokens/s</text>\n";
  svg << "<line x1=\"" << x(hbm_bytes / gib) << "\" y1=\"" << kTop << "\" x2=\"" << x(hbm_bytes / gib) << "\" y2=\"" << kHeight - kBottom
      << "\" stroke=\"red\" stroke-dasharray=\"4 3\"/>\n";
  svg << "<text x=\"" << x(hbm_bytes / gib) - 4 << "\" y=\"" << kTop + 12 << "\" text-anchor=\"end\" fill=\"red\">HBM</text>\n";
  svg << "<polyline fill=\"none\" stroke=\"steelblue\" points=\"";
  for (const RankedPlan& p : pareto) svg << x(p.report.memory.peak.total() / gib) << "," << y(p.report.tokens_per_s) << " ";
  svg << "\"/>\n";
  for (const RankedPlan& p : pareto) {
    svg << "<circle cx=\"" << x(p.report.memory.peak.total() / gib) << "\" cy=\"" << y(p.report.tokens_per_s) << "\" r=\"4\" fill=\"steelblue\"><title>"
        << Escape(DescribeMesh(p.plan.mesh) + ", ZeRO " + std::to_string(p.plan.zero_stage) + ", recompute " + ToString(p.plan.recompute))
        << "</title></circle>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace shardsim::planner
