// SPDX-License-Identifier: Apache-2.0
// Views derived from a moebench.report/1 document: CSV, Markdown, self-contained HTML with inline SVG charts,
// Chrome trace JSON and Prometheus text exposition. The JSON report stays the source of truth.
#pragma once
#include "common/json_util.hpp"

#include <string>
#include <vector>

namespace moebench {

/// One output format: its name (--format), the file extension it is written with, other names it is known by, and
/// its renderer. The table (formats.cpp) is the only list of formats: help texts, --format checks and the
/// dispatcher read it.
struct ReportFormat {
    std::string name;
    std::string extension;
    std::vector<std::string> aliases;
    std::string (*render)(const json& report);
};
const std::vector<ReportFormat>& report_format_table();

/// Renders `report` in one of the table's formats. Unknown format -> ConfigError naming --format.
std::string render_report(const json& report, const std::string& format);

/// The formats' names, in the order of the table.
const std::vector<std::string>& report_formats();
/// For help texts: "csv | md | html | trace | prom | json" (`with_json` false: without json).
std::string format_names_help(const std::string& separator = " | ", bool with_json = true);

/// File extension for a format: "csv", "md", "html", "trace.json", "prom", "json".
std::string format_extension(const std::string& format);

/// Checks a --format value (a comma-separated list is allowed where `allow_list`); returns the formats.
std::vector<std::string> parse_format_list(const std::string& text, const std::string& field, bool allow_list);

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
    std::string where;   // "device" | "host"
    std::string scope;   // what the counter covers, or why it is not available
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
