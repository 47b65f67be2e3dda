// SPDX-License-Identifier: Apache-2.0
// The SVG pieces of the HTML view (format_html.cpp, format_html_ranks.cpp): colours, axes, text, escaping.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace moebench::html_svg {

extern const char* const kSeriesColors[8];                  // series of a line chart
std::string phase_color(const std::string& ph);             // one colour per phase of the vocabulary
std::string heat_color(double t);                           // sequential scale for t in [0, 1]: white -> blue -> navy
std::string esc(const std::string& s);                      // HTML escaping
std::vector<double> nice_ticks(double hi, int target = 5);  // "nice" tick values covering [0, hi]
std::string tick_text(double v);
std::string svg_open(const std::string& id, int w, int h, const std::string& title);
std::string text(double x, double y, const std::string& s, const std::string& extra = "");
std::string not_available(const std::string& id, const std::string& why);

struct Frame {
    double x0, y0, w, h;  // plot area
};
/// Left (or right) axis with ticks and grid, from 0 to `hi`.
std::string y_axis(const Frame& f, double hi, const std::string& label, bool right = false);

}  // namespace moebench::html_svg

namespace moebench::formats_detail {
/// The HTML view's section on the ranks of a multi-process run (format_html_ranks.cpp): per-rank phase times and
/// the dispatch / combine byte matrices as heatmaps; "not available" for a single-process report.
std::string html_ranks_section(const nlohmann::json& report);
}  // namespace moebench::formats_detail
