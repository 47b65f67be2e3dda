// SPDX-License-Identifier: Apache-2.0
// The terminal view of a moebench.calibration/1 document (compare/calibrate.hpp): the parameters before and after,
// the error table (per report: its phases, then its step), and the errors summed up (overall and per phase).
#include "report/formats.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace moebench::formats_detail {

namespace {

constexpr double kTargetPct = 25;  // the summary's within_25pct

bool has_number(const json& j, const char* key) { return j.contains(key) && j.at(key).is_number(); }
std::string us_text(const json& row, const char* key) {
    return has_number(row, key) ? fmt::format("{:.1f}", row.at(key).get<double>()) : "-";
}
std::string pct(const json& j, const char* key) {
    return has_number(j, key) ? fmt::format("{:+.1f}%", 100.0 * j.at(key).get<double>()) : "-";
}

std::string spread_text(const json& s) {
    if (!s.is_object() || s.value("count", int64_t(0)) == 0) return "none";
    return fmt::format("|error| median {:.1f}%, 90th percentile {:.1f}%, max {:.1f}% ({}: {}); {} of {} within {:.0f}%",
                       100 * num_at(s, {"median_abs_error"}), 100 * num_at(s, {"p90_abs_error"}),
                       100 * num_at(s, {"max_abs_error"}), str_at(s, {"worst"}), pct(s, "worst_error"),
                       s.value("within_25pct", int64_t(0)), s.value("count", int64_t(0)), kTargetPct);
}

}  // namespace

std::string render_calibration_text(const json& doc) {
    const bool fitted = doc.value("fitted", false);
    const json empty = json::array();
    const json& params = doc.contains("params") ? doc.at("params") : empty;
    const json& rows = doc.contains("rows") ? doc.at("rows") : empty;
    std::string s;
    s += fmt::format("calibrate: profile {}, {} parameter sets priced\n", str_at(doc, {"hardware"}, "?"),
                     static_cast<int64_t>(num_at(doc, {"objective", "parameter_sets_priced"})));
    s += fmt::format("{:<24} {:>12} {:>12}  {}\n", "parameter", "before", fitted ? "after" : "", "");
    for (const json& p : params) {
        const std::string status = str_at(p, {"status"});
        const std::string why = status == "unused" ? "unused: no report's modeled time depends on it"
                                : status == "not determined"
                                    ? "not determined: no phase is bound by it at the fit; kept"
                                : fitted ? "fitted"
                                         : "";
        s += fmt::format("{:<24} {:>12.4g} {:>12}  {}\n", str_at(p, {"key"}), num_at(p, {"before"}),
                         fitted ? fmt::format("{:.4g}", num_at(p, {"after"})) : "", why);
    }
    s += fmt::format("sum of ln(modeled / measured)^2 over {} phase rows: {:.4g}",
                     static_cast<int64_t>(num_at(doc, {"objective", "phase_rows"})),
                     num_at(doc, {"objective", "sum_sq_log_error_before"}));
    s += fitted ? fmt::format(" before, {:.4g} after\n\n", num_at(doc, {"objective", "sum_sq_log_error_after"}))
                : "\n\n";

    size_t wn = 16;
    for (const json& x : rows) wn = std::max(wn, str_at(x, {"phase"}).size() + 2);
    s += fmt::format("{:<{}} {:>12} {:>12} {:>10}", "report / phase", wn, "measured_us", "modeled_us", "error");
    s += fitted ? fmt::format(" {:>12} {:>10}\n", "after_us", "error") : "\n";
    std::string current;
    for (const json& x : rows) {
        const std::string report = str_at(x, {"report"});
        if (report != current) s += report + "\n", current = report;
        s += fmt::format("{:<{}} {:>12} {:>12} {:>10}", "  " + str_at(x, {"phase"}), wn, us_text(x, "measured_us"),
                         us_text(x, "modeled_before_us"), pct(x, "error_before"));
        s += fitted ? fmt::format(" {:>12} {:>10}\n", us_text(x, "modeled_after_us"), pct(x, "error_after")) : "\n";
    }
    s += fmt::format("\nerrors (modeled / measured - 1), {}:\n",
                     fitted ? "before -> after the fit" : "of the profile as given");
    const json summary = doc.value("summary", json::object());
    for (bool steps : {false, true}) {
        const std::string which = steps ? "steps" : "phases";
        s += fmt::format("  {:<7} {}\n", which, spread_text(summary.value(which + "_before", json())));
        if (fitted) s += fmt::format("  {:<7} {}\n", "", spread_text(summary.value(which + "_after", json())));
    }
    // The phases in the order the rows first give them an error (the step last), as the summary was made.
    const char* error_key = fitted ? "error_after" : "error_before";
    std::vector<std::string> order;
    for (const json& x : rows) {
        const std::string phase = str_at(x, {"phase"});
        if (has_number(x, error_key) && std::find(order.begin(), order.end(), phase) == order.end())
            order.push_back(phase);
    }
    std::stable_partition(order.begin(), order.end(), [](const std::string& p) { return p != "step"; });
    s += fmt::format("per phase over the reports{} (median error; worst):\n", fitted ? ", after the fit" : "");
    const json* per_phase = find_path(doc, {"summary", "per_phase"});
    for (const std::string& phase : order) {
        if (!per_phase || !per_phase->contains(phase)) continue;
        const json& j = per_phase->at(phase);
        s += fmt::format("  {:<18} {:>8}  worst {:>8} ({})\n", phase, pct(j, "median_error"), pct(j, "worst_error"),
                         str_at(j, {"worst_report"}));
    }
    return s;
}

}  // namespace moebench::formats_detail
