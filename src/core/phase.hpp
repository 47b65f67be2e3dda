// SPDX-License-Identifier: Apache-2.0
// The phase vocabulary (the project's design notes name it; this file is its one definition): names used verbatim by every backend, report, trace view, NVTX range and test.
#pragma once
#include <array>
#include <optional>
#include <string_view>

namespace moebench {

enum class Phase : int {
    embed,
    attn_norm,
    qkv_proj,
    attention,
    linear_attention,
    o_proj,
    ffn_norm,
    router_gemm,
    topk,
    permute,
    dispatch_a2a,
    expert_up,
    activation,
    expert_down,
    shared_expert,
    combine_a2a,
    unpermute_reduce,
    dense_mlp,
    final_norm,
    lm_head,
    count_
};

inline constexpr int kNumPhases = static_cast<int>(Phase::count_);

inline constexpr std::array<std::string_view, kNumPhases> kPhaseNames = {
    "embed",       "attn_norm",  "qkv_proj",    "attention",     "linear_attention", "o_proj",
    "ffn_norm",    "router_gemm", "topk",       "permute",       "dispatch_a2a",
    "expert_up",   "activation", "expert_down", "shared_expert", "combine_a2a",
    "unpermute_reduce", "dense_mlp", "final_norm", "lm_head"};

constexpr std::string_view phase_name(Phase p) { return kPhaseNames[static_cast<int>(p)]; }

inline std::optional<Phase> phase_from_name(std::string_view name) {
    for (int i = 0; i < kNumPhases; ++i)
        if (kPhaseNames[i] == name) return static_cast<Phase>(i);
    return std::nullopt;
}

/// The phase groups, for summaries ("dispatch is 35% of latency").
enum class PhaseGroup { embed, attention, router, dispatch, experts, combine, dense, head };
std::string_view phase_group_name(PhaseGroup g);
PhaseGroup phase_group(Phase p);

/// The phases of the routed experts (expert_up, activation, expert_down): under expert parallelism they run on the
/// ranks that hold the experts, on the rows routed there; every other phase runs on each rank that holds tokens,
/// with its own copy of the weights (shared experts included).
constexpr bool is_routed_expert_phase(Phase p) {
    return p == Phase::expert_up || p == Phase::activation || p == Phase::expert_down;
}

}  // namespace moebench
