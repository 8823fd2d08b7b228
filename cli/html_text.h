// Text for the HTML and SVG that shardsim writes: escaping, and numbers for coordinates.
#pragma once

#include <string>
#include <string_view>

namespace shardsim::cli {

// `text` with &, <, >, " and ' replaced by entities: safe inside elements and quoted attributes.
std::string HtmlEscape(std::string_view text);

// A coordinate rounded to a tenth, without trailing zeros ("12.3", "40", "-0.5"): compact markup
// for pages with many thousands of shapes.
std::string Coord(double value);

// The CSS every page of shardsim starts with (body, headings, tables, numeric cells).
std::string_view PageBaseStyle();

}  // namespace shardsim::cli
