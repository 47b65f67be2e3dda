// SPDX-License-Identifier: Apache-2.0
// The HTML view's ranks section (multi-process runs): each rank's mean phase times as one stacked bar (the
// straggler stands out), and the [src][dst] byte matrices of dispatch and combine as heatmaps.
#include "core/phase.hpp"

#include "common/flag_names.hpp"
#include "core/report_keys.hpp"
#include "report/formats.hpp"
#include "report/html_svg.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace moebench {

using namespace formats_detail;
using namespace html_svg;

namespace {

std::string chart_rank_phases(const json& ranks) {
    const json& per_rank = ranks.at("per_rank");
    double hi = 0;
    for (const json& r : per_rank) {
        double sum = 0;
        for (const auto& [ph, us] : r.at("phase_mean_us").items()) sum += us.get<double>();
        hi = std::max(hi, sum);
    }
    const int bar_h = 22, w = 900;
    const Frame f{110, 20, 740, static_cast<double>(bar_h * static_cast<int>(per_rank.size()) + 10)};
    std::string s = svg_open("chart-rank-phases", w, static_cast<int>(f.h) + 60, "mean phase time per rank");
    for (size_t i = 0; i < per_rank.size(); ++i) {
        const json& r = per_rank[i];
        const double y = f.y0 + static_cast<double>(i) * bar_h;
        s += text(f.x0 - 8, y + 15, fmt::format("rank {}", r.value("rank", int64_t{0})), "text-anchor=\"end\"");
        double x = f.x0;
        for (auto name : kPhaseNames) {  // execution order
            const std::string ph(name);
            if (!r.at("phase_mean_us").contains(ph)) continue;
            const double us = r["phase_mean_us"][ph].get<double>();
            const double bw = hi > 0 ? us / hi * f.w : 0;
            s += fmt::format(
                "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\"><title>rank {}: {} "
                "{:.1f} µs</title></rect>\n",
                x, y, bw, bar_h - 4, phase_color(ph), r.value("rank", int64_t{0}), esc(ph), us);
            x += bw;
        }
    }
    s += text(f.x0, f.y0 + f.h + 25,
              fmt::format("mean µs per step, summed over the layers run (measured); longest bar {:.1f} µs", hi),
              "class=\"small\"");
    return s + "</svg>\n";
}

std::string chart_matrix(const std::string& id, const std::string& title, const json& a, const json* b) {
    const size_t n = a.size();
    std::vector<double> cell(n * n, 0.0);
    double hi = 0;
    for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j < n; ++j) {
            double v = a[i][j].get<double>() + (b ? (*b)[i][j].get<double>() : 0.0);
            cell[i * n + j] = v;
            hi = std::max(hi, v);
        }
    const double cs = std::clamp(360.0 / static_cast<double>(std::max<size_t>(n, 1)), 6.0, 60.0);
    const int size = static_cast<int>(cs * static_cast<double>(n));
    std::string s = svg_open(id, size + 160, size + 70, title);
    s += text(70, 16, title, "class=\"small\"");
    for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j < n; ++j)
            s += fmt::format(
                "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\"><title>rank {} -> "
                "rank {}: {:.0f} bytes per step</title></rect>\n",
                70 + cs * static_cast<double>(j), 30 + cs * static_cast<double>(i), cs, cs,
                heat_color(hi > 0 ? cell[i * n + j] / hi : 0), i, j, cell[i * n + j]);
    s += text(70 + size / 2.0, 30 + size + 20, "receiving rank", "text-anchor=\"middle\" class=\"small\"");
    s += fmt::format(
        "<text transform=\"translate(50,{:.1f}) rotate(-90)\" text-anchor=\"middle\" class=\"small\">sending "
        "rank</text>\n",
        30 + size / 2.0);
    return s + "</svg>\n";
}

}  // namespace

namespace formats_detail {

std::string html_ranks_section(const json& report) {
    for (const json& run : report.at(keys::kRuns)) {
        const json* ranks = find_path(run, {"ranks", "per_rank"});
        const json* traffic = find_path(run, {"traffic"});
        if (!ranks || !traffic) continue;
        std::string h = "<p class=\"note\">" + esc(run_label(run)) + ": " + std::to_string(ranks->size()) +
                        " processes (" + esc(str_at(run, {"ranks", "a2a"})) + " dispatch, " +
                        esc(str_at(run, {"ranks", "dispatch_dtype"})) +
                        "). The report's latency takes the slowest rank "
                        "per phase.</p>\n";
        h += chart_rank_phases(run["ranks"]);
        h += chart_matrix("chart-dispatch-bytes", "dispatch bytes per step (payload + metadata, counted)",
                          (*traffic)["dispatch_payload_bytes"], &(*traffic)["dispatch_meta_bytes"]);
        h += chart_matrix("chart-combine-bytes", "combine bytes per step (counted)",
                          (*traffic)["combine_payload_bytes"], nullptr);
        return h;
    }
    return not_available("chart-rank-phases",
                         "no point ran as several processes (mpirun -np N moebench run " + flag_of("ep") + " N)");
}

}  // namespace formats_detail

}  // namespace moebench
