// SPDX-License-Identifier: Apache-2.0
// Runs a sweep point by point: expansion, journal + resume, time budget, clean stop on SIGINT / SIGTERM / SIGHUP,
// skipped points, and the report's "sweep" block (golden point and knees). The point executor is injected
// (run_point in the CLI), and so is the journal's lock (JournalLock, taken by the CLI between plan and run).
#pragma once
#include "common/json_util.hpp"
#include "config/run_config.hpp"
#include "sweep/axes.hpp"
#include "sweep/journal.hpp"
#include "sweep/progress.hpp"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace moebench {

struct SweepSpec {
    json base_run;                     // run config JSON of the fixed part (run_config_to_json; "out" cleared)
    std::vector<SweepAxis> axes;       // canonical order (canonical_axes)
    std::string journal_path;          // JSON Lines; required
    bool resume = false;               // reuse finished points of an existing journal
    double time_budget_s = 0;          // 0 = none
    std::optional<double> slo_p95_ms;  // for the golden point
    double knee_fraction = 0.9;
    ProgressMode progress = ProgressMode::quiet;
    /// false: SweepOutcome::runs keeps each new point's summary (record_summary) and `spans` where its whole record
    /// lies in the journal, so that memory does not grow with the records (the CLI writes the report from the journal).
    bool keep_records = true;
    /// Points computed side by side, on this many threads (1: one after the other). Only for points that measure
    /// nothing (their times are modeled, so a neighbour cannot disturb them): the CLI sets it for such sweeps. The
    /// journal, the progress and the report still take the points in expansion order; the time budget and a stop
    /// signal let the points already started finish. Ignored under mpirun.
    int64_t jobs = 1;
};

/// Executes one point and returns its runs[] record; throws UnsupportedError / ConfigError / bad_alloc for a point
/// that cannot run.
using PointExecutor = std::function<json(const RunConfig&)>;

struct SweepOutcome {
    json runs = json::array();       // one record per point that has a result, in expansion order (keep_records false:
                                     // the summary of each point run now, the whole record of each resumed one)
    std::vector<JournalSpan> spans;  // [i]: where runs[i]'s whole record lies in the journal (length 0: runs[i] is it)
    json sweep;                      // the report's "sweep" block
    size_t num_ok = 0, num_skipped = 0, num_failed = 0, num_resumed = 0, num_not_run = 0;
    std::string first_config_error;  // message of the first point skipped for a ConfigError
    size_t num_config_errors = 0;
    int stop_signal = 0;  // the SIGINT / SIGTERM / SIGHUP that stopped the sweep (0: none came)
};

/// Every point of a sweep, built and validated, before anything is written.
struct SweepPlan {
    std::vector<json> points;        // expansion order
    std::vector<RunConfig> configs;  // one per point
    std::vector<json> inputs;        // one per point: the files it reads, by content (InputDigests)
    std::string fingerprint;         // of the fixed fields, files by content (sweep_fingerprint)
};

/// What of a record the golden-point analysis and the summary table read: status and why, axes, batch, the sweep's
/// point, label and time, throughput, the step's latency and its source, backend (note, gpus), model and fits.
json record_summary(const json& record);

/// The "sweep" block of a sweep config ({} when absent), checked: an object whose keys are slo_p95_ms, knee_fraction
/// and time_budget_s, each a number; anything else -> ConfigError naming "sweep" or "sweep.<key>".
json sweep_block_of(const json& config);

/// Builds and validates every point's config (a bad axis value is a ConfigError, exit 2) and reads what the points
/// name (each model and hardware profile once; routing specs; the fields that depend on the model), writing no file,
/// so that the caller can check and create its outputs only for a sweep that can run.
SweepPlan plan_sweep(const SweepSpec& spec);

/// Runs a planned sweep. An existing non-empty journal without `resume` -> ConfigError naming --resume. The first
/// stop signal lets the current point finish (and reach the journal), marks the rest not run and returns with
/// `stop_signal` set; a second one kills as usual.
SweepOutcome run_sweep(const SweepSpec& spec, const SweepPlan& plan, const PointExecutor& exec);

/// plan_sweep, then run_sweep.
SweepOutcome run_sweep(const SweepSpec& spec, const PointExecutor& exec);

}  // namespace moebench
