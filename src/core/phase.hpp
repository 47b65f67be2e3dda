// SPDX-License-Identifier: Apache-2.0
// The phase vocabulary (the project's design notes name it; this file is its one definition): one table, a row per
// phase, that the engine, the roofline, the sim, the views and the traces read. Names are used verbatim by every
// backend, report, trace view, NVTX range and test. A new phase is one row here (and its place in the enum), where it
// runs (engine/engine.cpp), its counted work (model/phase_work.cpp) and the backends that run it.
#pragma once
#include <array>
#include <optional>
#include <string_view>

namespace moebench {

/// In execution order: the order of the table below (checked at compile time), which the engine's plan follows.
enum class Phase : int {
    embed,
    attn_norm,
    qkv_proj,
    attention,
    linear_attention,
    o_proj,
    attn_allreduce,
    ffn_norm,
    router_gemm,
    topk,
    moe_allgather,
    permute,
    dispatch_a2a,
    expert_fetch,
    expert_up,
    activation,
    expert_down,
    shared_expert,
    combine_a2a,
    unpermute_reduce,
    moe_allreduce,
    dense_mlp,
    dense_allreduce,
    final_norm,
    lm_head,
    count_
};

inline constexpr int kNumPhases = static_cast<int>(Phase::count_);

/// The phase groups, for summaries ("dispatch is 35% of latency").
enum class PhaseGroup { embed, attention, router, dispatch, experts, combine, dense, head, count_ };
inline constexpr int kNumPhaseGroups = static_cast<int>(PhaseGroup::count_);

/// The coarser groups a serving summary splits a step into (`moebench deploy`'s phase_groups_us): attention (its
/// norm, projections and the attention itself), the MoE experts (routed and shared), the expert-parallel all-to-alls,
/// the tensor-parallel collectives, and everything else (embedding, router, permutation, dense MLP, head). The two
/// communication groups are exactly the link-bound phases (checked below).
enum class ServingGroup { attention, moe_experts, all_to_all, collectives, other, count_ };
inline constexpr int kNumServingGroups = static_cast<int>(ServingGroup::count_);
inline constexpr std::array<std::string_view, kNumServingGroups> kServingGroupNames = {
    "attention", "moe_experts", "all_to_all", "collectives", "other"};

/// What bounds a phase's time. device: compute or memory of one GPU (the roofline judges which); interconnect: a link
/// between GPUs (scale-up inside a node, the network when the ranks span nodes); host: the link to host memory.
enum class PhaseBound { device, interconnect, host };

/// Where a phase runs under expert parallelism. tokens: on each rank that holds tokens, on its tokens, with its own
/// copy of the weights (shared experts included); the link phases run between those ranks and the expert side.
/// experts: on the ranks that hold the routed experts, on the rows routed there.
enum class PhaseSide { tokens, experts };

/// When a phase runs in a step: once before the first layer, in every layer (the engine's per-layer list says which
/// layers), once after the last layer.
enum class PhaseScope { before_layers, layer, after_layers };

/// How a phase's weight bytes (model/phase_work) add up over the ranks for the whole step. replicated: every rank
/// that holds tokens reads its own copy; once: the count already covers all ranks (the routed experts, split over
/// the ranks; embed, which gathers only its tokens' rows).
enum class PhaseWeights { replicated, once };

/// The operands of a phase's matrix products, whose number format (core/precision.hpp) sets the peak rate they run
/// at: none (element-wise work, copies, transfers: no FLOPs counted), the dense linear layers' weights, the weights
/// kept in high precision (router, LM head), the routed experts' weights, or activations only (attention over the KV
/// cache, the recurrent state of linear attention).
enum class PhaseMatmul { none, dense_weights, high_precision_weights, expert_weights, activations };

/// One row of the phase table.
struct PhaseInfo {
    Phase phase;
    std::string_view name;  // verbatim in reports, views, NVTX ranges
    PhaseGroup group;
    ServingGroup serving;
    PhaseBound bound;
    PhaseSide side;
    PhaseScope scope;
    PhaseWeights weights;
    PhaseMatmul matmul;
    std::string_view color;  // its colour in the HTML views
};

namespace phase_table_detail {
using P = Phase;
using B = PhaseBound;
using G = PhaseGroup;
using M = PhaseMatmul;
using S = PhaseSide;
using W = PhaseWeights;
using SG = ServingGroup;
using When = PhaseScope;
}  // namespace phase_table_detail

// clang-format off
inline constexpr std::array<PhaseInfo, kNumPhases> kPhaseTable = [] {
    using namespace phase_table_detail;
    return std::array<PhaseInfo, kNumPhases>{{
        // phase             name                group         serving          bound            side        scope                weights        matmul                     colour
        {P::embed,            "embed",            G::embed,     SG::other,       B::device,       S::tokens,  When::before_layers, W::once,       M::none,                   "#8c564b"},
        {P::attn_norm,        "attn_norm",        G::attention, SG::attention,   B::device,       S::tokens,  When::layer,         W::replicated, M::none,                   "#c7c7c7"},
        {P::qkv_proj,         "qkv_proj",         G::attention, SG::attention,   B::device,       S::tokens,  When::layer,         W::replicated, M::dense_weights,          "#1f77b4"},
        {P::attention,        "attention",        G::attention, SG::attention,   B::device,       S::tokens,  When::layer,         W::replicated, M::activations,            "#aec7e8"},
        {P::linear_attention, "linear_attention", G::attention, SG::attention,   B::device,       S::tokens,  When::layer,         W::replicated, M::activations,            "#5254a3"},
        {P::o_proj,           "o_proj",           G::attention, SG::attention,   B::device,       S::tokens,  When::layer,         W::replicated, M::dense_weights,          "#6baed6"},
        {P::attn_allreduce,   "attn_allreduce",   G::attention, SG::collectives, B::interconnect, S::tokens,  When::layer,         W::replicated, M::none,                   "#3182bd"},
        {P::ffn_norm,         "ffn_norm",         G::router,    SG::other,       B::device,       S::tokens,  When::layer,         W::replicated, M::none,                   "#bcbd22"},
        {P::router_gemm,      "router_gemm",      G::router,    SG::other,       B::device,       S::tokens,  When::layer,         W::replicated, M::high_precision_weights, "#ff7f0e"},
        {P::topk,             "topk",             G::router,    SG::other,       B::device,       S::tokens,  When::layer,         W::replicated, M::none,                   "#ffbb78"},
        {P::moe_allgather,    "moe_allgather",    G::dispatch,  SG::collectives, B::interconnect, S::tokens,  When::layer,         W::replicated, M::none,                   "#74c476"},
        {P::permute,          "permute",          G::dispatch,  SG::other,       B::device,       S::tokens,  When::layer,         W::replicated, M::none,                   "#2ca02c"},
        {P::dispatch_a2a,     "dispatch_a2a",     G::dispatch,  SG::all_to_all,  B::interconnect, S::tokens,  When::layer,         W::replicated, M::none,                   "#98df8a"},
        {P::expert_fetch,     "expert_fetch",     G::experts,   SG::moe_experts, B::host,         S::experts, When::layer,         W::once,       M::none,                   "#e7969c"},
        {P::expert_up,        "expert_up",        G::experts,   SG::moe_experts, B::device,       S::experts, When::layer,         W::once,       M::expert_weights,         "#d62728"},
        {P::activation,       "activation",       G::experts,   SG::moe_experts, B::device,       S::experts, When::layer,         W::once,       M::none,                   "#ff9896"},
        {P::expert_down,      "expert_down",      G::experts,   SG::moe_experts, B::device,       S::experts, When::layer,         W::once,       M::expert_weights,         "#9467bd"},
        {P::shared_expert,    "shared_expert",    G::experts,   SG::moe_experts, B::device,       S::tokens,  When::layer,         W::replicated, M::dense_weights,          "#c5b0d5"},
        {P::combine_a2a,      "combine_a2a",      G::combine,   SG::all_to_all,  B::interconnect, S::tokens,  When::layer,         W::replicated, M::none,                   "#e377c2"},
        {P::unpermute_reduce, "unpermute_reduce", G::combine,   SG::other,       B::device,       S::tokens,  When::layer,         W::replicated, M::none,                   "#f7b6d2"},
        {P::moe_allreduce,    "moe_allreduce",    G::combine,   SG::collectives, B::interconnect, S::tokens,  When::layer,         W::replicated, M::none,                   "#ce6dbd"},
        {P::dense_mlp,        "dense_mlp",        G::dense,     SG::other,       B::device,       S::tokens,  When::layer,         W::replicated, M::dense_weights,          "#17becf"},
        {P::dense_allreduce,  "dense_allreduce",  G::dense,     SG::collectives, B::interconnect, S::tokens,  When::layer,         W::replicated, M::none,                   "#9edae5"},
        {P::final_norm,       "final_norm",       G::head,      SG::other,       B::device,       S::tokens,  When::after_layers,  W::replicated, M::none,                   "#7f7f7f"},
        {P::lm_head,          "lm_head",          G::head,      SG::other,       B::device,       S::tokens,  When::after_layers,  W::replicated, M::high_precision_weights, "#393b79"},
    }};
}();
// clang-format on

/// One row of the group table: its name in reports, and whether its phases belong to the MoE block that the
/// roofline's `moe_block` sums (router, dispatch, experts, combine).
struct PhaseGroupInfo {
    PhaseGroup group;
    std::string_view name;
    bool moe_block;
};

inline constexpr std::array<PhaseGroupInfo, kNumPhaseGroups> kPhaseGroupTable = {{
    {PhaseGroup::embed, "embed", false},
    {PhaseGroup::attention, "attention", false},
    {PhaseGroup::router, "router", true},
    {PhaseGroup::dispatch, "dispatch", true},
    {PhaseGroup::experts, "experts", true},
    {PhaseGroup::combine, "combine", true},
    {PhaseGroup::dense, "dense", false},
    {PhaseGroup::head, "head", false},
}};

namespace phase_table_detail {
// Rows in enum order (the enum is the execution order), names unique and non-empty, the once-per-step phases at the
// ends, link-bound phases without matrix products (their bytes cross a link, they compute nothing).
constexpr bool rows_consistent() {
    for (int i = 0; i < kNumPhases; ++i) {
        const PhaseInfo& r = kPhaseTable[static_cast<size_t>(i)];
        if (static_cast<int>(r.phase) != i || r.name.empty() || r.color.empty()) return false;
        for (int j = 0; j < i; ++j)
            if (kPhaseTable[static_cast<size_t>(j)].name == r.name) return false;
        if (i > 0) {
            const PhaseScope prev = kPhaseTable[static_cast<size_t>(i - 1)].scope;
            if (static_cast<int>(r.scope) < static_cast<int>(prev)) return false;
        }
        if (r.bound != PhaseBound::device && r.matmul != PhaseMatmul::none) return false;
        const bool link_group = r.serving == ServingGroup::all_to_all || r.serving == ServingGroup::collectives;
        if (link_group != (r.bound == PhaseBound::interconnect)) return false;
    }
    return true;
}
constexpr bool groups_consistent() {
    for (int i = 0; i < kNumPhaseGroups; ++i) {
        const PhaseGroupInfo& g = kPhaseGroupTable[static_cast<size_t>(i)];
        if (static_cast<int>(g.group) != i || g.name.empty()) return false;
    }
    return true;
}
}  // namespace phase_table_detail
static_assert(phase_table_detail::rows_consistent(),
              "phase table: one row per Phase in enum order, unique names, once-per-step phases first or last, "
              "link-bound phases without matrix products, the serving groups all_to_all and collectives exactly the "
              "link-bound phases");
static_assert(phase_table_detail::groups_consistent(), "phase group table: one row per PhaseGroup in enum order");

constexpr const PhaseInfo& phase_info(Phase p) { return kPhaseTable[static_cast<size_t>(p)]; }
constexpr std::string_view phase_name(Phase p) { return phase_info(p).name; }

/// The names in table order (= execution order), for the views that walk the vocabulary.
inline constexpr std::array<std::string_view, kNumPhases> kPhaseNames = [] {
    std::array<std::string_view, kNumPhases> n{};
    for (int i = 0; i < kNumPhases; ++i) n[static_cast<size_t>(i)] = kPhaseTable[static_cast<size_t>(i)].name;
    return n;
}();

constexpr std::optional<Phase> phase_from_name(std::string_view name) {
    for (const PhaseInfo& r : kPhaseTable)
        if (r.name == name) return r.phase;
    return std::nullopt;
}

constexpr const PhaseGroupInfo& phase_group_info(PhaseGroup g) { return kPhaseGroupTable[static_cast<size_t>(g)]; }
constexpr std::string_view phase_group_name(PhaseGroup g) { return phase_group_info(g).name; }
constexpr PhaseGroup phase_group(Phase p) { return phase_info(p).group; }
constexpr ServingGroup serving_group(Phase p) { return phase_info(p).serving; }
constexpr std::string_view serving_group_name(Phase p) {
    return kServingGroupNames[static_cast<size_t>(serving_group(p))];
}
/// The group's name of a phase named in a report; "" for a name outside the vocabulary.
constexpr std::string_view phase_group_name(std::string_view phase) {
    const auto p = phase_from_name(phase);
    return p ? phase_group_name(phase_group(*p)) : std::string_view{};
}

/// Its matrix products multiply weights (dense, high-precision or the routed experts'): the phases that stream
/// weights through a GEMM.
constexpr bool is_weight_matmul(Phase p) {
    const PhaseMatmul m = phase_info(p).matmul;
    return m == PhaseMatmul::dense_weights || m == PhaseMatmul::high_precision_weights ||
           m == PhaseMatmul::expert_weights;
}

/// Bound by a link (between GPUs or to the host), not by the device: priced by traffic, drawn on the communication
/// track.
constexpr bool is_link_bound(Phase p) { return phase_info(p).bound != PhaseBound::device; }

/// The phases of the routed experts (expert_up, activation, expert_down): under expert parallelism they run on the
/// ranks that hold the experts, on the rows routed there.
constexpr bool is_routed_expert_phase(Phase p) { return phase_info(p).side == PhaseSide::experts; }

struct Precision;
enum class DType;
/// The number format a phase's matrix products compute in, under `precision` (its peak rate prices their FLOPs). A
/// phase without matrix products counts no FLOPs: the dense weights' format, which then prices nothing.
DType matmul_dtype(Phase p, const Precision& precision);

}  // namespace moebench
