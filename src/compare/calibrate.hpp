// SPDX-License-Identifier: Apache-2.0
// `moebench calibrate`: the sim's efficiencies and fixed costs of one hardware profile fitted to measured reports of
// one machine, and the model's error on every phase of every report before and after (docs/calibration.md). Lives
// above report/ because it reads reports with the strict reader; each report's run is modeled by harness/sim_replay.
#pragma once
#include "backends/sim/sim_backend.hpp"
#include "common/json_util.hpp"
#include "config/hardware.hpp"
#include "config/run_config.hpp"

#include <map>
#include <string>
#include <vector>

namespace moebench {

/// One measured point: what it ran, and what it measured (medians over its measured steps).
struct CalibrationCase {
    std::string name;                                 // the report as given: tables and messages name it
    RunConfig run;                                    // its config.run, with the number formats it resolved
    std::string mla_form;                             // how its backend counted MLA (roofline.mla_form); "" unknown
    std::map<std::string, double> measured_phase_us;  // per phase: p50 of the step's sum over the layers run
    double measured_step_us = 0;                      // p50 of the step (host clock)
    std::string machine;                              // machine_identity of its environment (+ its GPU)
};

/// The reports at `paths` as cases. Each must be a moebench report of one point that ran (status ok), measured (not
/// modeled), with per-phase times and its run config; all of one machine, and of the machine `hw` was measured on
/// where the profile records one (`machine`). Anything else is a ConfigError (exit 2) naming the report, the field,
/// the value and the fix.
std::vector<CalibrationCase> calibration_cases(const std::vector<std::string>& paths, const HardwareProfile& hw);

/// One row of the error table: a phase of one report, or its step (phase "step"). A time the model or the
/// measurement lacks is < 0 (the row then has no error and is not fitted).
struct CalibrationRow {
    std::string report;
    std::string phase;
    double measured_us = -1;
    double before_us = -1;  // modeled with the profile as given
    double after_us = -1;   // modeled with the fitted parameters (= before_us without a fit)
};

/// One parameter of the sim object: its value before and after, and what the fit made of it.
struct CalibrationParam {
    std::string key;
    double before = 0, after = 0;
    /// "fitted"; "not determined" (the fit moved it, yet the start value fits as well: no phase is bound by it at
    /// the optimum, so the start value is kept); "unused" (no report's modeled time depends on it, e.g. the
    /// all-to-all terms without expert parallelism).
    std::string status;
};

struct CalibrationResult {
    std::string hardware;  // the profile's name
    bool fitted = false;   // false: --no-fit, only the profile's own error
    SimParams before, after;
    std::vector<CalibrationParam> params;
    std::vector<CalibrationRow> rows;                  // per report: its phases in step order, then "step"
    double objective_before = 0, objective_after = 0;  // sum over phase rows of ln(modeled / measured)^2
    int64_t num_terms = 0;                             // phase rows in that sum
    int64_t evaluations = 0;                           // parameter sets priced
};

/// Fits (`fit`) the numbers of the sim object that some case's modeled time depends on, from `start`: minimises the
/// sum over cases and phases of ln(modeled / measured)^2, each parameter within its accepted range (Nelder-Mead in
/// log space from a coarse grid and the start, restarted until it stops improving). Fewer cases than parameters to
/// fit -> ConfigError. Without `fit`, only the errors of `start`. `names` of the cases are the table's.
CalibrationResult calibrate(const std::vector<CalibrationCase>& cases, const HardwareProfile& hw,
                            const SimParams& start, bool fit);

/// The result as a "moebench.calibration/1" document: the parameters, the error table, and the errors summed up
/// (overall and per phase). Its views are the format table's (report/format_calibration_text.cpp: the terminal's).
json calibration_document(const CalibrationResult& r);
/// `profile` (the profile's document) with its sim object set to r.after, named `name`, and a line in its sources
/// that says what it was fitted to.
json calibrated_profile(const json& profile, const CalibrationResult& r, const std::vector<std::string>& reports,
                        const std::string& name);

}  // namespace moebench
