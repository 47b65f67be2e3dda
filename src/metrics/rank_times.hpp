// SPDX-License-Identifier: Apache-2.0
// One phase across expert-parallel ranks: the ranks run side by side and wait for each other at the all-to-alls,
// so the slowest rank sets the phase. One reduction for the sim's modeled ranks and for real multi-process runs.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace moebench {

struct RankSpread {
    double slowest_us = 0;      // the phase's time: the slowest rank's
    int64_t slowest_rank = -1;  // lowest rank among equals; -1 when no rank ran
    double fastest_us = 0;
    double mean_us = 0;
    /// slowest / mean: 1 when balanced (the straggler's cost); 0 when no rank ran.
    double imbalance() const { return mean_us > 0 ? slowest_us / mean_us : 0.0; }
};

/// `per_rank_us[r]`: rank r's time of the phase. Ranks with nothing to do count with their 0.
RankSpread across_ranks(const std::vector<double>& per_rank_us);

}  // namespace moebench
