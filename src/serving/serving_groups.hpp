// SPDX-License-Identifier: Apache-2.0
// The coarse groups a serving summary (`moebench deploy`'s `phase_groups_us`) splits a step into: attention (its
// projections, norms and the attention itself), the MoE experts (routed and shared), the expert-parallel all-to-alls,
// the tensor-parallel collectives, and everything else (embedding, router, permutation, dense MLP, head). A switch
// over the vocabulary (-Wswitch names a phase added without its group); the compile-time check ties the two
// communication groups to the phase table's link-bound phases.
#pragma once
#include "core/phase.hpp"

#include <array>
#include <string_view>

namespace moebench {

enum class ServingGroup { attention, moe_experts, all_to_all, collectives, other, count_ };
inline constexpr int kNumServingGroups = static_cast<int>(ServingGroup::count_);
inline constexpr std::array<std::string_view, kNumServingGroups> kServingGroupNames = {
    "attention", "moe_experts", "all_to_all", "collectives", "other"};

constexpr ServingGroup serving_group(Phase p) {
    switch (p) {
        case Phase::attn_norm:
        case Phase::qkv_proj:
        case Phase::attention:
        case Phase::linear_attention:
        case Phase::o_proj: return ServingGroup::attention;
        case Phase::expert_up:
        case Phase::activation:
        case Phase::expert_down:
        case Phase::shared_expert: return ServingGroup::moe_experts;
        case Phase::dispatch_a2a:
        case Phase::combine_a2a: return ServingGroup::all_to_all;
        case Phase::attn_allreduce:
        case Phase::moe_allgather:
        case Phase::moe_allreduce:
        case Phase::dense_allreduce: return ServingGroup::collectives;
        case Phase::embed:
        case Phase::ffn_norm:
        case Phase::router_gemm:
        case Phase::topk:
        case Phase::permute:
        case Phase::unpermute_reduce:
        case Phase::dense_mlp:
        case Phase::final_norm:
        case Phase::lm_head:
        case Phase::count_: return ServingGroup::other;
    }
    return ServingGroup::other;
}

constexpr std::string_view serving_group_name(Phase p) {
    return kServingGroupNames[static_cast<size_t>(serving_group(p))];
}

namespace serving_groups_detail {
// The communication groups are exactly the phases the table bounds by a link between GPUs.
constexpr bool consistent() {
    for (const PhaseInfo& r : kPhaseTable) {
        const ServingGroup g = serving_group(r.phase);
        if ((g == ServingGroup::all_to_all || g == ServingGroup::collectives) != (r.bound == PhaseBound::interconnect))
            return false;
    }
    return true;
}
}  // namespace serving_groups_detail
static_assert(serving_groups_detail::consistent(),
              "serving groups: all_to_all and collectives are exactly the interconnect-bound phases");

}  // namespace moebench
