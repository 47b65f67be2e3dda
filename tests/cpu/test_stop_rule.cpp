// SPDX-License-Identifier: Apache-2.0
// The measured loop's stop rule: minimum steps, minimum time, the median's CI as the noise rule, the cap.
#include "metrics/stop_rule.hpp"
#include "metrics/timing_stats.hpp"

#include <catch2/catch.hpp>

#include <random>

using namespace moebench;

namespace {
// Feeds `next()` one step at a time until the rule stops; returns the number of steps.
template <class Next>
size_t run_until_stop(StopRule& rule, Next next, size_t hard_cap = 1'000'000) {
    std::vector<double> steps;
    while (steps.size() < hard_cap) {
        steps.push_back(next());
        if (rule.done(steps)) return steps.size();
    }
    return steps.size();
}
}  // namespace

TEST_CASE("stop rule: iters alone, then the cap", "[stop_rule]") {
    StopRule plain(StopTargets{5, 50, 0, 0});
    CHECK(run_until_stop(plain, [] { return 10.0; }) == 5);
    CHECK(plain.reason() == "iters");
    // 10 us steps against 1 ms of min_time: 100 steps, held by the cap at 50.
    StopRule capped(StopTargets{5, 50, 1e-3, 0});
    CHECK(run_until_stop(capped, [] { return 10.0; }) == 50);
    CHECK(capped.reason() == "max_iters");
    StopRule timed(StopTargets{5, 1000, 1e-3, 0});
    CHECK(run_until_stop(timed, [] { return 10.0; }) == 100);
    CHECK(timed.reason() == "min_time");
}

TEST_CASE("stop rule: a noise target below the sample CV is met by running longer", "[stop_rule]") {
    // Step times with a 3% CV: the former rule (sample CV <= max_noise) could never stop at 0.5% and ran to the
    // cap; the median's CI half-width falls below 0.5% after a few hundred steps.
    std::mt19937_64 rng(7);
    std::normal_distribution<double> step_us(1000.0, 30.0);
    StopRule rule(StopTargets{10, 100'000, 0, 0.005});
    const size_t n = run_until_stop(rule, [&] { return step_us(rng); });
    CHECK(rule.reason() == "max_noise");
    CHECK(rule.noise() <= 0.005);
    CHECK(n > 50);
    CHECK(n < 5000);
}
