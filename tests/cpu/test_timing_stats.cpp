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
