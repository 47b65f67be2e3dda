// SPDX-License-Identifier: Apache-2.0
#include "harness/routing_path.hpp"

#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "config/run_fields.hpp"

#include <fmt/format.h>

namespace moebench {

namespace {

bool has_replicas(const ExpertPlacement& p) {
    for (const auto& ranks : p.ranks_of_expert)
        if (ranks.size() > 1) return true;
    for (const ExpertPlacement& l : p.by_layer)
        if (!l.experts_on_rank.empty() && has_replicas(l)) return true;
    return false;
}

// Why this run needs every token's routing; "" when the statistical path can model it.
std::string needs_ids(const RunConfig& cfg, const BackendTraits& traits, const Workload& workload,
                      const ModelConfig& model, const ExpertPlacement& placement, bool multi_process) {
    if (!model.is_moe_model()) return "the model has no MoE layer";
    if (!traits.routing_statistics)
        return "the " + traits.name + " backend routes every token (only a backend that models draws statistics)";
    if (multi_process) return "the processes of an expert-parallel run exchange every token's rows";
    if (!cfg.dump_tensors.empty()) return flag_of("dump_tensors") + " writes every token's routing";
    if (cfg.check) return flag_of("check") + " compares every token's routing";
    if (cfg.layout.resident_experts > 0 || cfg.layout.offload_ratio > 0)
        return "expert offload replays every token's experts through the layer's cache";
    if (cfg.options.capacity_factor > 0) return "a capacity factor drops assignments in the order the tokens arrive";
    // Pruning moves each dropped choice to the layer's most used kept expert that the token has not chosen: a token's
    // experts then depend on its other choices, which the shares drawn from do not say (workload/pruning.hpp).
    if (cfg.prune_below > 0)
        return run_field_label("", "prune_below") +
               " moves each pruned choice to a kept expert the token has not chosen, "
               "which depends on the token's other experts";
    if (workload.overrides_routing() && workload.independent_shares().empty())
        return "the " + workload.spec() + " workload's tokens depend on their place in the stream";
    if (has_replicas(placement))
        return "with replicas, which copy of an expert a token uses depends on the token (ExpertPlacement::dest_rank)";
    return "";
}

}  // namespace

RoutingPath choose_routing_path(const RunConfig& cfg, const BackendTraits& traits, const Workload& workload,
                                const ModelConfig& model, const ExpertPlacement& placement, bool multi_process) {
    const std::string why_not = needs_ids(cfg, traits, workload, model, placement, multi_process);
    if (cfg.routing_path == "statistical" && !why_not.empty())
        config_error(run_field_label("", "routing_path"), "cannot be statistical for this run: " + why_not,
                     cfg.routing_path, "use " + flag_of("routing_path") + " auto or per-token");
    if (!why_not.empty()) return {false, why_not};
    if (cfg.routing_path == "per-token") return {false, "asked for (routing_path per-token)"};
    const std::string what = workload.overrides_routing() ? "the " + workload.spec() + " workload's"
                                                          : "the " + traits.name + " backend's own router's";
    return {true, fmt::format("{}: {} tokens pick their experts independently of each other, so each MoE layer's "
                              "counts and all-to-all rows are drawn from the shares",
                              cfg.routing_path == "statistical" ? "asked for" : "auto", what)};
}

RoutingStatistics routing_statistics_of(const Workload& workload, const ModelConfig& model,
                                        const std::vector<int64_t>& layers) {
    RoutingStatistics s;
    if (!workload.overrides_routing()) {
        s.permutation.assign(layers.size(), {});
        return s;  // the backend's own router
    }
    s.shares_by_rank = workload.independent_shares();
    for (int64_t l : layers)
        s.permutation.push_back(model.is_moe_layer(l) ? workload.popularity_permutation(l) : std::vector<int32_t>{});
    s.source = "workload override (statistical): " + workload.describe();
    return s;
}

}  // namespace moebench
