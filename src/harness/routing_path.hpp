// SPDX-License-Identifier: Apache-2.0
// The routing path of a run point, chosen here and nowhere else (docs/sim-backend.md, "Routing path"):
// - per token: the workload hands every token's experts to the backend each step (what cpu and cuda run, and what
//   traces, --dump-tensors, --check, capacity drops and replicas need);
// - statistical: a backend that models (traits.routing_statistics: the sim) draws each MoE layer's tokens per expert
//   and all-to-all rows from the workload's shares, in O(experts + ranks) per layer whatever the batch.
// The report's routing.path and routing.path_reason say which ran and why.
#pragma once
#include "config/model_config.hpp"
#include "config/run_config.hpp"
#include "engine/backend.hpp"
#include "workload/workload.hpp"

#include <string>
#include <vector>

namespace moebench {

struct RoutingPath {
    bool statistical = false;
    std::string reason;  // why this path, for the report
    const char* name() const { return statistical ? "statistical" : "per-token"; }
};

/// The path for `cfg` (its routing_path: auto, per-token or statistical) on a backend with `traits`. `statistical`
/// asked for where the run needs ids is a ConfigError naming routing_path and the reason. `multi_process`: expert
/// parallelism over processes (they exchange every token's rows).
RoutingPath choose_routing_path(const RunConfig& cfg, const BackendTraits& traits, const Workload& workload,
                                const ModelConfig& model, const ExpertPlacement& placement, bool multi_process);

/// What the statistical path draws from: the workload's shares and each MoE layer's permutation (the backend's own
/// router when the workload leaves routing to it).
RoutingStatistics routing_statistics_of(const Workload& workload, const ModelConfig& model,
                                        const std::vector<int64_t>& layers);

}  // namespace moebench
