// SPDX-License-Identifier: Apache-2.0
// The terminal view of a moebench.report/1 document: a sweep's table of points with its knees and golden point, or
// each run's compact summary (console_table.cpp).
#include "core/report_keys.hpp"
#include "report/console_table.hpp"
#include "report/formats.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace moebench::formats_detail {

namespace {

std::string sweep_summary(const json& runs, const json& s) {
    std::string o =
        fmt::format("{:<44} {:>8} {:>12} {:>12} {:>14}\n", "point", keys::kStatus, "p50 ms", "p95 ms", "tokens/s");
    for (const auto& r : runs) {
        std::string st = r.value(keys::kStatus, "ok");
        std::string label = run_label(r);
        if (label.size() > 44) label = label.substr(0, 41) + "...";
        if (st == "ok") {
            const bool fits = !r.contains("fits") || r["fits"] != false;  // a modeled point that does not fit its GPUs
            o += fmt::format("{:<44} {:>8} {:>12.3f} {:>12.3f} {:>14.1f}\n", label, fits ? st : "no fit",
                             num_at(r, {keys::kLatency, keys::kStep, keys::kP50Us}) / 1000.0,
                             num_at(r, {keys::kLatency, keys::kStep, keys::kP95Us}) / 1000.0,
                             num_at(r, {keys::kThroughput, keys::kTokensPerS}));
        } else {
            std::string why = r.value(st == "skipped" ? "skip_reason" : "error", "");
            if (why.size() > 70) why = why.substr(0, 67) + "...";
            o += fmt::format("{:<44} {:>8}  {}\n", label, st, why);
        }
    }
    // A report read from a file may lack any key: a const json's operator[] on a missing key reads freed memory, so
    // every lookup below goes through find_path.
    const json* varying = find_path(s, {"varying_axes"});
    const auto is_varying = [&](const std::string& axis) {
        return varying && varying->is_array() &&
               std::find(varying->begin(), varying->end(), json(axis)) != varying->end();
    };
    if (const json* all = find_path(s, {"series"}); all && all->is_array())
        for (const auto& series : *all)
            if (const json* knee = find_path(series, {"knee"}); knee && knee->is_object()) {
                std::string fixed;
                if (const json* axes = find_path(series, {"fixed"}); axes && axes->is_object())
                    for (const auto& [k, v] : axes->items())
                        if (is_varying(k)) fixed += (fixed.empty() ? "" : " ") + k + "=" + scalar_text(v);
                o += "knee" + (fixed.empty() ? std::string() : " [" + fixed + "]") + ": " + knee->value("reason", "") +
                     "\n";
            }
    if (const json* golden = find_path(s, {"golden"}); golden && golden->is_object())
        o += "golden point: " + golden->value("reason", "") + "\n";
    else if (s.contains("golden_reason"))
        o += "golden point: none (" + s.value("golden_reason", "") + ")\n";
    if (s.value("stop_reason", "done") != "done")
        o += fmt::format("stopped early ({}): {} point(s) not run\n", s.value("stop_reason", ""),
                         s.contains("not_run") ? s["not_run"].size() : size_t{0});
    return o;
}

}  // namespace

std::string render_report_text(const json& report) {
    const json& runs = report.at(keys::kRuns);
    if (report.contains("sweep") && report["sweep"].is_object()) return sweep_summary(runs, report["sweep"]);
    std::string s;
    for (const json& run : runs) s += console_summary(run);
    return s;
}

}  // namespace moebench::formats_detail
