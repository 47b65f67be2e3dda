// SPDX-License-Identifier: Apache-2.0
// The one strict reader of moebench reports read back from disk, shared by `compare` and `report`: every field that
// a view or a comparison shows is checked for presence and type before anything is rendered or compared, and a bad
// one is a ConfigError (exit 2) naming the file and the JSON path:
//   B.json: runs[0].latency.step.mean_us: unexpected type: must be a number (got "fast"); ...
// A blank cell or a 0 us that was really a missing field can then never reach a table or pass a gate.
#pragma once
#include "common/json_util.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace moebench {

/// The timing statistics of the step or of one phase (docs/report-schema.md, "Statistics").
struct ReadStats {
    double mean_us = 0, p50_us = 0, p95_us = 0, p99_us = 0, min_us = 0, max_us = 0, stdev_us = 0, cv = 0;
};

/// One record of runs[], with what a comparison needs already typed.
struct ReadRun {
    size_t index = 0;
    std::string status;      // ok | skipped | failed (absent in the file counts as ok)
    std::string reason;      // skip_reason or error; "" for ok
    std::string model;       // runs[].model, else (from the report's other points, config.model.name, axes.model)
    std::string model_spec;  // axes.model: the model as given to a sweep (a short name or a path); "" when absent
    std::string hardware;    // what modeled or device times depend on: the sim profile or the cuda device; "" on cpu
    json axes = json::object();
    // Only for ok runs:
    ReadStats step;
    std::map<std::string, ReadStats> phases;  // the vocabulary's phases that ran
    int64_t measured_iterations = 0;          // iterations.measured: 0 on a modeled run
    int64_t num_samples = 0;                  // the steps behind the statistics: iterations.measured, or .modeled (sim)
    double tokens_per_s = 0;
    std::string dtype;          // backend_info.dtype (else roofline.precision); "" unknown
    std::string threads;        // backend_info.threads, as text; "" unknown
    std::string timing_source;  // latency.source (else what the backend's traits say): measured | modeled
    bool ok() const { return status == "ok"; }
};

struct ReadReport {
    std::string name;  // the file as given: every message starts with it
    json doc;          // the whole checked document, for the views
    std::vector<ReadRun> runs;
    /// What the numbers depend on besides the point: "tool.git_rev", "tool.build_type", "environment.cpu_model",
    /// "config.run.seed", ... -> value as text. Absent: not in the report.
    std::map<std::string, std::string> environment;
};

/// Checks `doc` as a moebench.report/1 document read from `name`. Missing or mistyped field -> ConfigError naming
/// `name` and the JSON path. Keys it does not know are ignored (reports may gain keys). Figures that cannot be are
/// refused the same way: statistics that no samples give (a stdev wider than the range allows, a mean outside
/// [min, max], a count that is not the iterations), step samples that disagree with them, expert counts that are not
/// the model's, a source label that contradicts the backend (docs/sweep.md, "Reading"). An extrapolated whole model
/// that an earlier version labelled with the latency's source is relabelled `extrapolated` in the returned doc.
ReadReport read_report(json doc, const std::string& name);

/// Checks one record of runs[] (e.g. a sweep journal's record before it is reused): messages name `name` and `path`
/// ("runs[3]"); `model` stands in when the record names none.
ReadRun read_run(const json& record, const std::string& name, const std::string& path, const std::string& model = "");

/// Reads a report file, or a sweep journal (a name ending in .jsonl: runs[] = its records, a torn last line is
/// dropped; report/journal_reader.hpp says what is refused), then read_report.
ReadReport load_report(const std::string& path);

/// The report a sweep journal holds (not yet checked). A journal without a finished point -> ConfigError.
json report_from_journal(const std::string& path);

/// The value of a match key for one run, with numbers normalised (0.0 == 0): "model", "hardware", else the axis
/// from runs[].axes, then the record itself, then config.run (a sweep's fixed fields); null when none has it.
json run_key_value(const ReadReport& report, const ReadRun& run, const std::string& key);

}  // namespace moebench
