// SPDX-License-Identifier: Apache-2.0
// Summary statistics of timing samples (per phase, per step): mean, percentiles, spread.
// Percentiles interpolate linearly between order statistics (numpy's default); stdev is the SAMPLE stdev (n - 1).
#pragma once
#include "common/json_util.hpp"

#include <cstdint>
#include <string>
#include <utility>
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
    double stdev_us = 0;  // sample standard deviation (Bessel, n - 1); 0 for a single sample
    double cv = 0;        // stdev_us / mean_us; 0 when the mean is 0
    // Distribution-free 95% confidence interval of the median (order statistics); [min, max] for tiny samples.
    double p50_ci_low_us = 0;
    double p50_ci_high_us = 0;
};

/// Fewest samples from which a percentile is reported without the low_confidence flag: with fewer than
/// 20 samples p95 is an interpolation next to the maximum, with fewer than 100 so is p99.
inline constexpr int64_t kMinSamplesP95 = 20;
inline constexpr int64_t kMinSamplesP99 = 100;

/// Distribution-free 95% confidence interval of the median of `sorted` (ascending): the order statistics
/// x_(j), x_(k) (1-based) with j = floor(n/2 - 1.96 sqrt(n)/2), k = ceil(1 + n/2 + 1.96 sqrt(n)/2), clipped to
/// [1, n] (the normal approximation of the binomial; below ~6 samples it widens to [min, max]).
std::pair<double, double> median_ci95_sorted(const std::vector<double>& sorted);

/// Half the width of the median's 95% confidence interval over the median (0 with fewer than 2 samples or a
/// median of 0). Unlike the sample CV it shrinks as 1/sqrt(n) when the spread is stable, so a noise target
/// is reachable by running longer. Any order.
double median_rel_ci_halfwidth(const std::vector<double>& samples);

/// Percentile q in [0, 100] of `sorted` (ascending), linear interpolation between closest ranks: rank = q/100 * (n-1).
double percentile_sorted(const std::vector<double>& sorted, double q);

/// Summarises samples (any order). An empty vector gives all zeros.
TimingStats summarize(const std::vector<double>& samples_us);

/// Sample coefficient of variation of `samples` (0 with fewer than 2 samples).
double sample_cv(const std::vector<double>& samples);

/// The percentile keys ("p95_us", "p99_us") that `count` samples cannot support (kMinSamplesP95/P99).
std::vector<std::string> low_confidence_percentiles(int64_t count);

/// {"mean_us", "p50_us", "p95_us", "p99_us", "min_us", "max_us", "stdev_us", "cv", "p50_ci_low_us",
/// "p50_ci_high_us", "count"}, plus "low_confidence": [the percentile keys the count cannot support] when any.
json to_json(const TimingStats& s);

}  // namespace moebench
