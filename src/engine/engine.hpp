// SPDX-License-Identifier: Apache-2.0
// The forward step as a fixed list of (phase, layer) entries, and the loop that runs one step through a backend.
// The engine owns the order of phases; the backend only executes them (DESIGN.md, "The forward step").
#pragma once
#include "config/model_config.hpp"
#include "engine/backend.hpp"
#include "engine/phase.hpp"

#include <cstdint>
#include <vector>

namespace moebench {

/// True when model layer `layer` has a MoE FFN (layer_is_moe, or every layer of a MoE model when that list is empty).
bool layer_is_moe(const ModelConfig& m, int64_t layer);

/// The phases of one decoder layer, in execution order:
/// attn_norm, qkv_proj, attention, o_proj, then for a MoE layer ffn_norm, router_gemm, topk, permute, [dispatch_a2a],
/// expert_up, activation, expert_down, [shared_expert], [combine_a2a], unpermute_reduce; for a dense layer ffn_norm,
/// dense_mlp. The *_a2a phases appear only with ep_size > 1; shared_expert only when the model has shared experts.
std::vector<Phase> phases_for_layer(const ModelConfig& m, int64_t layer, int64_t ep_size);

/// One entry of a step: `layer` is the model layer index (-1 for embed, final_norm, lm_head), `slot` indexes the
/// layers handed to Backend::prepare (-1 for the once-per-step phases).
struct PhaseEntry {
    Phase phase;
    int64_t layer;
    int64_t slot;
};

/// The whole step: [embed], every layer of `layers` (ascending model indices), [final_norm, lm_head].
/// The once-per-step phases are included when `include_head` is true.
std::vector<PhaseEntry> step_plan(const ModelConfig& m, const std::vector<int64_t>& layers, int64_t ep_size,
                                  bool include_head);

/// Times of one step: phase_us[i] belongs to plan[i]; wall_us is the host steady_clock time around the whole step
/// (begin_step .. end_step), shown beside the sum of the phases so overhead and overlap are visible.
struct StepTimes {
    std::vector<double> phase_us;
    double wall_us = 0;
};

/// Runs one step: begin_step, mark, then run_phase + mark per entry, end_step; pairs the intervals with the plan.
/// A backend returning the wrong number of intervals is an internal error.
StepTimes run_step(Backend& backend, const std::vector<PhaseEntry>& plan);

}  // namespace moebench
