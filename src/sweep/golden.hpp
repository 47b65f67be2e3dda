// SPDX-License-Identifier: Apache-2.0
// The golden point of a sweep (highest throughput meeting a p95 SLO) and the knee of each throughput-vs-batch
// curve, with the reasoning written out as the seeds do ("batch 128: 98% of peak throughput at 76% of the p95
// of batch 256"). Definitions in docs/sweep.md.
#pragma once
#include "common/json_util.hpp"

#include <optional>
#include <string>
#include <vector>

namespace moebench {

/// One ok point of a curve.
struct CurvePoint {
    size_t run_index = 0;  // index into runs[]
    double batch = 0;
    double tokens_per_s = 0;  // throughput.tokens_per_s
    double p95_us = 0;        // latency.step.p95_us
};

inline constexpr double kDefaultKneeFraction = 0.90;

/// Knee of one series sorted by batch: the smallest batch whose throughput reaches `fraction` of the series'
/// best. Empty series -> nullopt. Returns the index into `series`.
std::optional<size_t> knee_index(const std::vector<CurvePoint>& series, double fraction);

/// Golden point: highest throughput among points with p95_us <= slo_p95_us (ties: lower p95). None meets it -> nullopt.
std::optional<size_t> golden_index(const std::vector<CurvePoint>& points, double slo_p95_us);

/// Analyses the ok records of runs[]: series are the points sharing every axis but batch. Returns
/// {"knee_rule", "golden_rule", "slo_p95_ms", "series": [{"fixed", "points", "knee"}], "golden"} where golden and
/// each knee are {"run_index", "axes", "batch", "tokens_per_s", "p95_ms", "share_of_peak", "p95_vs_peak", "reason"}
/// or null with a "reason". Without an SLO the golden point is the knee of the series holding the peak throughput.
json analyze_sweep(const json& runs, std::optional<double> slo_p95_ms, double knee_fraction = kDefaultKneeFraction);

}  // namespace moebench
