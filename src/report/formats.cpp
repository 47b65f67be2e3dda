// SPDX-License-Identifier: Apache-2.0
// The format dispatcher and the small JSON helpers every view shares.
#include "report/formats.hpp"
#include "core/report_keys.hpp"

#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "core/phase.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace moebench {

// The renderers, one file each (format_*.cpp); declared only here, where the table names them.
namespace formats_detail {
std::string render_csv(const json& report);
std::string render_markdown(const json& report);
std::string render_html(const json& report);
std::string render_chrome_trace(const json& report);
std::string render_prometheus(const json& report);
std::string render_report_text(const json& report);             // format_report_text.cpp
std::string render_plan_text(const json& plan);                 // format_plan_text.cpp
std::string render_bench_moe_text(const json& bench);           // format_bench_text.cpp
std::string render_bench_a2a_text(const json& bench);           // format_bench_text.cpp
std::string render_comparison_text(const json& cmp);            // format_compare.cpp
std::string render_comparison_md(const json& cmp);              // format_compare.cpp
std::string render_trace_info_text(const json& info);           // format_trace_info_text.cpp
std::string render_devices_text(const json& devices);           // format_devices_text.cpp
std::string render_placement_text(const json& placement);       // format_place_text.cpp
std::string render_hardware_fields_text(const json& fields);    // format_hardware_fields.cpp
std::string render_hardware_fields_md(const json& fields);      // format_hardware_fields.cpp
std::string render_deploy_text(const json& deploy);             // format_deploy.cpp
std::string render_deploy_csv(const json& deploy);              // format_deploy.cpp
std::string render_deploy_html(const json& deploy);             // format_deploy.cpp
std::string render_offload_text(const json& offload);           // format_offload.cpp
std::string render_offload_csv(const json& offload);            // format_offload.cpp
std::string render_hardware_profile_text(const json& profile);  // format_hardware_profile_text.cpp
std::string render_calibration_text(const json& calibration);   // format_calibration_text.cpp
}  // namespace formats_detail

namespace {

using namespace formats_detail;

std::string render_json(const json& doc) { return doc.dump(2) + "\n"; }

constexpr DocKind kAllKinds[] = {DocKind::report,     DocKind::plan,       DocKind::bench_moe,
                                 DocKind::bench_a2a,  DocKind::comparison, DocKind::trace_info,
                                 DocKind::devices,    DocKind::placement,  DocKind::hardware_fields,
                                 DocKind::deploy,     DocKind::offload,    DocKind::hardware_profile,
                                 DocKind::calibration};

std::vector<std::pair<DocKind, Renderer>> every_kind(Renderer r) {
    std::vector<std::pair<DocKind, Renderer>> out;
    for (DocKind k : kAllKinds) out.emplace_back(k, r);
    return out;
}

// The one table of output formats: a new format is its renderer's file, and its declaration and row here; a new view
// of a kind in an existing format is its renderer's file and one entry in that format's row.
const std::vector<ReportFormat> kReportFormats = {
    {"text",
     "txt",
     {},
     {{DocKind::report, render_report_text},
      {DocKind::plan, render_plan_text},
      {DocKind::bench_moe, render_bench_moe_text},
      {DocKind::bench_a2a, render_bench_a2a_text},
      {DocKind::comparison, render_comparison_text},
      {DocKind::trace_info, render_trace_info_text},
      {DocKind::devices, render_devices_text},
      {DocKind::placement, render_placement_text},
      {DocKind::hardware_fields, render_hardware_fields_text},
      {DocKind::deploy, render_deploy_text},
      {DocKind::offload, render_offload_text},
      {DocKind::hardware_profile, render_hardware_profile_text},
      {DocKind::calibration, render_calibration_text}}},
    {"csv",
     "csv",
     {},
     {{DocKind::report, render_csv}, {DocKind::deploy, render_deploy_csv}, {DocKind::offload, render_offload_csv}}},
    {"md",
     "md",
     {"markdown"},
     {{DocKind::report, render_markdown},
      {DocKind::comparison, render_comparison_md},
      {DocKind::hardware_fields, render_hardware_fields_md}}},
    {"html", "html", {}, {{DocKind::report, render_html}, {DocKind::deploy, render_deploy_html}}},
    {"trace", "trace.json", {}, {{DocKind::report, render_chrome_trace}}},
    {"prom", "prom", {"prometheus"}, {{DocKind::report, render_prometheus}}},
    {"json", "json", {}, every_kind(render_json)},
};

const ReportFormat* find_format(const std::string& name) {
    for (const ReportFormat& f : kReportFormats)
        if (f.name == name || std::find(f.aliases.begin(), f.aliases.end(), name) != f.aliases.end()) return &f;
    return nullptr;
}

// "text, json" (the kind's formats, for a message).
std::string kind_formats(DocKind kind) { return format_names_help(kind, ", ", true); }

}  // namespace

