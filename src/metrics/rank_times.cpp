// SPDX-License-Identifier: Apache-2.0
#include "metrics/rank_times.hpp"

namespace moebench {

RankSpread across_ranks(const std::vector<double>& per_rank_us) {
    RankSpread s;
    if (per_rank_us.empty()) return s;
    s.fastest_us = per_rank_us.front();
    double sum = 0;
    for (size_t r = 0; r < per_rank_us.size(); ++r) {
        const double us = per_rank_us[r];
        sum += us;
        if (s.slowest_rank < 0 || us > s.slowest_us) {
            s.slowest_us = us;
            s.slowest_rank = static_cast<int64_t>(r);
        }
        if (us < s.fastest_us) s.fastest_us = us;
    }
    s.mean_us = sum / static_cast<double>(per_rank_us.size());
    return s;
}

}  // namespace moebench
