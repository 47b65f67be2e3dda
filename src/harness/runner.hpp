// SPDX-License-Identifier: Apache-2.0
// One benchmark point, end to end: config -> model -> workload -> engine -> backend -> metrics -> one report record.
#pragma once
#include "common/json_util.hpp"
#include "config/run_config.hpp"

#include <functional>
#include <string>

namespace moebench {

/// Runs one point and returns its record for the report's runs[] (docs/report-schema.md).
/// Bad input -> ConfigError; a point the backend cannot run -> UnsupportedError (sweeps record it as skipped).
json run_point(const RunConfig& cfg);

/// The report's top-level context block: tool version, git revision, build type, command line, machine, threads, BLAS.
json report_context(int argc_or_0, const std::string& command_line);

/// The report's "config" block for one point: {"run": run_config_to_json(cfg), "model": model_to_json(load_model(...))}.
json resolved_config(const RunConfig& cfg);

}  // namespace moebench