const char* to_string(DocKind kind) {
    switch (kind) {
        case DocKind::report: return "report";
        case DocKind::plan: return "plan";
        case DocKind::bench_moe: return "bench moe document";
        case DocKind::bench_a2a: return "bench a2a document";
        case DocKind::comparison: return "comparison";
        case DocKind::trace_info: return "trace summary";
        case DocKind::devices: return "device list";
        case DocKind::placement: return "placement";
        case DocKind::hardware_fields: return "hardware field table";
        case DocKind::deploy: return "deploy document";
        case DocKind::offload: return "cache replay";
        case DocKind::hardware_profile: return "hardware profile";
        case DocKind::calibration: return "calibration";
    }
    return "?";
}

Renderer ReportFormat::renderer(DocKind kind) const {
    for (const auto& [k, r] : renderers)
        if (k == kind) return r;
    return nullptr;
}

const std::vector<ReportFormat>& report_format_table() { return kReportFormats; }

std::vector<std::string> format_names(DocKind kind) {
    std::vector<std::string> names;
    for (const ReportFormat& f : kReportFormats)
        if (f.renderer(kind)) names.push_back(f.name);
    return names;
}

std::string format_names_help(DocKind kind, const std::string& separator, bool with_json) {
    std::string s;
    for (const ReportFormat& f : kReportFormats)
        if (f.renderer(kind) && (with_json || f.name != "json")) s += (s.empty() ? "" : separator) + f.name;
    return s;
}

std::string format_extension(const std::string& format) {
    const ReportFormat* f = find_format(format);
    return f ? f->extension : format;
}

