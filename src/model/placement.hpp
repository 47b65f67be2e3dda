// SPDX-License-Identifier: Apache-2.0
// Expert placement for expert parallelism: which ranks hold which experts (replicas allowed), and which replica
// computes a given token's assignment. One definition for the processes of an MPI run, the sim and `moebench place`.
#pragma once
#include "common/json_util.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace moebench {

struct ExpertPlacement {
    int64_t num_experts = 0;
    int64_t num_ranks = 1;
    std::vector<std::vector<int32_t>> experts_on_rank;  // [rank]: global expert ids held, ascending
    std::vector<std::vector<int32_t>> ranks_of_expert;  // [expert]: ranks holding a replica, ascending
    std::string source = "contiguous";                  // "contiguous" or the file it was read from
    /// With redundant experts (--redundant-experts), each MoE layer's own placement (the experts above plus that
    /// layer's replicas), indexed by model layer; layers without an entry (empty experts_on_rank) use the one above.
    std::vector<ExpertPlacement> by_layer;
    /// The placement of model layer `layer`: its own when it has one, else this one.
    const ExpertPlacement& of_layer(int64_t layer) const;

    /// Index of `expert` among the experts of `rank` (its weights' slot there); -1 when the rank does not hold it.
    int64_t local_index(int64_t rank, int32_t expert) const;
    /// The rank that computes `expert` for global token `token` living on `src_rank`: the replica on src_rank when
    /// it holds one (nothing crosses a link), else replica token mod replicas (spreads a hot expert's tokens).
    int64_t dest_rank(int32_t expert, int64_t src_rank, int64_t token) const;
    int64_t max_experts_per_rank() const;
};

/// Experts in contiguous blocks, as even as E and N allow: the first E mod N ranks hold ceil(E/N) experts, the others
/// floor(E/N) (N divides E but with redundant experts, whose replicas fill the short ranks' free slots: DeepSeek-V3's
/// 256 + 32 slots on 144 ranks). Expert e's rank: contiguous_rank.
ExpertPlacement contiguous_placement(int64_t num_experts, int64_t num_ranks);
/// The rank of expert `expert` under contiguous_placement(num_experts, num_ranks).
int64_t contiguous_rank(int64_t expert, int64_t num_experts, int64_t num_ranks);
/// From a placement document (`moebench place`): {"schema": "moebench.placement/1", "num_experts": E,
/// "num_ranks": N, "experts_on_rank": [[ids...], ...]}. Every expert on at least one rank, ids in [0, E), no id
/// twice on one rank. ConfigError naming `where` otherwise, and when E or N disagree with the run's.
ExpertPlacement placement_from_json(const json& doc, int64_t num_experts, int64_t num_ranks, const std::string& where);
json placement_to_json(const ExpertPlacement& p);
/// The placement of a run: the file at `path` ("" = contiguous).
ExpertPlacement load_placement(const std::string& path, int64_t num_experts, int64_t num_ranks);

inline constexpr const char* kPlacementSchema = "moebench.placement/1";

}  // namespace moebench
