// SPDX-License-Identifier: Apache-2.0
// The forward step as a fixed list of (phase, layer) entries, and the loop that runs one step through a backend.
// The engine owns the order of phases; the backend only executes them (DESIGN.md, "The forward step").
#pragma once
#include "config/model_config.hpp"
#include "core/phase.hpp"
#include "engine/backend.hpp"

#include <cstdint>
#include <vector>

namespace moebench {

/// The phases of one decoder layer under `layout`, in execution order:
/// attn_norm, qkv_proj, attention, o_proj, [attn_allreduce], then for a MoE layer ffn_norm, router_gemm, topk,
/// [moe_allgather], permute, [dispatch_a2a], [expert_fetch], expert_up, activation, expert_down, [shared_expert],
/// [combine_a2a], unpermute_reduce, [moe_allreduce]; for a dense layer ffn_norm, dense_mlp, [dense_allreduce].
/// attn_allreduce and dense_allreduce appear with attention tensor parallelism (attn_tp > 1); the *_a2a phases with
/// the all-to-all exchange, moe_allreduce with the gather exchange and moe_allgather with it when attention has more
/// than one data-parallel replica (Layout::moe_exchange); shared_expert only when the model has shared experts;
/// expert_fetch when the layout offloads experts (Layout::offloads).
std::vector<Phase> phases_for_layer(const ModelConfig& m, int64_t layer, const Layout& layout);
/// `ep_size` ranks of data-parallel attention and expert-parallel experts (--ep N): ep_layout(ep_size).
std::vector<Phase> phases_for_layer(const ModelConfig& m, int64_t layer, int64_t ep_size);

/// The whole step: [embed], every layer of `layers` (ascending model indices), [final_norm, lm_head].
/// The once-per-step phases are included when `include_head` is true.
std::vector<PhaseEntry> step_plan(const ModelConfig& m, const std::vector<int64_t>& layers, const Layout& layout,
                                  bool include_head);
std::vector<PhaseEntry> step_plan(const ModelConfig& m, const std::vector<int64_t>& layers, int64_t ep_size,
                                  bool include_head);

/// The MoE block of model layer `layer` alone (`slot` in the prepared layers): its phases from router_gemm to
/// unpermute_reduce, as phases_for_layer lists them (ffn_norm, its input, is left out). `bench moe` times this plan.
std::vector<PhaseEntry> moe_block_plan(const ModelConfig& m, int64_t layer, int64_t slot, int64_t ep_size);

/// Runs one step: begin_step, mark, then run_phase + mark per entry, end_step; pairs the intervals with the plan.
/// A backend returning the wrong number of intervals is an internal error.
StepTimes run_step(Backend& backend, const std::vector<PhaseEntry>& plan);

}  // namespace moebench
