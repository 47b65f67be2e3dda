// SPDX-License-Identifier: Apache-2.0
// One benchmark point, end to end, as stages: validate -> prepare (model, workload, backend, ceilings) -> measure
// (the engine's steps) -> derive (metrics/) -> record (one element of the report's runs[]).
#pragma once
#include "common/error.hpp"
#include "common/json_util.hpp"
#include "config/run_config.hpp"

#include <string>
#include <vector>

namespace moebench {

/// Runs one point and returns its record for the report's runs[] (docs/report-schema.md).
/// Bad input -> ConfigError; a point the backend cannot run -> UnsupportedError (sweeps record it as skipped).
json run_point(const RunConfig& cfg);

/// How a caller that is not `run` wants a point: deploy prices steps whose batch is no deployment (a decode step of
/// D + B tokens holds no KV cache of D + B sequences) with allow_no_fit, and checks the fit of its own.
struct PointOptions {
    bool warn_no_fit = true;  // with allow_no_fit: a point that does not fit warns on stderr
    bool cost_energy = true;  // a modeled point's cost_energy block (reads the hardware profile)
};
json run_point(const RunConfig& cfg, const PointOptions& options);

/// A load gate (run fields max_cv, min_balancedness) crossed: the outcome the gate asked about, not a fault. Exit 1.
class LoadGateCrossed : public Error {
public:
    using Error::Error;
    const char* label() const override { return "load gate"; }
};

/// The messages of the load gates a record (or a sweep's summary of it) crossed: its `load_gates`; empty when none.
std::vector<std::string> crossed_load_gates(const json& record);

}  // namespace moebench
