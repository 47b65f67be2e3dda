// SPDX-License-Identifier: Apache-2.0
// The format dispatcher and the small JSON helpers every view shares.
#include "report/formats.hpp"

#include "common/error.hpp"
#include "core/phase.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace moebench {

const std::vector<std::string>& report_formats() {
    static const std::vector<std::string> kFormats = {"csv", "md", "html", "trace", "prom", "json"};
    return kFormats;
}

std::string format_extension(const std::string& format) {
    if (format == "trace") return "trace.json";
    return format;
}

std::vector<std::string> parse_format_list(const std::string& text, const std::string& field, bool allow_list) {
    std::vector<std::string> out;
    size_t start = 0;
    while (true) {
        size_t comma = text.find(',', start);
        std::string f = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (f == "markdown") f = "md";
        if (f == "prometheus") f = "prom";
        const auto& all = report_formats();
        if (std::find(all.begin(), all.end(), f) == all.end())
            config_error(field, "unknown format", f, "use one of: csv, md, html, trace, prom, json");
        out.push_back(f);
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    if (!allow_list && out.size() != 1) config_error(field, "takes one format", text, "give a single format such as csv");
    return out;
}

std::string render_report(const json& report, const std::string& format) {
    if (!report.is_object() || !report.contains("runs") || !report["runs"].is_array())
        config_error("report", "is not a moebench.report/1 document (no runs[])", json_brief(report),
                     "pass a report written by moebench run or moebench sweep");
    std::string f = parse_format_list(format, "--format", false).front();
    if (f == "csv") return formats_detail::render_csv(report);
    if (f == "md") return formats_detail::render_markdown(report);
    if (f == "html") return formats_detail::render_html(report);
    if (f == "trace") return formats_detail::render_chrome_trace(report);
    if (f == "prom") return formats_detail::render_prometheus(report);
    return report.dump(2) + "\n";
}

namespace formats_detail {

const json* find_path(const json& j, std::initializer_list<const char*> path) {
    const json* cur = &j;
    for (const char* k : path) {
        if (!cur->is_object()) return nullptr;
        auto it = cur->find(k);
        if (it == cur->end()) return nullptr;
        cur = &*it;
    }
    return cur;
}

double num_at(const json& j, std::initializer_list<const char*> path, double dflt) {
    const json* v = find_path(j, path);
    return v && v->is_number() ? v->get<double>() : dflt;
}

std::string str_at(const json& j, std::initializer_list<const char*> path, const std::string& dflt) {
    const json* v = find_path(j, path);
    return v && v->is_string() ? v->get<std::string>() : dflt;
}

std::string scalar_text(const json& v) {
    if (v.is_null()) return "";
    if (v.is_string()) return v.get<std::string>();
    if (v.is_number_float()) {
        double d = v.get<double>();
        if (std::floor(d) == d && std::fabs(d) < 1e15) return fmt::format("{}", static_cast<int64_t>(d));
        return fmt::format("{}", d);
    }
    return v.dump();
}

std::vector<std::string> low_confidence_keys(const json& stats) {
    std::vector<std::string> keys;
    if (const json* lc = find_path(stats, {"low_confidence"}); lc && lc->is_array())
        for (const json& k : *lc)
            if (k.is_string()) keys.push_back(k.get<std::string>());
    return keys;
}

EnergyPerToken energy_per_token(const json& run) {
    EnergyPerToken e;
    for (const char* where : {"device", "host"}) {
        const json* block = find_path(run, {"conditions", where, "energy"});
        if (!block || !block->is_object()) continue;
        if (block->contains("joules_per_token") && (*block)["joules_per_token"].is_number())
            return EnergyPerToken{true, (*block)["joules_per_token"].get<double>(), where, str_at(*block, {"scope"})};
        if (e.scope.empty()) e.scope = str_at(*block, {"reason"}, "no counter");
    }
    return e;
}

std::string tri_state(const json& run, std::initializer_list<const char*> path) {
    const json* v = find_path(run, path);
    return v && v->is_boolean() ? (v->get<bool>() ? "yes" : "no") : "";
}

bool run_ok(const json& run) { return run.value("status", "ok") == "ok"; }

std::vector<std::string> run_phases(const json& run) {
    std::vector<std::string> out;
    const json* phases = find_path(run, {"latency", "phases"});
    if (!phases || !phases->is_object()) return out;
    for (auto name : kPhaseNames)
        if (phases->contains(std::string(name))) out.emplace_back(name);
    return out;
}

long golden_run_index(const json& report) {
    const json* g = find_path(report, {"sweep", "golden", "run_index"});
    return g && g->is_number_integer() ? g->get<long>() : -1;
}

std::vector<std::string> varying_axes(const json& report) {
    std::vector<std::string> names;
    std::set<std::string> seen;
    const json& runs = report.at("runs");
    for (const auto& r : runs) {
        const json* a = find_path(r, {"axes"});
        if (!a || !a->is_object()) continue;
        for (const auto& [k, v] : a->items())
            if (seen.insert(k).second) names.push_back(k);
    }
    std::vector<std::string> out;
    for (const auto& k : names) {
        std::set<std::string> values;
        for (const auto& r : runs) {
            const json* v = find_path(r, {"axes", k.c_str()});
            values.insert(v ? v->dump() : "null");
        }
        if (values.size() > 1) out.push_back(k);
    }
    // batch last, the rest as first seen: labels read "context=4096 batch=8".
    std::stable_partition(out.begin(), out.end(), [](const std::string& s) { return s != "batch"; });
    return out;
}

std::string run_label(const json& run) {
    if (const json* sl = find_path(run, {"sweep_label"}); sl && sl->is_string()) return sl->get<std::string>();
    const json* sp = find_path(run, {"sweep_point"});
    std::string s;
    if (sp && sp->is_object() && !sp->empty()) {
        // batch last, like the sweep's canonical order.
        for (const auto& [k, v] : sp->items())
            if (k != "batch") s += (s.empty() ? "" : " ") + k + "=" + scalar_text(v);
        if (sp->contains("batch")) s += (s.empty() ? "" : " ") + std::string("batch=") + scalar_text(sp->at("batch"));
        return s;
    }
    const json* b = find_path(run, {"batch"});
    if (!b) b = find_path(run, {"axes", "batch"});
    s = "batch=" + (b ? scalar_text(*b) : std::string("?"));
    double ctx = num_at(run, {"context"}, 0);
    if (ctx > 0) s += fmt::format(" context={}", static_cast<int64_t>(ctx));
    return s;
}

std::string md_cell(const std::string& s) {
    std::string o;
    for (char c : s) {
        if (c == '|') o += "\\|";
        else if (c == '\n') o += ' ';
        else o += c;
    }
    return o;
}

std::string html_escape(const std::string& s) {
    std::string o;
    o.reserve(s.size());
    for (char c : s) {
        switch (c) {
            case '&': o += "&amp;"; break;
            case '<': o += "&lt;"; break;
            case '>': o += "&gt;"; break;
            case '"': o += "&quot;"; break;
            case '\'': o += "&#39;"; break;
            default: o += c;
        }
    }
    return o;
}

}  // namespace formats_detail

}  // namespace moebench
