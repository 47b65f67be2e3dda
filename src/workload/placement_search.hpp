// SPDX-License-Identifier: Apache-2.0
// `moebench place`: an expert placement from a routing trace. Experts that the same tokens select share a rank
// (fewer ranks per token: fewer dispatch rows under --a2a dedup), and the hottest experts get replicas on the
// least-loaded ranks (a lower max/mean rank load), as production load balancers for DeepSeek-style models do.
// One placement serves every MoE layer (co-activation and load are summed over the trace's layers).
#pragma once
#include "model/placement.hpp"
#include "workload/trace.hpp"

#include <cstdint>
#include <functional>
#include <string>

namespace moebench {

/// What a placement does to a trace, replayed with the run's own rules: steps of `batch` tokens (decode: one per
/// sequence, the trace's sequences interleaved as the run replays them: trace_token_at), token homes as the runner
/// splits sequences over ranks, replicas chosen by ExpertPlacement::dest_rank.
struct PlacementScore {
    double dedup_remote_rows_per_step = 0;       // dispatch rows that leave their rank, --a2a dedup
    double per_expert_remote_rows_per_step = 0;  // the same, --a2a per-expert
    double max_over_mean_rank_load = 0;          // (row, expert) products per rank, per step and layer, averaged
    int64_t steps = 0;                           // whole steps the trace holds
};
PlacementScore score_placement(const RoutingTrace& trace, const ExpertPlacement& placement, int64_t batch);

struct PlacementSearch {
    ExpertPlacement placement;
    PlacementScore contiguous, chosen;
    std::string chosen_from;        // which start and replica rule gave the chosen placement
    int64_t candidates_scored = 0;  // placements replayed exactly (the final choice)
    int64_t swaps_evaluated = 0;    // swaps the local search looked at (a work count for tests, not a time)
};

/// Called now and then by a long search: the share of its estimated work done (0..1) and what it is doing.
using PlacementProgress = std::function<void(double done, const std::string& stage)>;

/// The bound on the replicas' estimated work (elementary load updates, about 3e8 a second on one core): beyond it
/// search_placement refuses with a ConfigError naming --replicas and the count that fits, instead of running for many
/// minutes. The rest of the search is bounded by construction (E <= 4096, a sample of the replay).
inline constexpr double kMaxPlacementWork = 1e10;

/// num_ranks must divide num_experts, and `replicas` (extra expert copies in all) must be a multiple of num_ranks
/// (every rank holds the same number of expert slots); ConfigError naming the flag otherwise.
PlacementSearch search_placement(const RoutingTrace& trace, int64_t num_ranks, int64_t replicas, int64_t batch,
                                 const PlacementProgress& progress = {});

}  // namespace moebench
