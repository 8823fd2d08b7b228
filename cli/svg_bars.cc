#include "cli/svg_bars.h"

#include <algorithm>
#include <sstream>

#include "cli/html_text.h"

namespace shardsim::cli {
namespace {

constexpr double kWidth = 900, kLabelWidth = 260, kValueWidth = 170, kRow = 22, kBar = 14;

}  // namespace

std::string BarsSvg(const std::vector<SvgBar>& bars, double scale_max, double marker,
                    const std::string& marker_text) {
  double largest = std::max(scale_max, marker);
  for (const SvgBar& bar : bars) largest = std::max(largest, bar.value);
  if (largest <= 0) largest = 1;
  const double plot = kWidth - kLabelWidth - kValueWidth;
  const double height = kRow * static_cast<double>(bars.size()) + (marker > 0 ? 18 : 6);
  std::ostringstream svg;
  svg << "<svg class=\"bars\" width=\"" << Coord(kWidth) << "\" height=\"" << Coord(height)
      << "\" viewBox=\"0 0 " << Coord(kWidth) << " " << Coord(height) << "\">\n";
  for (size_t i = 0; i < bars.size(); ++i) {
    const SvgBar& bar = bars[i];
    const double y = kRow * static_cast<double>(i) + (marker > 0 ? 14 : 2);
    const double length = std::max(0.0, bar.value) / largest * plot;
    svg << "<text x=\"" << Coord(kLabelWidth - 8) << "\" y=\"" << Coord(y + kBar - 3)
        << "\" text-anchor=\"end\">" << HtmlEscape(bar.label) << "</text>"
        << "<rect class=\"" << HtmlEscape(bar.css_class) << "\" x=\"" << Coord(kLabelWidth)
        << "\" y=\"" << Coord(y) << "\" width=\"" << Coord(length) << "\" height=\"" << Coord(kBar)
        << "\"><title>" << HtmlEscape(bar.label + ": " + bar.value_text) << "</title></rect>"
        << "<text x=\"" << Coord(kLabelWidth + length + 6) << "\" y=\"" << Coord(y + kBar - 3)
        << "\">" << HtmlEscape(bar.value_text) << "</text>\n";
  }
  if (marker > 0) {
    const double x = kLabelWidth + marker / largest * plot;
    svg << "<line class=\"marker\" x1=\"" << Coord(x) << "\" x2=\"" << Coord(x)
        << "\" y1=\"10\" y2=\"" << Coord(height) << "\"/>"
        << "<text class=\"note\" x=\"" << Coord(x) << "\" y=\"9\" text-anchor=\"middle\">"
        << HtmlEscape(marker_text) << "</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

std::string StackedBarSvg(const std::vector<SvgBar>& parts) {
  double total = 0;
  for (const SvgBar& part : parts) total += std::max(0.0, part.value);
  if (total <= 0) total = 1;
  std::ostringstream svg;
  svg << "<svg class=\"stack\" width=\"" << Coord(kWidth) << "\" height=\"24\" viewBox=\"0 0 "
      << Coord(kWidth) << " 24\">\n";
  double x = 0;
  for (const SvgBar& part : parts) {
    const double width = std::max(0.0, part.value) / total * kWidth;
    svg << "<rect class=\"" << HtmlEscape(part.css_class) << "\" x=\"" << Coord(x)
        << "\" y=\"0\" width=\"" << Coord(width) << "\" height=\"24\"><title>"
        << HtmlEscape(part.label + ": " + part.value_text) << "</title></rect>\n";
    x += width;
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace shardsim::cli
