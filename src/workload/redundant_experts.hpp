// SPDX-License-Identifier: Apache-2.0
// --redundant-experts N: every MoE layer gets N more expert slots over the expert-parallel ranks, each a replica of one
// of the layer's hot experts, chosen from the workload's expected load of that layer by `moebench place --replicas`'s
// replica rules (add_replicas in placement_search.hpp: EPLB's hottest-per-copy onto the least-loaded rank, and the
// heaviest rank's expert where it leaves that rank lightest), the better of the two kept (docs/expert-parallel.md).
#pragma once
#include "model/placement.hpp"
#include "workload/workload.hpp"

#include <cstdint>
#include <vector>

namespace moebench {

/// Work units (replicas x candidate slots, summed over the layers) above which --redundant-experts is refused: at
/// about 5 ns each, a second of a run's preparation.
inline constexpr double kMaxRedundantExpertWork = 2e8;

/// `base` (one copy of each expert: contiguous blocks or a placement file without replicas) with `replicas` more slots
/// in each MoE layer of `layers` (ExpertPlacement::by_layer, whose `source` names the rule that placed them). Per
/// layer, add_replicas runs both ReplicaRules on Workload::expected_load, the layer's tokens spread over the ranks as
/// `shape` spreads its sequences (tokens_on_rank), and keeps the placement whose busiest rank expects the least load
/// under ExpertPlacement::dest_rank's rule (load_per_copy on a tie). ConfigError naming redundant_experts when the
/// workload's load is not known before the run (router) or the search would take more than kMaxRedundantExpertWork;
/// naming placement when the file already holds replicas.
ExpertPlacement with_redundant_experts(const ExpertPlacement& base, const Workload& workload, const ModelConfig& model,
                                       const std::vector<int64_t>& layers, const StepShape& shape, int64_t replicas);

/// Each rank's expected share of a layer's assignments under `p` (ExpertPlacement::dest_rank's rule): expert e's
/// assignments made by rank r's tokens (expert_load[e] x home_share[r]) stay on r when r holds e, else spread evenly
/// over e's replicas.
std::vector<double> expected_rank_load(const ExpertPlacement& p, const std::vector<double>& expert_load,
                                       const std::vector<double>& home_share);

}  // namespace moebench
