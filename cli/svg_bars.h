// Small inline SVG bar charts for the report page: horizontal bars with labels, and one stacked
// bar that splits a whole into parts.
#pragma once

#include <string>
#include <vector>

namespace shardsim::cli {

struct SvgBar {
  std::string label;       // left of the bar (plain text; escaped when drawn)
  double value = 0;        // its length, in the chart's unit (>= 0)
  std::string value_text;  // right of the bar, with its unit
  std::string css_class;   // the fill's class
};

// One row per bar, lengths in proportion to value / scale_max (the largest value when scale_max
// is 0). A `marker` > 0 draws a dashed vertical line at that value labelled `marker_text` (HBM
// capacity against memory bars).
std::string BarsSvg(const std::vector<SvgBar>& bars, double scale_max = 0, double marker = 0,
                    const std::string& marker_text = "");

// One bar across the width split into `parts` in proportion to their values, each with its label
// and value_text as hover text (the page writes the legend).
std::string StackedBarSvg(const std::vector<SvgBar>& parts);

}  // namespace shardsim::cli
