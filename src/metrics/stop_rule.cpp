// SPDX-License-Identifier: Apache-2.0
// The stop rule of the measured loop; see stop_rule.hpp.
#include "metrics/stop_rule.hpp"

#include "metrics/timing_stats.hpp"

#include <algorithm>

namespace moebench {

bool StopRule::done(const std::vector<double>& step_us) {
    const auto n = static_cast<int64_t>(step_us.size());
    noise_ = median_rel_ci_halfwidth(step_us);
    if (n < t_.iters) return false;
    double total_s = 0;
    for (double w : step_us) total_s += w * 1e-6;
    const bool time_ok = total_s >= t_.min_time_s;
    const bool noise_ok = t_.max_noise <= 0 || noise_ <= t_.max_noise;
    if (time_ok && noise_ok) {
        reason_ = n == t_.iters ? "iters" : (noise_unmet_ ? "max_noise" : "min_time");
        return true;
    }
    noise_unmet_ = !noise_ok;
    if (n >= std::max(t_.max_iters, t_.iters)) {
        reason_ = "max_iters";
        return true;
    }
    return false;
}

}  // namespace moebench
