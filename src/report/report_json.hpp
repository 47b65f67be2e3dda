// SPDX-License-Identifier: Apache-2.0
// The moebench.report/1 document (docs/report-schema.md): context, resolved config and runs[], written atomically.
#pragma once
#include "common/document_context.hpp"  // current_command_line(), utc_now(): every report's context
#include "common/host_environment.hpp"  // environment_block(): every report carries one
#include "common/json_util.hpp"
#include "config/run_config.hpp"

#include <string>
#include <vector>

namespace moebench {

inline constexpr const char* kReportSchema = "moebench.report/1";

/// "results/run-<UTC timestamp>.json" relative to the current folder, or run-<timestamp>-2.json, -3, ... when a
/// report of that name exists already (two runs in one second).
std::string default_report_path();

/// Assembles the whole document: {"schema", "tool", "command", "created_utc", "environment", "config", "runs"}.
/// `context` comes from report_context(); environment.backend and backend_note are taken from the first run.
json make_report(const json& context, const json& config, const std::vector<json>& runs);

/// Writes the report (pretty-printed) atomically to `path`; "-" writes it to stdout.
void write_report(const std::string& path, const json& report);

/// The report's top-level context block: tool version, git revision, build type, command line, machine, threads, BLAS
/// (document_context).
json report_context(int argc_or_0, const std::string& command_line);

/// The report's "config" block for one point: {"run": run_config_to_json(cfg), "model":
/// model_to_json(load_model(...))}.
json resolved_config(const RunConfig& cfg);

}  // namespace moebench
