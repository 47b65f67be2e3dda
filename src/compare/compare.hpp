// SPDX-License-Identifier: Apache-2.0
// Comparing two reports: points matched by their axes, per-point and per-phase latency ratios, and a verdict
// (faster / slower / same) that treats a difference inside the measured noise of both runs as "same", and one inside a
// noise band wider than the threshold as "inconclusive" (docs/sweep.md). Points match only when their model, hardware
// and every axis agree; what else differs between the two runs (machine, threads, dtype, git revision, build) is a
// warning in the comparison. The gate fails (exit 1) on a regression, an inconclusive point, and a point of A that
// failed or is missing in B; a modeled point is compared with a measured one only when asked, and then said.
#pragma once
#include "common/json_util.hpp"
#include "report/report_reader.hpp"

#include <string>
#include <vector>

namespace moebench {

struct CompareOptions {
    double threshold = 0.05;    // a "slower" beyond this relative slowdown is a regression (exit 1)
    double k_sigma = 3.0;       // noise band: k standard errors of the difference of the means ...
    double spread_z = 1.645;    // ... or z pooled step-to-step standard deviations (1.645: the p5-p95 half-width)
    double noise_floor = 0.01;  // ... but never below this fraction of A's mean (run-to-run drift one run cannot see)
    std::vector<std::string> match_keys;  // empty: the model, the hardware and every axis; else the model and these
    bool gate_phases = false;    // also fail on a phase regression or inconclusive phase (default: the step only)
    bool allow_missing = false;  // points of A absent from B (or skipped there) do not fail the gate
    bool allow_modeled = false;  // compare a modeled point with a measured one (the verdict says so)
};

struct Verdict {
    std::string verdict;           // "faster" | "slower" | "same" | "inconclusive" (B against A)
    double ratio = 0;              // mean_b / mean_a (latency: > 1 is slower)
    double delta_us = 0;           // mean_b - mean_a
    double noise_us = 0;           // half-width of the "same" band
    bool regression = false;       // slower and ratio - 1 > threshold
    bool inconclusive = false;     // inside a noise band wider than threshold * mean_a: a regression could hide in it
    int64_t rerun_iterations = 0;  // inconclusive: samples per run that narrow k standard errors to the threshold
    double spread_us = 0;          // z * pooled sd: the band's term that more iterations do not narrow
    bool spread_too_wide = false;  // inconclusive, and spread_us alone is wider than the threshold
};

/// Classifies B against A from the means, sample standard deviations and sample counts of both runs:
/// noise = max(k * sqrt(sd_a^2/n_a + sd_b^2/n_b), z * sqrt((sd_a^2 + sd_b^2) / 2), floor * mean_a);
/// |delta| <= noise -> same, or inconclusive when noise > threshold * mean_a (then rerun_iterations =
/// ceil(k^2 (sd_a^2 + sd_b^2) / (threshold * mean_a)^2)).
Verdict classify(double mean_a, double sd_a, double n_a, double mean_b, double sd_b, double n_b,
                 const CompareOptions& o);

/// "5%" -> 0.05, "0.05" -> 0.05, "5" -> 0.05 (a bare number >= 1 is read as percent). Bad, or above `max_fraction`
/// -> ConfigError naming `field`.
double parse_fraction(const std::string& text, const std::string& field, double max_fraction = 1.0);

/// The comparison as JSON: {"a", "b", "rule", "threshold", "match_keys", "contrast", "warnings", "points": [...],
/// "unmatched_a", "unmatched_b", "counts", "regressions", "gate_failures" (why the exit code is 1, one sentence per
/// cause), "allow_missing", "allow_modeled", "exit_code"}. ConfigError (exit 2) when a report is not one
/// (read_report), when the match keys do not tell a report's points apart, when nothing is comparable (no point
/// matches, the message naming the keys that differ, or no matched point ran in both), when a matched point is
/// modeled on one side and measured on the other without allow_modeled, and when the noise floor is wider than the
/// threshold (every point would be inconclusive).
json compare_reports(const ReadReport& a, const ReadReport& b, const CompareOptions& o);

/// The same, on documents: each is read with read_report under its name first.
json compare_reports(const json& a, const json& b, const CompareOptions& o, const std::string& name_a = "A",
                     const std::string& name_b = "B");

/// Renders the comparison: "text" (terminal), "md" or "json".
std::string render_comparison(const json& cmp, const std::string& format);

}  // namespace moebench
