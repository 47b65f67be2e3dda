// SPDX-License-Identifier: Apache-2.0
// Expert pruning (run field prune_below): the experts of each MoE layer whose share of the routing is below a
// fraction are dropped; a token never routes to a dropped expert. Which experts: from the workload's expected shares
// (a trace's own counts of the layer; a synthetic spec's popularity). How a token avoids them: the model's router
// skips them in core::route_row (expert_keep); a workload that imposes ids (trace, synthetic) has only the token's k
// choices, so each dropped choice goes to the kept expert the layer uses most that the token has not chosen, with the
// dropped choice's weight (a top-k that sums to 1 still does). docs/run-schema.md, prune_below.
#pragma once
#include "config/model_config.hpp"
#include "workload/workload.hpp"

#include <memory>
#include <string>
#include <vector>

namespace moebench {

struct ExpertPruning {
    double below = 0;                              // the fraction: experts with a share < below are dropped
    std::string shares_from;                       // where the shares came from, in words
    std::vector<std::vector<double>> shares;       // [model layer]: each expert's share ([E]; empty: not pruned)
    std::vector<std::vector<unsigned char>> keep;  // [model layer]: 1 = kept ([E]; empty: not pruned)
    int64_t kept(int64_t layer) const;
};

/// The experts each MoE layer of `layers` keeps. The workload must know its shares before the run (the router
/// workload does not: ConfigError naming `field`); a layer that would keep fewer than top-k experts is a ConfigError
/// naming the layer and the largest fraction that keeps k.
ExpertPruning prune_experts(const Workload& workload, const ModelConfig& model, const std::vector<int64_t>& layers,
                            double below, const std::string& field);

/// `inner` with every dropped expert of its ids replaced as the header says; the rest of the stream unchanged.
std::unique_ptr<Workload> pruned_workload(std::unique_ptr<Workload> inner, const ExpertPruning& pruning);

}  // namespace moebench
