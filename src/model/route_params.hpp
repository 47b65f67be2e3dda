// SPDX-License-Identifier: Apache-2.0
// The model's routing (and activation clamp) as moe_core's per-row parameters: one translation for the CPU and CUDA
// backends and the host check, so that a new routing field reaches all three.
#pragma once
#include "config/model_config.hpp"
#include "core/moe_core.cuh"

#include <algorithm>

namespace moebench {

inline core::RouteParams route_params(const ModelConfig& m) {
    core::RouteParams p;
    p.kind = static_cast<int>(m.moe.routing);
    p.num_experts = static_cast<int>(m.moe.num_experts);
    p.top_k = static_cast<int>(m.moe.top_k);
    p.norm_topk_prob = m.moe.norm_topk_prob ? 1 : 0;
    p.routed_scaling_factor = static_cast<float>(m.moe.routed_scaling_factor);
    p.num_groups = static_cast<int>(std::max<int64_t>(1, m.moe.num_groups));
    p.topk_groups = static_cast<int>(std::max<int64_t>(1, m.moe.topk_groups));
    p.jitter_eps = static_cast<float>(m.moe.router_jitter_noise);
    return p;
}

/// The clamp that core::activate applies for swiglu_oai: the model's swiglu_limit when set, else gpt-oss's default
/// (only swiglu_oai reads it). One definition for both backends and the host check.
inline float activation_limit(const ModelConfig& m) {
    return m.swiglu_limit > 0 ? static_cast<float>(m.swiglu_limit) : core::kSwigluOaiLimit;
}

}  // namespace moebench
