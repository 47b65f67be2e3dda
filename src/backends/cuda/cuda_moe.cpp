// SPDX-License-Identifier: Apache-2.0
// CudaBackend's FFN phases: router, top-k, permute, expert GEMMs (own decode kernel, cuBLAS loop or grouped),
// activation, shared, combine, dense.
#include "backends/cuda/cuda_backend_impl.hpp"

#include <algorithm>

namespace moebench::cuda_detail {

void CudaBackend::phase_router_gemm(Layer& L) {
    gemm_xwt(hb(), T_, m_.moe.num_experts, H_, L.moe_in.get(), H_, L.router.get(), H_, L.logits.get(), CUDA_R_32F,
             m_.moe.num_experts);
    // gpt-oss: the router bias belongs to the logits (the CPU backend's router_logits include it too).
    if (m_.moe.router_bias)
        kernels::launch_add_bias_f32(L.logits.get(), L.router_bias.get(), T_, m_.moe.num_experts, s());
}

bool CudaBackend::stage_override(Layer& L, int64_t slot_idx) {
    if (!override_ || slot_idx >= static_cast<int64_t>(override_->per_layer.size())) return false;
    const LayerRouting& r = override_->per_layer[static_cast<size_t>(slot_idx)];
    if (r.k <= 0) return false;
    if (r.num_tokens != T_ || r.k != k_ || static_cast<int64_t>(r.ids.size()) != T_ * k_)
        config_error("routing", fmt::format("routing for layer slot {} has the wrong shape", slot_idx),
                     fmt::format("{} tokens x k {} ({} ids)", r.num_tokens, r.k, r.ids.size()),
                     fmt::format("the step has {} tokens and k = {}", T_, k_));
    const int64_t E = m_.moe.num_experts;
    for (int32_t id : r.ids)
        if (id < -1 || id >= E)
            config_error("routing", "expert id outside the model", std::to_string(id),
                         fmt::format("ids must be in [0, {}) (or -1)", E));
    // The previous step's copies finished: end_step synchronises the stream before the staging is rewritten.
    std::copy(r.ids.begin(), r.ids.end(), L.ovr_ids.get());
    if (static_cast<int64_t>(r.weights.size()) == T_ * k_)
        std::copy(r.weights.begin(), r.weights.end(), L.ovr_weights.get());
    else
        std::fill(L.ovr_weights.get(), L.ovr_weights.get() + T_ * k_, 1.0f / static_cast<float>(k_));  // as the CPU
    return true;
}

void CudaBackend::phase_topk(Layer& L, int64_t slot_idx) {
    const auto& moe = m_.moe;
    const kernels::RoutingParams p{.route = route_params(m_), .soft_topn = static_cast<int>(opt_.soft_topn)};
    // The router bias is already in the logits (phase_router_gemm).
    topk_variant_ =
        kernels::launch_topk(L.logits.get(), nullptr, moe.router_correction_bias ? L.correction.get() : nullptr, p, T_,
                             L.ids.get(), L.weights.get(), topk_scratch_.get(), s());
    // An imposed routing replaces the selection after the router ran (the router's cost stays in the step).
    const bool staged = stage_override(L, slot_idx);
    if (capturing()) L.graph_override = staged;
    if (staged) {
        MOEBENCH_CUDA_CHECK(
            cudaMemcpyAsync(L.ids.get(), L.ovr_ids.get(), T_ * k_ * sizeof(int32_t), cudaMemcpyHostToDevice, s()));
        MOEBENCH_CUDA_CHECK(cudaMemcpyAsync(L.weights.get(), L.ovr_weights.get(), T_ * k_ * sizeof(float),
                                            cudaMemcpyHostToDevice, s()));
    }
}

void CudaBackend::phase_permute(Layer& L) {
    const auto& moe = m_.moe;
    const int64_t E = moe.num_experts;
    const int64_t cap = core::expert_capacity(opt_.capacity_factor, T_, static_cast<int>(k_), static_cast<int>(E));
    kernels::PermuteMaps maps;
    maps.counts = L.counts.get();
    maps.offsets = L.offsets.get();
    maps.perm_slot = L.perm_slot.get();
    maps.perm_expert = L.perm_expert.get();
    maps.slot_pos = L.slot_pos.get();
    maps.dropped = L.dropped.get();
    maps.active = L.active.get();
    maps.tile_offsets = L.tile_offsets.get();
    kernels::launch_permute_index(L.ids.get(), L.weights.get(), T_, k_, E, cap, maps, perm_ws_.get(), s());
    if (!device_sized()) {
        // cuBLAS takes GEMM sizes on the host: bring the counts back (the structural sync of the cuBLAS variants).
        MOEBENCH_CUDA_CHECK(
            cudaMemcpyAsync(L.counts_host.get(), L.counts.get(), E * sizeof(int32_t), cudaMemcpyDeviceToHost, s()));
        MOEBENCH_CUDA_CHECK(cudaMemcpyAsync(L.offsets_host.get(), L.offsets.get(), (E + 1) * sizeof(int32_t),
                                            cudaMemcpyDeviceToHost, s()));
        if (capturing()) {
            // No sync inside a capture: the sizes of the eager step are baked in (end_step checks they still hold).
            const int32_t* counts = L.graph_counts.data();
            int32_t off = 0;
            for (int64_t e = 0; e < E; ++e) {
                L.offsets_host[e] = off;
                off += counts[e];
            }
            L.offsets_host[E] = off;
            L.num_rows = off;
        } else {
            MOEBENCH_CUDA_CHECK(cudaStreamSynchronize(s()));
            L.num_rows = L.offsets_host[E];
        }
    }
    // The row count is read on the device (offsets[E]); T * k bounds the launch. Llama-4 scales the expert input by
    // the router weight (the CPU backend does so with soft top-N too).
    kernels::launch_gather_rows(L.moe_in.get(), L.perm_slot.get(), L.weights.get(),
                                core::route_scales_input(static_cast<int>(moe.routing)), x_perm_.get(),
                                L.offsets.get() + E, T_ * k_, k_, H_, s());
}

bool CudaBackend::use_grouped(const Layer& L) const {
    if (opt_.expert_times) return false;  // per-expert times need one GEMM per expert
    if (opt_.expert_gemm == "grouped") return true;
    if (opt_.expert_gemm == "loop") return false;
    // auto: by output tiles per GEMM against the SM count. When an expert's GEMM alone cannot fill the GPU (fewer
    // 128x128 tiles than SMs: DeepSeek-V3 prefill, 256 experts of ~128 rows), one grouped call runs them side by
    // side; when each fills it (Mixtral prefill, 8 experts of ~1000 rows), the per-expert loop is as good and uses
    // cuBLAS's best kernel for each shape (shared notes 1.4).
    const int64_t n = 2 * m_.moe.expert_intermediate_size;
    int64_t active = 0, tiles = 0;
    for (int64_t e = 0; e < m_.moe.num_experts; ++e) {
        const int64_t rows = L.counts_host[e];
        if (rows <= 0) continue;
        ++active;
        tiles += ceil_div(rows, 128) * ceil_div(n, 128);
    }
    return active > 0 && tiles < static_cast<int64_t>(num_sms_) * active;
}

// One pass of expert GEMMs (up or down) over the permuted rows: one grouped call, or the per-expert loop recording
// which experts its events time (with --expert-times). Returns whether the grouped call was used.
bool CudaBackend::run_expert_gemms(Layer& L, ExpertGemmArgs g, PinnedBuffer<const void*>& ptr_host,
                                   DeviceBuffer<const void*>& ptr_dev, std::vector<CudaEvent>& events,
                                   std::vector<int>& experts) {
    g.counts_host = capturing() ? L.graph_counts.data() : L.counts_host.get();
    g.offsets_host = L.offsets_host.get();
    g.num_experts = m_.moe.num_experts;
    const bool grouped = use_grouped(L);
    if (grouped) {
        experts.clear();
        expert_gemm_grouped(hb(), s(), g, ptr_host.get(), ptr_dev.get());
    } else {
        expert_gemm_loop(hb(), s(), g, events.empty() ? nullptr : &events, &experts, capturing());
    }
    return grouped;
}

kernels::ExpertKernelArgs CudaBackend::expert_args(const Layer& L, bool up) const {
    kernels::ExpertKernelArgs a;
    const int64_t I = m_.moe.expert_intermediate_size;
    a.offsets = L.offsets.get();
    a.active = L.active.get();
    a.tile_offsets = L.tile_offsets.get();
    a.num_experts = m_.moe.num_experts;
    a.grid_blocks = own_grid_;
    if (up) {
        a.x = x_perm_.get();
        a.w = L.w_gu.get();
        a.y = a_perm_.get();
        a.n_cols = I;
        a.k = H_;
        a.fused_up = true;
        a.act = static_cast<int>(m_.activation);
        a.limit = act_limit();
        a.bias = m_.moe.expert_bias ? L.b_gu.get() : nullptr;
    } else {
        // The combine applies the weights (with the shared expert and the down bias): none here.
        a.x = a_perm_.get();
        a.w = L.w_down.get();
        a.y = y_perm_.get();
        a.n_cols = H_;
        a.k = I;
    }
    return a;
}

void CudaBackend::phase_expert_up(Layer& L) {
    if (expert_path_ == ExpertPath::gemv) {
        kernels::launch_expert_gemv(expert_args(L, true), s());
        expert_variant_ =
            "gemv (own decode kernel: device-side expert list and offsets, activation fused into "
            "expert_up, no host sync)";
        return;
    }
    if (expert_path_ == ExpertPath::tiled) {
        kernels::launch_expert_tiled(expert_args(L, true), s());
        expert_variant_ =
            "tiled (own tensor-core kernel over the device-side tile map of 64-row tiles, activation "
            "fused into expert_up, no host sync)";
        return;
    }
    ExpertGemmArgs g;
    g.n = 2 * m_.moe.expert_intermediate_size;
    g.k = H_;
    g.x = x_perm_.get();
    g.w = L.w_gu.get();
    g.y = h_perm_.get();
    const bool grouped = run_expert_gemms(L, g, L.ptr_host_up, L.ptr_dev_up, L.up_events, L.up_experts);
    expert_variant_ = grouped ? "grouped (cublasGemmGroupedBatchedEx, one group per active expert)"
                              : "loop (cublasGemmEx per active expert)";
}

void CudaBackend::phase_activation(Layer& L) {
    if (device_sized()) return;  // fused into expert_up: this phase is empty and its time is ~0
    const auto& moe = m_.moe;
    kernels::launch_activation(h_perm_.get(), a_perm_.get(), L.num_rows, moe.expert_intermediate_size,
                               static_cast<int>(m_.activation), act_limit(), moe.expert_bias ? L.b_gu.get() : nullptr,
                               L.perm_expert.get(), s());
}

void CudaBackend::phase_expert_down(Layer& L) {
    if (expert_path_ == ExpertPath::gemv) {
        kernels::launch_expert_gemv(expert_args(L, false), s());
        return;
    }
    if (expert_path_ == ExpertPath::tiled) {
        kernels::launch_expert_tiled(expert_args(L, false), s());
        return;
    }
    ExpertGemmArgs g;
    g.n = H_;
    g.k = m_.moe.expert_intermediate_size;
    g.x = a_perm_.get();
    g.w = L.w_down.get();
    g.y = y_perm_.get();
    run_expert_gemms(L, g, L.ptr_host_down, L.ptr_dev_down, L.down_events, L.down_experts);
}

void CudaBackend::phase_shared(Layer& L) {
    const auto& moe = m_.moe;
    const int64_t Is = moe.num_shared_experts * moe.shared_intermediate_size;
    if (Is <= 0) return;
    gemm_xwt(hb(), T_, 2 * Is, H_, L.moe_in.get(), H_, L.w_sgu.get(), H_, sh_h_.get(), CUDA_R_16BF, 2 * Is);
    kernels::launch_activation(sh_h_.get(), sh_a_.get(), T_, Is, static_cast<int>(m_.activation), act_limit(), nullptr,
                               nullptr, s());
    gemm_xwt(hb(), T_, H_, Is, sh_a_.get(), Is, L.w_sdown.get(), Is, sh_out_.get(), CUDA_R_16BF, H_);
    if (moe.shared_expert_gate)
        kernels::launch_row_dot(L.moe_in.get(), L.shared_gate_w.get(), shared_gate_logit_.get(), T_, H_, s());
}

void CudaBackend::phase_combine(Layer& L) {
    const auto& moe = m_.moe;
    const bool has_shared = moe.num_shared_experts * moe.shared_intermediate_size > 0;
    const bool unit = core::route_scales_input(static_cast<int>(moe.routing));  // weight already on the input
    const bool post = L.post_ffn_norm.size() > 0;
    kernels::launch_combine(y_perm_.get(), L.slot_pos.get(), L.ids.get(), L.weights.get(), unit,
                            moe.expert_bias ? L.b_down.get() : nullptr, has_shared ? sh_out_.get() : nullptr,
                            (has_shared && moe.shared_expert_gate) ? shared_gate_logit_.get() : nullptr,
                            L.moe_out.get(), post ? nullptr : hidden_.get(), T_, k_, H_, s());
    if (post) post_norm_add(L.post_ffn_norm, L.moe_out.get());  // Grok-1: hidden += post_norm(moe_out)
}

void CudaBackend::phase_dense(Layer& L) {
    const int64_t Id = m_.dense_intermediate_size;
    if (Id <= 0) return;
    gemm_xwt(hb(), T_, 2 * Id, H_, normed_.get(), H_, L.w_dgu.get(), H_, d_h_.get(), CUDA_R_16BF, 2 * Id);
    kernels::launch_activation(d_h_.get(), d_a_.get(), T_, Id, static_cast<int>(m_.activation), act_limit(), nullptr,
                               nullptr, s());
    if (L.post_ffn_norm.size() == 0) {
        gemm_xwt(hb(), T_, H_, Id, d_a_.get(), Id, L.w_ddown.get(), Id, hidden_.get(), CUDA_R_16BF, H_, 1.0f);
        return;
    }
    gemm_xwt(hb(), T_, H_, Id, d_a_.get(), Id, L.w_ddown.get(), Id, tmp_h_.get(), CUDA_R_16BF, H_);
    norm_rows(tmp_h_.get(), L.post_ffn_norm, DeviceBuffer<bf16>{}, tmp_h_.get(), T_);
    kernels::launch_add_inplace(hidden_.get(), tmp_h_.get(), T_ * H_, s());
}

}  // namespace moebench::cuda_detail
