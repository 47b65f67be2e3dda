// SPDX-License-Identifier: Apache-2.0
// `moebench place`: an expert placement from a routing trace. Experts that the same tokens select share a rank
// (fewer ranks per token: fewer dispatch rows under --a2a dedup), and the hottest experts get replicas on the
// least-loaded ranks (a lower max/mean rank load), as production load balancers for DeepSeek-style models do.
// One placement serves every MoE layer (co-activation and load are summed over the trace's layers).
#pragma once
#include "common/json_util.hpp"
#include "model/placement.hpp"
#include "workload/trace.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

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

/// How add_replicas picks each replica.
enum class ReplicaRule {
    load_per_copy,  // the expert with the most load per copy, on the least-loaded rank with a free slot (EPLB's rule)
    heaviest_rank,  // one of the heaviest rank's experts, on the rank that leaves the heaviest rank lightest
};

/// `replicas` more expert copies, added one at a time by `rule` to a placement of one copy per expert (`rank_of[e]`:
/// its rank; every rank ends with (E + replicas) / num_ranks slots, so num_ranks divides E + replicas). Loads in any
/// one unit: `expert_load` [E] the assignments of each expert, `home_load` [num_ranks * E] at r * E + e those of e
/// whose token lives on rank r; modeled under ExpertPlacement::dest_rank (a rank's own replica keeps its tokens' rows,
/// the rest spread evenly over the replicas). `source` names the result (ExpertPlacement::source); `tick(n)` after
/// replica n.
/// `moebench place --replicas` tries both rules on each start and keeps the better by replay; `--redundant-experts`
/// (workload/redundant_experts.hpp) tries both on each layer's expected load and keeps the better.
ExpertPlacement add_replicas(const std::vector<double>& expert_load, const std::vector<double>& home_load,
                             int64_t num_ranks, const std::vector<int32_t>& rank_of, int64_t replicas, ReplicaRule rule,
                             const std::string& source, const std::function<void(int64_t)>& tick = {});

/// num_ranks must divide num_experts, and `replicas` (extra expert copies in all) must be a multiple of num_ranks
/// (every rank holds the same number of expert slots); ConfigError naming the flag otherwise.
PlacementSearch search_placement(const RoutingTrace& trace, int64_t num_ranks, int64_t replicas, int64_t batch,
                                 const PlacementProgress& progress = {});

/// The file `moebench place` writes: placement_to_json of the chosen placement and its "predicted" block (counted):
/// the trace (named `trace_name`) replayed in steps of `batch` tokens with the contiguous blocks and with the chosen
/// placement; with `hidden_size` > 0 also the bytes of those rows in bf16. Its views are the format table's.
json placement_document(const PlacementSearch& search, const RoutingTrace& trace, const std::string& trace_name,
                        int64_t replicas, int64_t batch, int64_t hidden_size);

}  // namespace moebench
