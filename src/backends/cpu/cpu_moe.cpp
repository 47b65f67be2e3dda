// SPDX-License-Identifier: Apache-2.0
// FFN phases of the CPU backend: ffn_norm, router_gemm, topk (family routing / soft top-N / override, then
// capacity), permute, per-expert GEMMs (timed per expert), activation, shared experts, unpermute_reduce, dense_mlp.
#include "backends/cpu/cpu_backend_impl.hpp"

#include "backends/cpu/cpu_ops.hpp"
#include "core/moe_core.cuh"
#include "model/route_params.hpp"

#include <chrono>
#include <cstring>
#include <vector>

namespace moebench::cpu {

namespace {

// Expert e's rows [offsets[e], offsets[e] + counts[e]) of `in` [rows, k] times its weights w[e] [n, k]^T into
// `out` [rows, n] (+ bias[e] [n]), for the experts with tokens only. All experts go to gemm_xwt_many together, so
// at decode (a few rows per expert) one pass of the pool streams every touched expert's weights exactly once.
// expert_us[e] += the measured time of expert e (see gemm_xwt_many for the shared pass).
void run_expert_gemms(ThreadPool& pool, const std::vector<int64_t>& counts, const std::vector<int64_t>& offsets,
                      int64_t n, int64_t k, const float* in, const float* w, bool w_panels, float* out,
                      const float* bias, std::vector<double>& expert_us) {
    const int64_t E = static_cast<int64_t>(counts.size());
    std::vector<XwtProblem> probs;
    std::vector<int64_t> expert_of;
    probs.reserve(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) {
        const int64_t m = counts[e], off = offsets[e];
        if (m == 0) continue;  // only the tokens routed to each expert; idle experts cost nothing
        XwtProblem p;
        p.m = m;
        p.n = n;
        p.k = k;
        p.x = in + off * k;
        p.w = w + e * n * k;
        p.y = out + off * n;
        p.w_panels = w_panels;
        probs.push_back(p);
        expert_of.push_back(e);
    }
    std::vector<double> us(probs.size(), 0.0);
    gemm_xwt_many(pool, probs.data(), static_cast<int64_t>(probs.size()), 0.0f, us.data());
    if (bias)
        for (size_t i = 0; i < probs.size(); ++i) {
            const int64_t e = expert_of[i];
            const auto t0 = std::chrono::steady_clock::now();
            add_bias_rows(pool, out + offsets[e] * n, bias + e * n, counts[e], n);
            us[i] += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        }
    for (size_t i = 0; i < probs.size(); ++i) expert_us[static_cast<size_t>(expert_of[i])] += us[i];
}

}  // namespace

void CpuBackend::phase_ffn_norm(int64_t slot) {
    LayerWeights& w = lw(slot);
    norm(x_.data(), w.ffn_norm_w, w.ffn_norm_b, ffn_in(slot), T_);
}

void CpuBackend::phase_router(int64_t slot) {
    LayerWeights& w = lw(slot);
    if (!w.is_moe) return;
    gemm_w(*pool_, T_, d_.E, d_.H, ffn_in(slot), w.router_w.data(), w.router_w.panels, logits_.data());
    if (!w.router_b.empty()) add_bias_rows(*pool_, logits_.data(), w.router_b.data(), T_, d_.E);  // gpt-oss
}

void CpuBackend::phase_topk(int64_t slot) {
    LayerWeights& w = lw(slot);
    if (!w.is_moe) return;
    MoeSlotState& st = moe_[static_cast<size_t>(slot)];
    const int E = static_cast<int>(d_.E);
    const core::RouteParams rp = route_params(m_);
    const int64_t soft = opt_.soft_topn;
    int64_t k = soft > 0 ? soft : d_.K;
    const float* logits = logits_.data();
    const float* corr = w.correction_b.empty() ? nullptr : w.correction_b.data();
    int32_t* ids = ids_.data();
    float* wts = wts_.data();
    // 1. The family's routing (or soft top-N) on every token row; runs even when an override follows.
    pool_->parallel_for(
        T_,
        [&](int64_t b, int64_t e) {
            std::vector<float> scratch(static_cast<size_t>(core::route_scratch_floats(E, rp.num_groups)));
            std::vector<int> row_ids(static_cast<size_t>(k));
            for (int64_t t = b; t < e; ++t) {
                if (soft > 0)
                    core::soft_topn_row(logits + t * E, E, static_cast<int>(k), scratch.data(), row_ids.data(),
                                        wts + t * k);
                else
                    core::route_row(rp, logits + t * E, corr, scratch.data(), row_ids.data(), wts + t * k);
                for (int64_t j = 0; j < k; ++j) ids[t * k + j] = row_ids[static_cast<size_t>(j)];
            }
        },
        8);
    // 2. A workload's routing replaces the selection.
    if (has_override_ && slot < static_cast<int64_t>(override_.per_layer.size()) &&
        override_.per_layer[static_cast<size_t>(slot)].k > 0) {
        const LayerRouting& r = override_.per_layer[static_cast<size_t>(slot)];
        k = r.k;
        std::memcpy(ids, r.ids.data(), sizeof(int32_t) * T_ * k);
        if (static_cast<int64_t>(r.weights.size()) == T_ * k)
            std::memcpy(wts, r.weights.data(), sizeof(float) * T_ * k);
        else
            for (int64_t a = 0; a < T_ * k; ++a) wts[a] = 1.0f / static_cast<float>(k);  // no weights given: uniform
    }
    // 3. Capacity: drops in arrival order (token, then slot), counted.
    const int64_t cap = core::expert_capacity(opt_.capacity_factor, T_, static_cast<int>(k), E);
    const int64_t dropped = core::apply_capacity(ids, wts, T_, static_cast<int>(k), E, cap, counts_.data());
    st.k = k;
    MoeLayerResult& res = st.result;
    res.routing.num_tokens = T_;
    res.routing.k = k;
    res.routing.ids.assign(ids, ids + T_ * k);
    res.routing.weights.assign(wts, wts + T_ * k);
    res.tokens_per_expert.assign(counts_.begin(), counts_.end());
    res.dropped = dropped;
    res.router_logits.assign(logits, logits + T_ * E);
    res.expert_gemm_us.assign(static_cast<size_t>(E), 0.0);
}

void CpuBackend::phase_permute(int64_t slot) {
    LayerWeights& w = lw(slot);
    if (!w.is_moe) return;
    const MoeSlotState& st = moe_[static_cast<size_t>(slot)];
    const int64_t k = st.k, H = d_.H;
    const int E = static_cast<int>(d_.E);
    // counts_ already holds the kept tokens per expert (apply_capacity); offsets and the stable map follow.
    core::exclusive_offsets(counts_.data(), E, offsets_.data());
    core::permutation_map(ids_.data(), T_, static_cast<int>(k), E, offsets_.data(), cursor_.data(), slot_of_.data(),
                          token_of_row_.data());
    const bool scale_in = core::route_scales_input(static_cast<int>(m_.moe.routing));
    const float* src = ffn_in(slot);
    float* dst = xperm_.data();
    const int64_t* slot_of = slot_of_.data();
    const float* wts = wts_.data();
    pool_->parallel_for(
        T_ * k,
        [&](int64_t b, int64_t e) {
            for (int64_t a = b; a < e; ++a) {
                const int64_t row = slot_of[a];
                if (row < 0) continue;
                const float* xr = src + (a / k) * H;
                float* dr = dst + row * H;
                if (scale_in) {  // Llama-4: routed_in = x * router score
                    const float s = wts[a];
                    for (int64_t i = 0; i < H; ++i) dr[i] = xr[i] * s;
                } else {
                    std::memcpy(dr, xr, sizeof(float) * H);
                }
            }
        },
        16);
}

void CpuBackend::phase_expert_up(int64_t slot) {
    LayerWeights& w = lw(slot);
    if (!w.is_moe) return;
    MoeSlotState& st = moe_[static_cast<size_t>(slot)];
    const int64_t H = d_.H, I2 = 2 * d_.I;
    // Expert parallelism: the held experts on the rows that arrived (their times per held expert, mapped later).
    run_expert_gemms(*pool_, expert_counts(), expert_offsets(), I2, H, xperm_.data(), w.w_gu.data(), w.w_gu.panels,
                     gu_.data(), w.b_gu.empty() ? nullptr : w.b_gu.data(),
                     ep_on() ? ep_.expert_us : st.result.expert_gemm_us);
}

void CpuBackend::phase_activation(int64_t slot) {
    LayerWeights& w = lw(slot);
    if (!w.is_moe) return;
    const int64_t rows = expert_offsets().back(), I = d_.I;
    const int kind = static_cast<int>(m_.activation);
    const float limit = activation_limit(m_);
    activate_rows(*pool_, kind, gu_.data(), act_.data(), rows, I, limit);
}

void CpuBackend::phase_expert_down(int64_t slot) {
    LayerWeights& w = lw(slot);
    if (!w.is_moe) return;
    MoeSlotState& st = moe_[static_cast<size_t>(slot)];
    const int64_t H = d_.H, I = d_.I;
    run_expert_gemms(*pool_, expert_counts(), expert_offsets(), H, I, act_.data(), w.w_down.data(), w.w_down.panels,
                     yperm_.data(), w.b_down.empty() ? nullptr : w.b_down.data(),
                     ep_on() ? ep_.expert_us : st.result.expert_gemm_us);
}

void CpuBackend::phase_shared(int64_t slot) {
    LayerWeights& w = lw(slot);
    if (!w.is_moe || d_.shared_I == 0) return;
    const int64_t H = d_.H, SI = d_.shared_I;
    const float* xin = ffn_in(slot);
    // The S shared experts as one MLP of width S * Is: the same sum, one GEMM each way.
    gemm_w(*pool_, T_, 2 * SI, H, xin, w.shared_gu.data(), w.shared_gu.panels, sgu_.data());
    const int kind = static_cast<int>(m_.activation);
    const float limit = activation_limit(m_);
    activate_rows(*pool_, kind, sgu_.data(), sact_.data(), T_, SI, limit);
    gemm_w(*pool_, T_, H, SI, sact_.data(), w.shared_down.data(), w.shared_down.panels, sout_.data());
    if (!w.shared_gate_w.empty()) {  // Qwen2-MoE: sigmoid(x . w_gate) scales the shared output
        const float* gw = w.shared_gate_w.data();
        float* so = sout_.data();
        pool_->parallel_for(
            T_,
            [&](int64_t b, int64_t e) {
                for (int64_t t = b; t < e; ++t) {
                    double z = 0.0;
                    for (int64_t i = 0; i < H; ++i) z += static_cast<double>(xin[t * H + i]) * gw[i];
                    const float g = core::sigmoidf_(static_cast<float>(z));
                    for (int64_t i = 0; i < H; ++i) so[t * H + i] *= g;
                }
            },
            4);
    }
}

void CpuBackend::phase_unpermute(int64_t slot) {
    if (!lw(slot).is_moe) return;
    sum_slots(slot, slot_of_.data(), yperm_.data());
}

void CpuBackend::sum_slots(int64_t slot, const int64_t* row_of_slot, const float* rows) {
    MoeSlotState& st = moe_[static_cast<size_t>(slot)];
    const int64_t k = st.k, H = d_.H;
    const bool scale_in = core::route_scales_input(static_cast<int>(m_.moe.routing));
    const bool shared = d_.shared_I > 0;
    const float *wts = wts_.data(), *so = shared ? sout_.data() : nullptr;
    float* out = st.moe_out.data();
    pool_->parallel_for(
        T_,
        [&](int64_t b, int64_t e) {
            for (int64_t t = b; t < e; ++t) {
                float* o = out + t * H;
                if (so)
                    std::memcpy(o, so + t * H, sizeof(float) * H);
                else
                    std::memset(o, 0, sizeof(float) * H);
                for (int64_t j = 0; j < k; ++j) {  // slot order, so the sum order is fixed
                    const int64_t row = row_of_slot[t * k + j];
                    if (row < 0) continue;  // dropped by capacity
                    const float s = scale_in ? 1.0f : wts[t * k + j];
                    const float* yr = rows + row * H;
                    for (int64_t i = 0; i < H; ++i) o[i] += s * yr[i];
                }
            }
        },
        4);
    add_block_output(slot);
}

void CpuBackend::add_block_output(int64_t slot) {
    LayerWeights& w = lw(slot);
    const float* out = moe_[static_cast<size_t>(slot)].moe_out.data();
    const int64_t H = d_.H;
    // Residual add (Grok-1 normalises the block output first).
    const float* add = out;
    if (!w.post_ffn_norm_w.empty()) {
        norm(out, w.post_ffn_norm_w, FBuf{}, tmp_h_.data(), T_);
        add = tmp_h_.data();
    }
    float* x = x_.data();
    pool_->parallel_for(
        T_ * H,
        [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) x[i] += add[i];
        },
        1 << 14);
}