std::vector<std::string> parse_format_list(const std::string& text, DocKind kind, const std::string& field,
                                           bool allow_list) {
    std::vector<std::string> out;
    size_t start = 0;
    while (true) {
        size_t comma = text.find(',', start);
        std::string f = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        const ReportFormat* known = find_format(f);
        if (!known) config_error(field, "unknown format", f, "use one of: " + kind_formats(kind));
        if (!known->renderer(kind))
            config_error(field, fmt::format("a {} has no {} view", to_string(kind), known->name), f,
                         "use one of: " + kind_formats(kind));
        out.push_back(known->name);
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    if (!allow_list && out.size() != 1)
        config_error(field, "takes one format", text, "give a single format such as csv");
    return out;
}

std::string parse_format(const std::string& text, DocKind kind, const std::string& field) {
    return parse_format_list(text, kind, field, false).front();
}

std::string render_view(const json& doc, DocKind kind, const std::string& format) {
    return find_format(parse_format(format, kind, flag_of("format")))->renderer(kind)(doc);
}

std::string render_report(const json& report, const std::string& format) {
    if (!report.is_object() || !report.contains(keys::kRuns) || !report[keys::kRuns].is_array())
        config_error("report", "is not a moebench.report/1 document (no runs[])", json_brief(report),
                     "pass a report written by moebench run or moebench sweep");
    return render_view(report, DocKind::report, format);
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

std::string key_text(const json& v) {
    if (v.is_null()) return "-";
    if (v.is_string()) return v.get<std::string>();
    return v.dump();
}

std::vector<std::string> low_confidence_keys(const json& stats) {
    std::vector<std::string> keys;
    if (const json* lc = find_path(stats, {keys::kLowConfidence}); lc && lc->is_array())
        for (const json& k : *lc)
            if (k.is_string()) keys.push_back(k.get<std::string>());
    return keys;
}

EnergyPerToken energy_per_token(const json& run) {
    EnergyPerToken e;
    for (const char* where : {"device", "host"}) {
        const json* block = find_path(run, {keys::kConditions, where, "energy"});
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

bool run_ok(const json& run) { return run.value(keys::kStatus, "ok") == "ok"; }

std::vector<std::string> run_phases(const json& run) {
    const json* phases = find_path(run, {keys::kLatency, keys::kPhases});
    return phases ? phases_in_order(*phases) : std::vector<std::string>{};
}

std::vector<std::string> phases_in_order(const json& phases) {
    std::vector<std::string> out;
    if (!phases.is_object()) return out;
    for (auto name : kPhaseNames)
        if (phases.contains(std::string(name))) out.emplace_back(name);
    return out;
}

long golden_run_index(const json& report) {
    const json* g = find_path(report, {"sweep", "golden", "run_index"});
    return g && g->is_number_integer() ? g->get<long>() : -1;
}

std::vector<std::string> varying_axes(const json& report) {
    std::vector<std::string> names;
    std::set<std::string> seen;
    const json& runs = report.at(keys::kRuns);
    for (const auto& r : runs) {
        const json* a = find_path(r, {keys::kAxes});
        if (!a || !a->is_object()) continue;
        for (const auto& [k, v] : a->items())
            if (seen.insert(k).second) names.push_back(k);
    }
    std::vector<std::string> out;
    for (const auto& k : names) {
        std::set<std::string> values;
        for (const auto& r : runs) {
            const json* v = find_path(r, {keys::kAxes, k.c_str()});
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
    if (!b) b = find_path(run, {keys::kAxes, "batch"});
    s = "batch=" + (b ? scalar_text(*b) : std::string("?"));
    double ctx = num_at(run, {"context"}, 0);
    if (ctx > 0) s += fmt::format(" context={}", static_cast<int64_t>(ctx));
    return s;
}

std::string md_cell(const std::string& s) {
    std::string o;
    o.reserve(s.size());
    for (char c : s) {
        switch (c) {
            // Entities, not backslashes: a Markdown renderer passes raw HTML through, and `\<` is no escape in HTML.
            case '&': o += "&amp;"; break;
            case '<': o += "&lt;"; break;
            case '>': o += "&gt;"; break;
            // A table splits at a '|' not escaped by a backslash; a backslash of its own must not escape ours.
            case '|': o += "\\|"; break;
            case '\\': o += "\\\\"; break;
            default: o += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? ' ' : c;  // a newline ends a table row
        }
    }
    return o;
}

std::string md_code(const std::string& s) {
    // A code span shows its text as is (no entities) and ends at a run of backticks as long as its fence: use a
    // fence longer than any run inside, with a space inside it when the text starts or ends with a backtick.
    std::string text;
    size_t run = 0, longest = 0;
    for (char c : s) {
        run = c == '`' ? run + 1 : 0;
        longest = std::max(longest, run);
        text += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? ' ' : c;
    }
    const std::string fence(longest + 1, '`');
    const bool pad = !text.empty() && (text.front() == '`' || text.back() == '`');
    return fence + (pad ? " " : "") + text + (pad ? " " : "") + fence;
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

std::string times_source(const json& runs) {
    bool measured = false, modeled = false;
    if (runs.is_array())
        for (const json& r : runs) {
            if (!r.is_object() || !formats_detail::run_ok(r)) continue;
            const std::string source = formats_detail::str_at(r, {keys::kLatency, "source"}, "measured");
            (source == "modeled" ? modeled : measured) = true;
        }
    if (modeled && measured) return "measured or modeled (per point)";
    return modeled ? "modeled" : "measured";
}

}  // namespace moebench
