// SPDX-License-Identifier: Apache-2.0
// The views of every document moebench prints, in one table (formats.cpp): each output format (--format) with the
// file extension it is written with, its aliases, and its renderer for each kind of document that has this view
// (the run report: terminal, CSV, Markdown, self-contained HTML with inline SVG charts, Chrome trace JSON, Prometheus
// text exposition; plan, bench, compare, trace info, devices, placement, hardware field and deploy documents: terminal
// and more). The JSON document stays the source of truth: a renderer reads the document alone.
#pragma once
#include "common/json_util.hpp"

#include <string>
#include <utility>
#include <vector>

namespace moebench {

/// The kinds of document with views.
enum class DocKind {
    report,           // moebench.report/1 (run, sweep, report)
    plan,             // moebench.plan/1
    bench_moe,        // moebench.bench_moe/1
    bench_a2a,        // moebench.bench_a2a/1
    comparison,       // compare's result
    trace_info,       // moebench.trace_info/1
    devices,          // moebench.devices/1
    placement,        // moebench.placement/1 as `place` writes it (with its predicted block)
    hardware_fields,  // `devices --hardware-fields`: the fields of a hardware profile and of its sim object
    deploy,   // moebench.deploy/1 (`moebench deploy`: one layout, a search, or disaggregated pools, by its kind)
    offload,  // moebench.offload/1 (`moebench offload`: a trace replayed through expert caches)
    hardware_profile,  // moebench.hardware/1 (`devices --cpu-profile` writes one)
    calibration,       // moebench.calibration/1 (`calibrate`)
};
/// "report", "plan", "bench moe document", "bench a2a document", "comparison", "trace summary", "device list",
/// "placement", "hardware field table", "deploy document", "cache replay", "hardware profile", "calibration": how
/// messages name a kind ("a device list has no md view").
const char* to_string(DocKind kind);

using Renderer = std::string (*)(const json& doc);

/// One output format: its name (--format), the file extension it is written with, other names it is known by, and
/// its renderer for each kind that has this view. The table is the only list of formats: help texts, --format
/// checks and the dispatcher read it.
struct ReportFormat {
    std::string name;
    std::string extension;
    std::vector<std::string> aliases;
    std::vector<std::pair<DocKind, Renderer>> renderers;
    /// This format's renderer of `kind`; nullptr where the kind has no such view.
    Renderer renderer(DocKind kind) const;
};
const std::vector<ReportFormat>& report_format_table();

/// The one place a --format value is read: `text` (a comma-separated list where `allow_list`) checked against the
/// formats `kind` has; returns their names (aliases resolved). An unknown format, or one without a view of `kind`:
/// ConfigError (exit 2) naming `field`, the value and the formats of that kind.
std::vector<std::string> parse_format_list(const std::string& text, DocKind kind, const std::string& field,
                                           bool allow_list);
/// One format (no list).
std::string parse_format(const std::string& text, DocKind kind, const std::string& field);

/// Renders `doc` (a document of `kind`) in `format` (checked as parse_format does, naming --format).
std::string render_view(const json& doc, DocKind kind, const std::string& format);
/// render_view of a moebench.report/1 document (one that is not: ConfigError).
std::string render_report(const json& report, const std::string& format);

/// The names of the formats `kind` has, in the table's order.
std::vector<std::string> format_names(DocKind kind);
/// For help texts: the formats `kind` has, in the table's order: "text | csv | md | ... | json" (`with_json` false:
/// without json).
std::string format_names_help(DocKind kind, const std::string& separator = " | ", bool with_json = true);

/// File extension for a format: "txt", "csv", "md", "html", "trace.json", "prom", "json".
std::string format_extension(const std::string& format);

/// The CSV header, in order (docs/csv-columns.md). Stable: columns are only ever appended.
const std::vector<std::string>& csv_columns();

/// Where the step and phase times of the finished runs come from (their latency.source): "measured", "modeled"
/// (sim), or "measured or modeled (per point)" when the runs differ. A view says this word, never "measured" alone.
std::string times_source(const json& runs);

namespace formats_detail {

/// Value at a path of object keys, or nullptr.
const json* find_path(const json& j, std::initializer_list<const char*> path);
/// Number at a path, or `dflt` when absent or not a number.
double num_at(const json& j, std::initializer_list<const char*> path, double dflt = 0.0);
/// String at a path, or `dflt`.
std::string str_at(const json& j, std::initializer_list<const char*> path, const std::string& dflt = "");
/// A JSON scalar as text ("8", "zipf:1.2", "0.5"); null/absent -> "".
std::string scalar_text(const json& v);
/// A match key's value as compare shows it: strings bare, null "-", anything else as JSON.
std::string key_text(const json& v);
/// True when a record finished ok (status absent counts as ok).
bool run_ok(const json& run);
/// Phases present in the run's latency.phases, in the vocabulary's order.
std::vector<std::string> run_phases(const json& run);
/// The keys of an object of per-phase values that name phases, in the vocabulary's order.
std::vector<std::string> phases_in_order(const json& phases);
/// Short label for a point: the sweep axes when present, else "batch=8" (plus context when nonzero).
std::string run_label(const json& run);
/// Index of the golden point in runs[] from the sweep block, or -1.
long golden_run_index(const json& report);
/// Axis names whose values differ between the report's runs (the varying axes), in a stable order.
std::vector<std::string> varying_axes(const json& report);
/// The percentile keys a stats object flags as from too few samples ("p95_us", "p99_us"); empty when none.
std::vector<std::string> low_confidence_keys(const json& stats);
/// Energy per token of a run from its conditions block: the device's counter first (cuda), else the host's RAPL.
struct EnergyPerToken {
    bool available = false;
    double joules_per_token = 0;
    std::string where;  // "device" | "host"
    std::string scope;  // what the counter covers, or why it is not available
};
EnergyPerToken energy_per_token(const json& run);
/// "yes" / "no" / "" (unknown) for a conditions flag that may be true, false or null.
std::string tri_state(const json& run, std::initializer_list<const char*> path);
/// Escapes &, <, >, " for HTML/SVG text and attributes.
std::string html_escape(const std::string& s);
/// Text from outside (model, hardware and path names, routing specs, environment strings, anything a report file
/// holds) in a Markdown table cell or line: '&', '<', '>' as entities (no raw HTML reaches a renderer), '|' and '\'
/// escaped (the cell stays one cell), control characters (newlines) as spaces.
std::string md_cell(const std::string& s);
/// The same inside a code span (`...`): shown verbatim, a backtick in the text cannot end the span.
std::string md_code(const std::string& s);

}  // namespace formats_detail

}  // namespace moebench
