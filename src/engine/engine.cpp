// SPDX-License-Identifier: Apache-2.0
// Phase lists per layer and the step loop.
#include "engine/engine.hpp"

#include "comm/rank_deadline.hpp"
#include "common/error.hpp"

#include <algorithm>
#include <chrono>

namespace moebench {

std::vector<Phase> phases_for_layer(const ModelConfig& m, int64_t layer, const Layout& layout) {
    // Hybrid models: linear_attention (a recurrent state, no KV cache) in place of attention on the layers that use it.
    const Phase attn = m.is_linear_attention_layer(layer) ? Phase::linear_attention : Phase::attention;
    const bool attn_tp = layout.attn_tp > 1;  // the attention output (and a dense MLP's) summed over the TP group
    std::vector<Phase> p = {Phase::attn_norm, Phase::qkv_proj, attn, Phase::o_proj};
    if (attn_tp) p.push_back(Phase::attn_allreduce);
    p.push_back(Phase::ffn_norm);
    if (!m.is_moe_layer(layer)) {
        p.push_back(Phase::dense_mlp);
        if (attn_tp) p.push_back(Phase::dense_allreduce);
        return p;
    }
    const MoeExchange x = layout.moe_exchange();
    const bool a2a = x == MoeExchange::all_to_all, gather = x == MoeExchange::gather;
    p.insert(p.end(), {Phase::router_gemm, Phase::topk});
    if (gather && layout.attn_dp > 1) p.push_back(Phase::moe_allgather);
    p.push_back(Phase::permute);
    if (a2a) p.push_back(Phase::dispatch_a2a);
    if (layout.offloads(m.moe.num_experts)) p.push_back(Phase::expert_fetch);  // the missed experts from host memory
    p.insert(p.end(), {Phase::expert_up, Phase::activation, Phase::expert_down});
    if (m.moe.num_shared_experts > 0) p.push_back(Phase::shared_expert);
    if (a2a) p.push_back(Phase::combine_a2a);
    p.push_back(Phase::unpermute_reduce);
    if (gather) p.push_back(Phase::moe_allreduce);
    return p;
}

std::vector<Phase> phases_for_layer(const ModelConfig& m, int64_t layer, int64_t ep_size) {
    return phases_for_layer(m, layer, ep_layout(ep_size));
}

std::vector<PhaseEntry> step_plan(const ModelConfig& m, const std::vector<int64_t>& layers, const Layout& layout,
                                  bool include_head) {
    std::vector<PhaseEntry> plan;
    // The once-per-step phases (the phase table's scope) around the layers, in table order.
    auto once_per_step = [&](PhaseScope scope) {
        if (!include_head) return;
        for (const PhaseInfo& row : kPhaseTable)
            if (row.scope == scope) plan.push_back({row.phase, -1, -1});
    };
    once_per_step(PhaseScope::before_layers);
    for (size_t slot = 0; slot < layers.size(); ++slot)
        for (Phase ph : phases_for_layer(m, layers[slot], layout))
            plan.push_back({ph, layers[slot], static_cast<int64_t>(slot)});
    once_per_step(PhaseScope::after_layers);
    return plan;
}

std::vector<PhaseEntry> step_plan(const ModelConfig& m, const std::vector<int64_t>& layers, int64_t ep_size,
                                  bool include_head) {
    return step_plan(m, layers, ep_layout(ep_size), include_head);
}

std::vector<PhaseEntry> moe_block_plan(const ModelConfig& m, int64_t layer, int64_t slot, int64_t ep_size) {
    MOEBENCH_CHECK(m.is_moe_layer(layer), "moe_block_plan: layer {} is dense", layer);
    const std::vector<Phase> phases = phases_for_layer(m, layer, ep_size);
    std::vector<PhaseEntry> plan;
    for (auto it = std::find(phases.begin(), phases.end(), Phase::router_gemm); it != phases.end(); ++it)
        plan.push_back({*it, layer, slot});
    return plan;
}

StepTimes run_step(Backend& backend, const std::vector<PhaseEntry>& plan) {
    using clock = std::chrono::steady_clock;
    StepTimes t;
    auto start = clock::now();
    backend.begin_step();
    backend.mark();
    for (const PhaseEntry& e : plan) {
        const ScopedCommContext in_phase(phase_name(e.phase), e.layer);  // names the phase if a collective times out
        backend.run_phase(e.phase, e.slot);
        backend.mark();
    }
    t.phase_us = backend.end_step();
    t.wall_us = std::chrono::duration<double, std::micro>(clock::now() - start).count();
    t.start_us = std::chrono::duration<double, std::micro>(start.time_since_epoch()).count();
    MOEBENCH_CHECK(t.phase_us.size() == plan.size(), "backend {} returned {} intervals for {} phases", backend.name(),
                   t.phase_us.size(), plan.size());
    return t;
}

}  // namespace moebench
