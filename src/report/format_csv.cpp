// SPDX-License-Identifier: Apache-2.0
// CSV view: one row per point x phase, fixed documented columns (docs/csv-columns.md); points that did not run
// get one row with an empty phase and their reason.
#include "core/phase.hpp"
#include "core/report_keys.hpp"
#include "report/formats.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <regex>
#include <set>

namespace moebench {

using namespace formats_detail;

const std::vector<std::string>& csv_columns() {
    static const std::vector<std::string> kColumns = {"point",
                                                      keys::kStatus,
                                                      "reason",
                                                      "model",
                                                      "backend",
                                                      "mode",
                                                      "batch",
                                                      "seq_len",
                                                      "context",
                                                      "num_tokens",
                                                      "routing",
                                                      "ep",
                                                      "capacity_factor",
                                                      "soft_topn",
                                                      "layers",
                                                      "extra_axes",
                                                      "phase",
                                                      "phase_group",
                                                      "phase_mean_us",
                                                      "phase_p50_us",
                                                      "phase_p95_us",
                                                      "phase_p99_us",
                                                      "phase_min_us",
                                                      "phase_max_us",
                                                      "phase_stdev_us",
                                                      "phase_cv",
                                                      "phase_share",
                                                      "step_mean_us",
                                                      "step_p50_us",
                                                      "step_p95_us",
                                                      "step_p99_us",
                                                      "step_cv",
                                                      keys::kTokensPerS,
                                                      keys::kIterations,
                                                      "load_max_over_mean_avg",
                                                      "timing_source",
                                                      keys::kLowConfidence,
                                                      "energy_j_per_token",
                                                      "energy_scope",
                                                      "host_contended",
                                                      "throttled",
                                                      "rank",
                                                      "tp",
                                                      "attention_dp",
                                                      "moe_tp",
                                                      "moe_ep",
                                                      "dtype",
                                                      "expert_dtype",
                                                      "kv_dtype",
                                                      "first_layer",
                                                      "redundant_experts",
                                                      "resident_experts",
                                                      "offload_ratio",
                                                      "offload_policy",
                                                      "prune_below"};
    return kColumns;
}

namespace {

// A plain decimal number ("-12", "3.5", "-1e-05"): written as is, so a negative number stays a number.
bool is_number_text(const std::string& s) {
    static const std::regex kNumber(R"(-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?)");
    return std::regex_match(s, kNumber);
}

// Text a spreadsheet would run as a formula (OWASP "CSV injection": a cell starting with = + - @, tab or carriage
// return; model names and routing specs come from third parties) gets a leading single quote, which makes it text.
std::string neutralise_formula(const std::string& s) {
    if (s.empty() || std::string("=+-@\t\r").find(s.front()) == std::string::npos || is_number_text(s)) return s;
    return "'" + s;
}

// RFC 4180: quote fields holding a comma, quote or line break; double the quotes. Formulas neutralised first.
std::string csv_field(const std::string& text) {
    const std::string s = neutralise_formula(text);
    if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
    std::string o = "\"";
    for (char c : s) o += (c == '"') ? std::string("\"\"") : std::string(1, c);
    return o + "\"";
}

std::string num_text(const json& j, std::initializer_list<const char*> path) {
    const json* v = find_path(j, path);
    if (!v || !v->is_number()) return "";
    return scalar_text(*v);
}

std::string g17(double v) { return fmt::format("{}", v); }

}  // namespace

namespace formats_detail {

std::string render_csv(const json& report) {
    static const std::set<std::string> kStandardAxes = {"model",
                                                        "backend",
                                                        "mode",
                                                        "batch",
                                                        "seq_len",
                                                        "context",
                                                        "routing",
                                                        "ep",
                                                        "capacity_factor",
                                                        "soft_topn",
                                                        "layers",
                                                        "tp",
                                                        "attention_dp",
                                                        "moe_tp",
                                                        "moe_ep",
                                                        "dtype",
                                                        "expert_dtype",
                                                        "kv_dtype",
                                                        "first_layer",
                                                        "redundant_experts",
                                                        "resident_experts",
                                                        "offload_ratio",
                                                        "offload_policy",
                                                        "prune_below"};
    std::string out;
    const auto& cols = csv_columns();
    for (size_t i = 0; i < cols.size(); ++i) out += (i ? "," : "") + cols[i];
    out += "\n";
    const std::string report_model = str_at(report, {"config", "run", "model"});
    size_t index = 0;
    for (const auto& run : report.at(keys::kRuns)) {
        std::string status = run.value(keys::kStatus, "ok");
        std::string reason = status == "skipped" ? run.value("skip_reason", "") : run.value("error", "");
        const json axes = run.value(keys::kAxes, json::object());
        auto axis = [&](const char* k) -> std::string {
            if (axes.contains(k)) return scalar_text(axes[k]);
            if (run.contains(k)) return scalar_text(run[k]);
            return "";
        };
        std::string model = run.contains("model") ? scalar_text(run["model"]) : axis("model");
        if (model.empty()) model = report_model;
        std::string extra;
        for (const auto& [k, v] : axes.items())
            if (!kStandardAxes.count(k)) extra += (extra.empty() ? "" : ";") + k + "=" + scalar_text(v);
        double load_sum = 0;
        int load_n = 0;
        if (const json* pl = find_path(run, {keys::kExpertLoad, keys::kPerLayer}); pl && pl->is_array())
            for (const auto& l : *pl)
                if (l.contains(keys::kMaxOverMean) && l[keys::kMaxOverMean].is_number()) {
                    load_sum += l[keys::kMaxOverMean].get<double>();
                    ++load_n;
                }
        std::vector<std::string> point_cols = {std::to_string(index),
                                               status,
                                               reason,
                                               model,
                                               axis("backend"),
                                               axis("mode"),
                                               axis("batch"),
                                               axis("seq_len"),
                                               axis("context"),
                                               num_text(run, {"num_tokens"}),
                                               axis("routing"),
                                               axis("ep"),
                                               axis("capacity_factor"),
                                               axis("soft_topn"),
                                               axis("layers"),
                                               extra};
        const json* step_stats = find_path(run, {keys::kLatency, keys::kStep});
        const EnergyPerToken energy = energy_per_token(run);
        // Throttled if either the host or the device says so; unknown only when neither knows.
        std::string throttled = tri_state(run, {keys::kConditions, "device", "throttled"});
        if (throttled != "yes") {
            const std::string host = tri_state(run, {keys::kConditions, "host", "throttled"});
            if (host == "yes" || throttled.empty()) throttled = host.empty() ? throttled : host;
        }
        std::vector<std::string> step_cols = {
            num_text(run, {keys::kLatency, keys::kStep, keys::kMeanUs}),
            num_text(run, {keys::kLatency, keys::kStep, keys::kP50Us}),
            num_text(run, {keys::kLatency, keys::kStep, keys::kP95Us}),
            num_text(run, {keys::kLatency, keys::kStep, keys::kP99Us}),
            num_text(run, {keys::kLatency, keys::kStep, "cv"}), num_text(run, {keys::kThroughput, keys::kTokensPerS}),
            // the steps behind the statistics: measured, or modeled (sim; timing_source says which)
            num_text(run, {keys::kIterations, find_path(run, {keys::kIterations, "modeled"}) ? "modeled" : "measured"}),
            load_n ? g17(load_sum / load_n) : "", str_at(run, {keys::kLatency, "source"}),
            fmt::format("{}",
                        fmt::join(step_stats ? low_confidence_keys(*step_stats) : std::vector<std::string>{}, ";")),
            energy.available ? g17(energy.joules_per_token) : "",
            energy.available ? energy.where + ": " + energy.scope : energy.scope,
            tri_state(run, {keys::kConditions, "host", "contended"}), throttled};
        auto emit = [&](const std::vector<std::string>& phase_cols, const std::vector<std::string>& steps = {},
                        const std::string& rank = "") {
            std::vector<std::string> row = point_cols;
            row.insert(row.end(), phase_cols.begin(), phase_cols.end());
            const std::vector<std::string>& sc = steps.empty() ? step_cols : steps;
            row.insert(row.end(), sc.begin(), sc.end());
            row.push_back(rank);
            for (const char* k :
                 {"tp", "attention_dp", "moe_tp", "moe_ep", "dtype", "expert_dtype", "kv_dtype", "first_layer",
                  "redundant_experts", "resident_experts", "offload_ratio", "offload_policy", "prune_below"})
                row.push_back(axis(k));  // appended after `rank`: the columns keep their places
            for (size_t i = 0; i < row.size(); ++i) {
                if (i) out += ',';  // (appending in two steps: GCC 12 -Wrestrict false positive on "," + s)
                out += csv_field(row[i]);
            }
            out += "\n";
        };
        std::vector<std::string> phases = run_phases(run);
        if (phases.empty()) emit(std::vector<std::string>(11, ""));
        for (const auto& ph : phases) {
            const json& p = run[keys::kLatency][keys::kPhases][ph];
            auto f = [&](const char* k) { return num_text(p, {k}); };
            std::string group(phase_group_name(ph));
            emit({ph, group, f(keys::kMeanUs), f(keys::kP50Us), f(keys::kP95Us), f(keys::kP99Us), f("min_us"),
                  f("max_us"), f("stdev_us"), f("cv"), f("share")});
        }
        // A multi-process run: its rows above are the job's (the slowest rank per phase); then each rank's own mean
        // per phase and step, with its rank (the other statistics are the job's only).
        if (const json* ranks = find_path(run, {"ranks", "per_rank"}); ranks && ranks->is_array())
            for (const json& r : *ranks) {
                std::vector<std::string> steps(step_cols.size(), "");
                steps[0] = num_text(r, {"step_mean_us"});
                steps[8] = step_cols[8];  // timing_source
                for (const auto& ph : phases) {
                    std::string group(phase_group_name(ph));
                    emit({ph, group, num_text(r, {"phase_mean_us", ph.c_str()}), "", "", "", "", "", "", "", ""}, steps,
                         scalar_text(r.value("rank", json())));
                }
            }
        ++index;
    }
    return out;
}

}  // namespace formats_detail

}  // namespace moebench
