// SPDX-License-Identifier: Apache-2.0
// Markdown view: the summary tables (points, phase breakdown, expert load, sweep verdicts) for pasting into
// issues and pull requests.
#include "core/phase.hpp"

#include "common/flag_names.hpp"
#include "core/report_keys.hpp"
#include "report/formats.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace moebench {

using namespace formats_detail;

namespace {

std::string ms(double us) { return fmt::format("{:.3f}", us / 1000.0); }

}  // namespace

namespace formats_detail {

namespace {

// The title and where the report came from.
void md_header(const json& report, const json& runs, std::string& o) {
    o += report.contains("sweep") ? "# moebench sweep\n\n" : "# moebench run\n\n";
    o += fmt::format("- command: {}\n", md_code(str_at(report, {"command"}, "?")));
    // A report rebuilt from a sweep journal has no tool or creation block: leave those lines out, not "?".
    if (find_path(report, {"tool"}))
        o += fmt::format("- tool: moebench {} ({}), build {}\n", md_cell(str_at(report, {"tool", "version"}, "?")),
                         md_cell(str_at(report, {"tool", "git_rev"}, "?")),
                         md_cell(str_at(report, {"tool", "build_type"}, "?")));
    if (find_path(report, {"created_utc"}))
        o += fmt::format("- created: {}\n", md_cell(str_at(report, {"created_utc"}, "?")));
    if (const json* env = find_path(report, {"environment"}))
        o += fmt::format("- machine: {} ({} CPUs), backend {}\n", md_cell(str_at(*env, {"cpu_model"}, "?")),
                         md_cell(scalar_text(env->value("num_cpus", json()))), md_cell(str_at(*env, {"backend"}, "?")));
    std::string model = !runs.empty() && runs[0].contains("model") ? scalar_text(runs[0]["model"])
                                                                   : str_at(report, {"config", "run", "model"});
    if (!model.empty()) o += fmt::format("- model: {}\n", md_cell(model));
}

// One row per point: the step's statistics, throughput, load and energy; `golden` is marked.
void md_points(const json& runs, long golden, std::string& o) {
    o += fmt::format(
        "\n## Points\n\nLatency is the {} end-to-end step of the layers run; throughput is tokens per "
        "second of that step.\n\n",
        times_source(runs));
    o += "| # | point | status | step mean ms | p50 ms | p95 ms | p99 ms | cv | tokens/s | max/mean load | J/token |\n";
    o += "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    for (size_t i = 0; i < runs.size(); ++i) {
        const json& r = runs[i];
        std::string label = run_label(r) + (static_cast<long>(i) == golden ? " **(golden)**" : "");
        if (!run_ok(r)) {
            std::string why =
                r.value(keys::kStatus, "") == "skipped" ? r.value("skip_reason", "") : r.value("error", "");
            o += fmt::format("| {} | {} | {}: {} | | | | | | | | |\n", i, md_cell(label),
                             md_cell(r.value(keys::kStatus, "")), md_cell(why));
            continue;
        }
        double load = 0;
        int n = 0;
        if (const json* pl = find_path(r, {keys::kExpertLoad, keys::kPerLayer}); pl && pl->is_array())
            for (const auto& l : *pl) load += l.value(keys::kMaxOverMean, 0.0), ++n;
        // A percentile the sample count cannot support is marked "~" (docs/report-schema.md, low_confidence).
        const json* step = find_path(r, {keys::kLatency, keys::kStep});
        const std::vector<std::string> weak = step ? low_confidence_keys(*step) : std::vector<std::string>{};
        const auto pct = [&](const char* key) {
            const bool low = std::find(weak.begin(), weak.end(), key) != weak.end();
            return (low ? "~" : "") + ms(num_at(r, {keys::kLatency, keys::kStep, key}));
        };
        const EnergyPerToken energy = energy_per_token(r);
        o += fmt::format("| {} | {} | ok | {} | {} | {} | {} | {:.3f} | {:.1f} | {} | {} |\n", i, md_cell(label),
                         ms(num_at(r, {keys::kLatency, keys::kStep, keys::kMeanUs})),
                         ms(num_at(r, {keys::kLatency, keys::kStep, keys::kP50Us})), pct(keys::kP95Us),
                         pct(keys::kP99Us), num_at(r, {keys::kLatency, keys::kStep, "cv"}),
                         num_at(r, {keys::kThroughput, keys::kTokensPerS}), n ? fmt::format("{:.2f}", load / n) : "",
                         energy.available ? fmt::format("{:.4g}", energy.joules_per_token) : "");
    }
}

// What "~" and J/token mean, and the points not measured on a quiet machine.
void md_notes(const json& runs, std::string& o) {
    o += "\n`~`: a percentile from fewer samples than it needs (p95: 20, p99: 100), an interpolation next to the "
         "maximum. J/token: the GPU's energy counter (cuda) or the CPU packages' RAPL counter; empty when not "
         "readable.\n";
    for (size_t i = 0; i < runs.size(); ++i) {
        const bool device_throttled = tri_state(runs[i], {keys::kConditions, "device", "throttled"}) == "yes";
        const json* note = find_path(runs[i], {keys::kConditions, device_throttled ? "device" : "host", "note"});
        if (tri_state(runs[i], {keys::kConditions, "host", "contended"}) == "yes" ||
            tri_state(runs[i], {keys::kConditions, "host", "throttled"}) == "yes" ||
            tri_state(runs[i], {keys::kConditions, "device", "throttled"}) == "yes")
            o += fmt::format("\n**Point {} was not measured on a quiet machine:** {}\n", i,
                             md_cell(note && note->is_string() ? note->get<std::string>() : "see conditions"));
    }
}

void md_phases(const json& runs, std::string& o) {
    // Phase breakdown: phases as rows, ok points as columns (at most 12 columns; the CSV has them all).
    std::vector<size_t> cols;
    for (size_t i = 0; i < runs.size() && cols.size() < 12; ++i)
        if (run_ok(runs[i]) && !run_phases(runs[i]).empty()) cols.push_back(i);
    if (!cols.empty()) {
        o += "\n## Phase breakdown (mean µs per step, share of the phase sum)\n\n| phase | group |";
        for (size_t c : cols) {
            o += ' ';  // (appending in steps: GCC 12 -Wrestrict false positive on " " + s)
            o += md_cell(run_label(runs[c]));
            o += " |";
        }
        o += "\n|---|---|";
        for (size_t c = 0; c < cols.size(); ++c) o += "---:|";
        o += "\n";
        for (auto name : kPhaseNames) {
            std::string ph(name);
            bool any = false;
            for (size_t c : cols) any = any || find_path(runs[c], {keys::kLatency, keys::kPhases, ph.c_str()});
            if (!any) continue;
            o += "| " + ph + " | " + std::string(phase_group_name(ph)) + " |";
            for (size_t c : cols) {
                const json* p = find_path(runs[c], {keys::kLatency, keys::kPhases, ph.c_str()});
                o += p ? fmt::format(" {:.1f} ({:.1f}%) |", num_at(*p, {keys::kMeanUs}), 100.0 * num_at(*p, {"share"}))
                       : " |";
            }
            o += "\n";
        }
        if (runs.size() > cols.size())
            o += "\n(first 12 ok points shown; `moebench report " + flag_of("format") + " csv` has every point)\n";
    }
}

void md_expert_load(const json& runs, long golden, std::string& o) {
    // Expert load of the golden point, else the first ok point.
    long show = golden >= 0 ? golden : -1;
    for (size_t i = 0; show < 0 && i < runs.size(); ++i)
        if (run_ok(runs[i])) show = static_cast<long>(i);
    if (show >= 0) {
        const json* pl = find_path(runs[static_cast<size_t>(show)], {keys::kExpertLoad, keys::kPerLayer});
        if (pl && pl->is_array() && !pl->empty()) {
            o += fmt::format("\n## Expert load ({}, counted)\n\n", md_cell(run_label(runs[static_cast<size_t>(show)])));
            o += "| layer | max/mean | cv | gini | top-3 share | idle experts | dropped "
                 "|\n|---:|---:|---:|---:|---:|---:|---:|\n";
            for (const auto& l : *pl)
                o += fmt::format("| {} | {:.3f} | {:.3f} | {:.3f} | {:.3f} | {} | {} |\n",
                                 md_cell(scalar_text(l.value("layer", json()))), l.value(keys::kMaxOverMean, 0.0),
                                 l.value("cv", 0.0), l.value("gini", 0.0), l.value("top3_share", 0.0),
                                 md_cell(scalar_text(l.value("idle_experts", json()))),
                                 md_cell(scalar_text(l.value("dropped", json()))));
        }
    }
}

void md_sweep(const json& report, std::string& o) {
    const json& s = report["sweep"];
    o += "\n## Sweep\n\n";
    o += fmt::format("- points: {} ({} ok, {} skipped, {} failed, {} resumed from the journal, {} not run)\n",
                     md_cell(scalar_text(s.value("num_points", json()))), md_cell(scalar_text(s.value("ok", json()))),
                     md_cell(scalar_text(s.value("skipped", json()))), md_cell(scalar_text(s.value("failed", json()))),
                     md_cell(scalar_text(s.value("resumed", json()))),
                     s.contains("not_run") && s["not_run"].is_array() ? s["not_run"].size() : 0);
    o += fmt::format("- stop: {}\n", md_cell(s.value("stop_reason", "done")));
    if (s.contains("knee_rule")) o += "- " + md_cell(s.value("knee_rule", "")) + "\n";
    if (s.contains("golden_rule")) o += "- " + md_cell(s.value("golden_rule", "")) + "\n";
    if (s.contains("golden") && !s["golden"].is_null())
        o += "\n**Golden point**: " + md_cell(s["golden"].value("reason", "")) + "\n";
    else if (s.contains("golden_reason"))
        o += "\n**Golden point**: none — " + md_cell(s.value("golden_reason", "")) + "\n";
    if (s.contains("series"))
        for (const auto& se : s["series"]) {
            if (!se.contains("knee") || se["knee"].is_null()) continue;
            std::string fixed;
            const json fixed_axes = se.value("fixed", json::object());
            for (const auto& [k, v] : fixed_axes.items())
                if (s.contains("varying_axes") &&
                    std::find(s["varying_axes"].begin(), s["varying_axes"].end(), json(k)) != s["varying_axes"].end())
                    fixed += (fixed.empty() ? "" : ", ") + md_cell(k) + "=" + md_cell(scalar_text(v));
            o += "\n**Knee**" + (fixed.empty() ? std::string() : " (" + fixed + ")") + ": " +
                 md_cell(se["knee"].value("reason", "")) + "\n";
        }
}

}  // namespace

std::string render_markdown(const json& report) {
    std::string o;
    const json& runs = report.at(keys::kRuns);
    const long golden = golden_run_index(report);
    md_header(report, runs, o);
    md_points(runs, golden, o);
    md_notes(runs, o);
    md_phases(runs, o);
    md_expert_load(runs, golden, o);
    if (report.contains("sweep")) md_sweep(report, o);
    return o;
}

}  // namespace formats_detail

}  // namespace moebench
