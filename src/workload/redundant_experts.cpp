// SPDX-License-Identifier: Apache-2.0
#include "workload/redundant_experts.hpp"

#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "config/run_fields.hpp"
#include "model/phase_work.hpp"
#include "workload/placement_search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace moebench {

std::vector<double> expected_rank_load(const ExpertPlacement& p, const std::vector<double>& expert_load,
                                       const std::vector<double>& home_share) {
    std::vector<double> out(static_cast<size_t>(p.num_ranks), 0.0);
    for (int64_t e = 0; e < p.num_experts; ++e) {
        const auto& holders = p.ranks_of_expert[static_cast<size_t>(e)];
        double away = 0;  // made on ranks without a copy: spread over the copies
        for (int64_t r = 0; r < p.num_ranks; ++r) {
            const double x = expert_load[static_cast<size_t>(e)] * home_share[static_cast<size_t>(r)];
            if (p.local_index(r, static_cast<int32_t>(e)) >= 0)
                out[static_cast<size_t>(r)] += x;
            else
                away += x;
        }
        for (int32_t h : holders) out[static_cast<size_t>(h)] += away / static_cast<double>(holders.size());
    }
    return out;
}

ExpertPlacement with_redundant_experts(const ExpertPlacement& base, const Workload& workload, const ModelConfig& model,
                                       const std::vector<int64_t>& layers, const StepShape& shape, int64_t replicas) {
    const int64_t E = base.num_experts, N = base.num_ranks;
    MOEBENCH_CHECK(E == model.moe.num_experts && N > 1 && replicas > 0 && (E + replicas) % N == 0,
                   "redundant experts: {} over {} experts on {} ranks", replicas, E, N);
    const std::string field = run_field_label("", "redundant_experts");
    const int64_t slots = (E + replicas) / N;  // every rank's, replicas filling what the base leaves
    for (int64_t r = 0; r < N; ++r)
        if (static_cast<int64_t>(base.experts_on_rank[static_cast<size_t>(r)].size()) > slots)
            config_error(run_field_label("", "placement"),
                         fmt::format("puts {} experts on rank {}, more than the {} slots each rank has with {} {}",
                                     base.experts_on_rank[static_cast<size_t>(r)].size(), r, slots,
                                     flag_of("redundant_experts"), replicas),
                         base.source,
                         fmt::format("use a placement with at most {} experts per rank, or drop {}", slots,
                                     flag_of("redundant_experts")));
    std::vector<int32_t> rank_of(static_cast<size_t>(E), -1);
    for (int64_t e = 0; e < E; ++e) {
        const auto& holders = base.ranks_of_expert[static_cast<size_t>(e)];
        if (holders.size() != 1)
            config_error(run_field_label("", "placement"),
                         fmt::format("holds expert {} on {} ranks, and {} adds replicas of its own", e, holders.size(),
                                     flag_of("redundant_experts")),
                         base.source,
                         fmt::format("use a placement without replicas (moebench place without {}), or drop {} and "
                                     "keep the file's replicas",
                                     flag_of("replicas"), flag_of("redundant_experts")));
        rank_of[static_cast<size_t>(e)] = holders.front();
    }
    // Both rules cost about R x (E + slots N) = R (2E + R) steps per layer (add_replicas); refused before any of it.
    int64_t moe_layers = 0;
    for (int64_t l : layers) moe_layers += model.is_moe_layer(l) ? 1 : 0;
    const double e2 = 2.0 * static_cast<double>(E),
                 per_layer = kMaxRedundantExpertWork / std::max<double>(1, moe_layers);
    const auto work = [&](double r) { return static_cast<double>(moe_layers) * r * (e2 + r); };
    if (work(static_cast<double>(replicas)) > kMaxRedundantExpertWork) {
        const auto fit = static_cast<int64_t>((std::sqrt(e2 * e2 + 4 * per_layer) - e2) / 2) / N * N;
        config_error(field,
                     fmt::format("would take {:.2g} steps to place over {} MoE layer(s) of {} experts on {} ranks, "
                                 "more than the {:.0e} (about a second) a run's preparation may take",
                                 work(static_cast<double>(replicas)), moe_layers, E, N, kMaxRedundantExpertWork),
                     std::to_string(replicas),
                     fit > 0 ? fmt::format("use at most {} (DeepSeek-V3 serves 256 experts with 32)", fit)
                             : "run fewer " + flag_of("layers"));
    }
    // Where the tokens live: rank r holds tokens_on_rank / T of every expert's expected load.
    const double T = static_cast<double>(shape.num_tokens());
    std::vector<double> home_share(static_cast<size_t>(N));
    for (int64_t r = 0; r < N; ++r)
        home_share[static_cast<size_t>(r)] =
            T > 0 ? static_cast<double>(tokens_on_rank(shape, r, N)) / T : 1.0 / static_cast<double>(N);

    ExpertPlacement out = base;
    out.by_layer.assign(static_cast<size_t>(model.num_layers), ExpertPlacement{});
    std::vector<double> home_load(static_cast<size_t>(N * E));
    for (int64_t l : layers) {
        if (!model.is_moe_layer(l)) continue;
        const std::vector<double> load = workload.expected_load(l);
        if (static_cast<int64_t>(load.size()) != E)
            config_error(field,
                         "replicates each layer's hottest experts by the workload's expected load, and " +
                             flag_of("routing") + " " + workload.spec() +
                             " gives none before the run (the model's own router decides)",
                         std::to_string(replicas),
                         fmt::format("use a synthetic workload (e.g. {} powerlaw:0.5) or trace:FILE, or drop {}",
                                     flag_of("routing"), flag_of("redundant_experts")));
        for (int64_t r = 0; r < N; ++r)
            for (int64_t e = 0; e < E; ++e)
                home_load[static_cast<size_t>(r * E + e)] =
                    load[static_cast<size_t>(e)] * home_share[static_cast<size_t>(r)];
        // place keeps the better of its two rules by replaying its trace; here the expected load decides. EPLB's rule
        // alone, on a fixed base, can make the busiest rank busier (a hot expert on a light rank gets the first
        // replica): powerlaw:0.5, 256 experts on 8 ranks, 8 replicas, expected max/mean 1.116 -> 1.166.
        ExpertPlacement best;
        double best_busiest = 0;
        for (const auto& [rule, name] : {std::pair{ReplicaRule::load_per_copy, "load per copy"},
                                         std::pair{ReplicaRule::heaviest_rank, "heaviest rank"}}) {
            ExpertPlacement p = add_replicas(load, home_load, N, rank_of, replicas, rule, name);
            const std::vector<double> rank_load = expected_rank_load(p, load, home_share);
            const double busiest = *std::max_element(rank_load.begin(), rank_load.end());
            if (best.experts_on_rank.empty() || busiest < best_busiest * (1 - 1e-12)) {
                best = std::move(p);
                best_busiest = busiest;
            }
        }
        out.by_layer[static_cast<size_t>(l)] = std::move(best);
    }
    out.source = fmt::format("{}, {} redundant experts per layer (replicas by the workload's expected load)",
                             base.source == "contiguous" ? "contiguous blocks" : base.source, replicas);
    return out;
}

}  // namespace moebench
