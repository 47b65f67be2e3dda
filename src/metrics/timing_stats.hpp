// SPDX-License-Identifier: Apache-2.0
// Summary statistics of timing samples (per phase, per step): mean, percentiles, spread.
// Percentiles interpolate linearly between order statistics (numpy's default); stdev is the SAMPLE stdev (n - 1).
#pragma once
#include "common/json_util.hpp"

#include <cstdint>
#include <vector>

namespace moebench {

struct TimingStats {
    int64_t count = 0;
    double mean_us = 0;
    double p50_us = 0;
    double p95_us = 0;
    double p99_us = 0;
    double min_us = 0;
    double max_us = 0;
    double stdev_us = 0;   // sample standard deviation (Bessel, n - 1); 0 for a single sample
    double cv = 0;         // stdev_us / mean_us; 0 when the mean is 0
};

/// Percentile q in [0, 100] of `sorted` (ascending), linear interpolation between closest ranks: rank = q/100 * (n-1).
double percentile_sorted(const std::vector<double>& sorted, double q);

/// Summarises samples (any order). An empty vector gives all zeros.
TimingStats summarize(const std::vector<double>& samples_us);

/// Sample coefficient of variation of `samples` (0 with fewer than 2 samples).
double sample_cv(const std::vector<double>& samples);

/// {"mean_us", "p50_us", "p95_us", "p99_us", "min_us", "max_us", "stdev_us", "cv"} (count is left out).
json to_json(const TimingStats& s);

}  // namespace moebench
