// SPDX-License-Identifier: Apache-2.0
// Hand-made reports from real ones: the statistics block of given samples, computed here (independently of
// metrics/timing_stats), so that an edited report is plausible everywhere except where a test breaks it on purpose.
#pragma once
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace moebench::test {

/// mean, p50/p95/p99 (linear between order statistics, numpy's default), min, max, sample stdev (n - 1), cv, count.
inline nlohmann::json stats_of(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const double n = static_cast<double>(v.size());
    double mean = 0;
    for (double x : v) mean += x;
    mean /= n;
    double ss = 0;
    for (double x : v) ss += (x - mean) * (x - mean);
    const double sd = v.size() > 1 ? std::sqrt(ss / (n - 1)) : 0.0;
    auto pct = [&](double q) {
        const double rank = q / 100 * (n - 1);
        const size_t lo = static_cast<size_t>(std::floor(rank)), hi = std::min(lo + 1, v.size() - 1);
        return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
    };
    return {{"mean_us", mean},     {"p50_us", pct(50)},  {"p95_us", pct(95)}, {"p99_us", pct(99)},
            {"min_us", v.front()}, {"max_us", v.back()}, {"stdev_us", sd},    {"cv", mean > 0 ? sd / mean : 0.0},
            {"count", v.size()}};
}

/// A measured run's step replaced by these samples (its statistics, its samples, iterations.measured).
inline void set_step_samples(nlohmann::json& run, const std::vector<double>& samples) {
    run["latency"]["step"] = stats_of(samples);
    run["latency"]["step_samples_us"] = samples;
    run["iterations"]["measured"] = samples.size();
}

/// Every time of a run's step and phases multiplied by `f` (B = A slowed down by f); throughput divided by it.
inline void scale_times(nlohmann::json& run, double f) {
    auto scale_stats = [f](nlohmann::json& s) {
        for (auto& [k, v] : s.items())
            if (k.size() > 3 && k.compare(k.size() - 3, 3, "_us") == 0 && v.is_number()) v = v.get<double>() * f;
    };
    nlohmann::json& lat = run["latency"];
    scale_stats(lat["step"]);
    for (auto& [name, ph] : lat["phases"].items()) scale_stats(ph);
    for (auto& s : lat["step_samples_us"]) s = s.get<double>() * f;
    run["throughput"]["tokens_per_s"] = run["throughput"]["tokens_per_s"].get<double>() / f;
}

}  // namespace moebench::test