void CpuBackend::phase_dense(int64_t slot) {
    LayerWeights& w = lw(slot);
    if (w.is_moe || d_.dense_I == 0) return;
    const int64_t H = d_.H, Id = d_.dense_I;
    gemm_w(*pool_, T_, 2 * Id, H, ffn_in(slot), w.dense_gu.data(), w.dense_gu.panels, dgu_.data());
    const int kind = static_cast<int>(m_.activation);
    const float limit = activation_limit(m_);
    activate_rows(*pool_, kind, dgu_.data(), dact_.data(), T_, Id, limit);
    if (w.post_ffn_norm_w.empty()) {
        gemm_w(*pool_, T_, H, Id, dact_.data(), w.dense_down.data(), w.dense_down.panels, x_.data(),
               1.0f);  // residual add inside the GEMM
        return;
    }
    gemm_w(*pool_, T_, H, Id, dact_.data(), w.dense_down.data(), w.dense_down.panels, tmp_h_.data());
    norm(tmp_h_.data(), w.post_ffn_norm_w, FBuf{}, tmp_h_.data(), T_);
    float *x = x_.data(), *o = tmp_h_.data();
    pool_->parallel_for(
        T_ * H,
        [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) x[i] += o[i];
        },
        1 << 14);
}

}  // namespace moebench::cpu
