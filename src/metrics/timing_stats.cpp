// SPDX-License-Identifier: Apache-2.0
// Summary statistics of timing samples; see timing_stats.hpp for the conventions.
#include "metrics/timing_stats.hpp"
#include "core/report_keys.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace moebench {

double percentile_sorted(const std::vector<double>& sorted, double q) {
    if (sorted.empty()) return 0.0;
    if (sorted.size() == 1) return sorted[0];
    double rank = std::clamp(q, 0.0, 100.0) / 100.0 * static_cast<double>(sorted.size() - 1);
    size_t lo = static_cast<size_t>(std::floor(rank));
    size_t hi = std::min(lo + 1, sorted.size() - 1);
    double frac = rank - static_cast<double>(lo);
    return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

static double sample_stdev(const std::vector<double>& v, double mean) {
    if (v.size() < 2) return 0.0;
    double ss = 0;
    for (double x : v) ss += (x - mean) * (x - mean);
    return std::sqrt(ss / static_cast<double>(v.size() - 1));
}

double sample_cv(const std::vector<double>& samples) {
    if (samples.size() < 2) return 0.0;
    double sum = 0;
    for (double x : samples) sum += x;
    double mean = sum / static_cast<double>(samples.size());
    return mean != 0 ? sample_stdev(samples, mean) / mean : 0.0;
}

std::pair<double, double> median_ci95_sorted(const std::vector<double>& sorted) {
    if (sorted.empty()) return {0.0, 0.0};
    const double n = static_cast<double>(sorted.size());
    const double half = 1.96 * std::sqrt(n) / 2.0;
    const auto clip = [&](double rank_1based) { return static_cast<size_t>(std::clamp(rank_1based, 1.0, n)) - 1; };
    return {sorted[clip(std::floor(n / 2.0 - half))], sorted[clip(std::ceil(1.0 + n / 2.0 + half))]};
}

double median_rel_ci_halfwidth(const std::vector<double>& samples) {
    if (samples.size() < 2) return 0.0;
    std::vector<double> sorted = samples;
    std::sort(sorted.begin(), sorted.end());
    const double median = percentile_sorted(sorted, 50);
    const auto [lo, hi] = median_ci95_sorted(sorted);
    return median != 0 ? (hi - lo) / 2.0 / std::fabs(median) : 0.0;
}

std::vector<std::string> low_confidence_percentiles(int64_t count) {
    std::vector<std::string> keys;
    if (count < kMinSamplesP95) keys.push_back(keys::kP95Us);
    if (count < kMinSamplesP99) keys.push_back(keys::kP99Us);
    return keys;
}

TimingStats summarize(const std::vector<double>& samples_us) {
    TimingStats s;
    if (samples_us.empty()) return s;
    std::vector<double> sorted = samples_us;
    std::sort(sorted.begin(), sorted.end());
    s.count = static_cast<int64_t>(sorted.size());
    double sum = 0;
    for (double x : sorted) sum += x;
    s.mean_us = sum / static_cast<double>(sorted.size());
    s.p50_us = percentile_sorted(sorted, 50);
    s.p95_us = percentile_sorted(sorted, 95);
    s.p99_us = percentile_sorted(sorted, 99);
    s.min_us = sorted.front();
    s.max_us = sorted.back();
    s.stdev_us = sample_stdev(sorted, s.mean_us);
    s.cv = s.mean_us != 0 ? s.stdev_us / s.mean_us : 0.0;
    std::tie(s.p50_ci_low_us, s.p50_ci_high_us) = median_ci95_sorted(sorted);
    return s;
}

json to_json(const TimingStats& s) {
    json j{{keys::kMeanUs, s.mean_us},
           {keys::kP50Us, s.p50_us},
           {keys::kP95Us, s.p95_us},
           {keys::kP99Us, s.p99_us},
           {"min_us", s.min_us},
           {"max_us", s.max_us},
           {"stdev_us", s.stdev_us},
           {"cv", s.cv},
           {"p50_ci_low_us", s.p50_ci_low_us},
           {"p50_ci_high_us", s.p50_ci_high_us},
           {"count", s.count}};
    const std::vector<std::string> weak = low_confidence_percentiles(s.count);
    if (!weak.empty()) j[keys::kLowConfidence] = weak;
    return j;
}

}  // namespace moebench
