// SPDX-License-Identifier: Apache-2.0
// When to stop measuring: at least `iters` steps, then until min_time_s has passed and the median is known to
// within max_noise, or at the cap.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moebench {

struct StopTargets {
    int64_t iters = 1;      // steps measured at least
    int64_t max_iters = 1;  // the cap (never fewer than iters)
    double min_time_s = 0;  // measured time at least (sum of the step samples)
    double max_noise = 0;   // half-width of the median's 95% CI over the median at most (0 = off)
};

/// What the noise rule compares against max_noise, in words, for the report.
inline constexpr const char* kNoiseRule =
    "half-width of the 95% confidence interval of the median step time (order statistics) / median";

class StopRule {
public:
    explicit StopRule(const StopTargets& t) : t_(t) {}

    /// After each measured step, with every step time so far (us): whether to stop. Sets reason() when it does:
    /// "iters" (the minimum sufficed), "min_time", "max_noise" (the longest-unmet rule was met last), "max_iters".
    bool done(const std::vector<double>& step_us);

    const std::string& reason() const { return reason_; }
    /// The noise measure at the last call (see kNoiseRule); 0 before.
    double noise() const { return noise_; }

private:
    StopTargets t_;
    bool noise_unmet_ = false;  // the noise rule held the last stop back (names the reason)
    double noise_ = 0;
    std::string reason_;
};

}  // namespace moebench
