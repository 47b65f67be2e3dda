// SPDX-License-Identifier: Apache-2.0
// Timing statistics against hand-computed samples (linear-interpolation percentiles, sample stdev).
#include "metrics/timing_stats.hpp"

#include <catch2/catch.hpp>

#include <cmath>

using namespace moebench;

TEST_CASE("summarize: five samples, computed by hand", "[timing_stats]") {
    // Unsorted on purpose. Sorted: 1 2 3 4 5; mean 3; squared deviations 4+1+0+1+4 = 10; sample var 10/4.
    TimingStats s = summarize({5, 1, 4, 2, 3});
    CHECK(s.count == 5);
    CHECK(s.mean_us == Approx(3.0));
    CHECK(s.p50_us == Approx(3.0));
    CHECK(s.p95_us == Approx(4.8));   // rank 0.95 * 4 = 3.8 -> 4 + 0.8 * (5 - 4)
    CHECK(s.p99_us == Approx(4.96));  // rank 3.96
    CHECK(s.min_us == 1.0);
    CHECK(s.max_us == 5.0);
    CHECK(s.stdev_us == Approx(std::sqrt(2.5)));
    CHECK(s.cv == Approx(std::sqrt(2.5) / 3.0));
}

TEST_CASE("summarize: skewed samples and interpolation between ranks", "[timing_stats]") {
    // 10 samples: 100 x 9 and one outlier of 1000. mean = 1900/10 = 190.
    std::vector<double> v(9, 100.0);
    v.push_back(1000.0);
    TimingStats s = summarize(v);
    CHECK(s.mean_us == Approx(190.0));
    CHECK(s.p50_us == Approx(100.0));
    CHECK(s.p95_us == Approx(100.0 + 0.55 * 900.0));  // rank 8.55: between 100 (index 8) and 1000 (index 9)
    CHECK(s.p99_us == Approx(100.0 + 0.91 * 900.0));
    // Deviations: nine of -90 and one of +810; sample variance (9 * 8100 + 656100) / 9 = 81000.
    CHECK(s.stdev_us == Approx(std::sqrt(81000.0)));
    CHECK(percentile_sorted({10, 20}, 50) == Approx(15.0));
    CHECK(percentile_sorted({10, 20}, 0) == Approx(10.0));
    CHECK(percentile_sorted({10, 20}, 100) == Approx(20.0));
}

TEST_CASE("summarize: degenerate inputs", "[timing_stats]") {
    TimingStats empty = summarize({});
    CHECK(empty.count == 0);
    CHECK(empty.mean_us == 0.0);
    TimingStats one = summarize({42.0});
    CHECK(one.mean_us == 42.0);
    CHECK(one.p99_us == 42.0);
    CHECK(one.stdev_us == 0.0);
    CHECK(one.cv == 0.0);
    CHECK(sample_cv({7.0}) == 0.0);
    CHECK(sample_cv({1, 2, 3, 4, 5}) == Approx(std::sqrt(2.5) / 3.0));
    json j = to_json(summarize({1, 3}));
    for (const char* key : {"mean_us", "p50_us", "p95_us", "p99_us", "min_us", "max_us", "stdev_us", "cv"})
        CHECK(j.contains(key));
    CHECK(j["mean_us"].get<double>() == Approx(2.0));
}

TEST_CASE("median confidence interval: order statistics, computed by hand", "[timing_stats]") {
    // n = 100: half = 1.96 * 10 / 2 = 9.8; j = floor(50 - 9.8) = 40, k = ceil(1 + 50 + 9.8) = 61 (1-based).
    std::vector<double> v;
    for (int i = 1; i <= 100; ++i) v.push_back(i);
    auto [lo, hi] = median_ci95_sorted(v);
    CHECK(lo == 40.0);
    CHECK(hi == 61.0);
    CHECK(median_rel_ci_halfwidth(v) == Approx((61.0 - 40.0) / 2.0 / 50.5));
    // n = 10: j = floor(5 - 3.099) = 1, k = ceil(9.099) = 10: the whole range.
    std::vector<double> ten = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    CHECK(median_ci95_sorted(ten) == std::pair<double, double>{1.0, 10.0});
    // Below ~6 samples the interval clips to [min, max].
    CHECK(median_ci95_sorted({3, 4, 9}) == std::pair<double, double>{3.0, 9.0});
    CHECK(median_rel_ci_halfwidth({5.0}) == 0.0);
    TimingStats s = summarize(v);
    CHECK(s.p50_ci_low_us == 40.0);
    CHECK(s.p50_ci_high_us == 61.0);
}

TEST_CASE("the median's CI shrinks with more samples while the CV does not", "[timing_stats]") {
    // Evenly spread over [100, 110): the spread is fixed, so the CV stays near 2.9% at any n; the CI of the
    // median narrows as 1/sqrt(n). A CV target below 2.9% could never be met by running longer.
    auto samples = [](int n) {
        std::vector<double> v;
        for (int i = 0; i < n; ++i) v.push_back(100.0 + 10.0 * ((i * 37) % n) / n);
        return v;
    };
    const double small = median_rel_ci_halfwidth(samples(20)), large = median_rel_ci_halfwidth(samples(2000));
    CHECK(large < small / 5);
    CHECK(large < 0.003);
    CHECK(sample_cv(samples(20)) > 0.025);
    CHECK(sample_cv(samples(2000)) > 0.025);
}

TEST_CASE("percentiles from too few samples are flagged low_confidence", "[timing_stats]") {
    CHECK(low_confidence_percentiles(10) == std::vector<std::string>{"p95_us", "p99_us"});
    CHECK(low_confidence_percentiles(kMinSamplesP95) == std::vector<std::string>{"p99_us"});
    CHECK(low_confidence_percentiles(kMinSamplesP99).empty());
    json few = to_json(summarize({1, 2, 3}));
    REQUIRE(few.contains("low_confidence"));
    CHECK(few["low_confidence"] == json{"p95_us", "p99_us"});
    CHECK(few["count"] == 3);
    std::vector<double> many(100, 7.0);
    CHECK_FALSE(to_json(summarize(many)).contains("low_confidence"));
}
