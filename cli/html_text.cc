#include "cli/html_text.h"

#include <cmath>
#include <cstdio>

namespace shardsim::cli {

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Coord(double value) {
  const double tenths = std::round(value * 10);
  if (!std::isfinite(tenths) || tenths == 0) return "0";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", tenths / 10);
  std::string text = buffer;
  if (text.size() > 2 && text.compare(text.size() - 2, 2, ".0") == 0) text.resize(text.size() - 2);
  return text;
}

}  // namespace shardsim::cli
