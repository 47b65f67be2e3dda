// SPDX-License-Identifier: Apache-2.0
#include "report/html_svg.hpp"

#include "core/phase.hpp"
#include "report/formats.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace moebench::html_svg {

using namespace formats_detail;

const char* const kSeriesColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                     "#ff7f0e", "#17becf", "#8c564b", "#e377c2"};

// Each phase's colour is its row's in the phase table.
std::string phase_color(const std::string& ph) {
    auto p = phase_from_name(ph);
    return p ? std::string(phase_info(*p).color) : "#000000";
}

// Sequential colour scale for counts: white -> blue -> dark navy.
std::string heat_color(double t) {
    t = std::clamp(t, 0.0, 1.0);
    struct Stop {
        double t, r, g, b;
    };
    static const Stop stops[] = {{0.0, 247, 251, 255}, {0.35, 107, 174, 214}, {0.7, 33, 113, 181}, {1.0, 8, 48, 107}};
    for (int i = 0; i < 3; ++i) {
        if (t <= stops[i + 1].t) {
            double u = (t - stops[i].t) / (stops[i + 1].t - stops[i].t);
            auto mix = [&](double a, double b) { return static_cast<int>(std::lround(a + (b - a) * u)); };
            return fmt::format("#{:02x}{:02x}{:02x}", mix(stops[i].r, stops[i + 1].r), mix(stops[i].g, stops[i + 1].g),
                               mix(stops[i].b, stops[i + 1].b));
        }
    }
    return "#08306b";
}

std::string esc(const std::string& s) { return html_escape(s); }

// "Nice" tick values covering [0, hi].
std::vector<double> nice_ticks(double hi, int target) {
    std::vector<double> t;
    if (!(hi > 0)) return {0.0};
    double raw = hi / target, mag = std::pow(10.0, std::floor(std::log10(raw)));
    double step = mag;
    for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
        if (raw <= m * mag) {
            step = m * mag;
            break;
        }
    // Up to the first tick at or above hi, so the axis always covers the data.
    for (double v = 0; t.size() < 40; v += step) {
        t.push_back(v);
        if (v >= hi * 0.99999) break;
    }
    return t;
}

std::string tick_text(double v) {
    if (v == 0) return "0";
    double a = std::fabs(v);
    if (a >= 1e9) return fmt::format("{:.3g}G", v / 1e9);
    if (a >= 1e6) return fmt::format("{:.3g}M", v / 1e6);
    if (a >= 1e4) return fmt::format("{:.3g}k", v / 1e3);
    return fmt::format("{:.4g}", v);
}

std::string svg_open(const std::string& id, int w, int h, const std::string& title) {
    return fmt::format(
        "<svg id=\"{}\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
        "role=\"img\" aria-label=\"{}\">\n",
        esc(id), w, h, w, h, esc(title));
}

std::string text(double x, double y, const std::string& s, const std::string& extra) {
    return fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" {}>{}</text>\n", x, y, extra, esc(s));
}

std::string not_available(const std::string& id, const std::string& why) {
    return svg_open(id, 900, 60, "not available") + text(10, 35, "not available: " + why, "class=\"na\"") + "</svg>\n";
}

// Left axis with ticks and grid, from 0 to `hi`.
std::string y_axis(const Frame& f, double hi, const std::string& label, bool right) {
    std::string s;
    double x = right ? f.x0 + f.w : f.x0;
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" class=\"axis\"/>\n", x, f.y0,
                     f.y0 + f.h);
    for (double v : nice_ticks(hi)) {
        double y = f.y0 + f.h - (hi > 0 ? v / hi : 0) * f.h;
        if (y < f.y0 - 0.5) break;
        if (!right)
            s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" class=\"grid\"/>\n", f.x0,
                             y, f.x0 + f.w, y);
        s += text(right ? x + 6 : x - 6, y + 4, tick_text(v), right ? "" : "text-anchor=\"end\"");
    }
    double lx = right ? x + 55 : x - 55;
    s += fmt::format("<text transform=\"translate({:.1f},{:.1f}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n", lx,
                     f.y0 + f.h / 2, esc(label));
    return s;
}

}  // namespace moebench::html_svg
