// SPDX-License-Identifier: Apache-2.0
// Attention phases of the CPU backend: attn_norm, qkv_proj (GQA/MHA/MQA or plain non-absorbed MLA, RoPE),
// attention (causal prefill or decode over the random KV cache), o_proj (+ residual).
#include "backends/cpu/cpu_backend_impl.hpp"

#include "backends/cpu/cpu_ops.hpp"

#include <cmath>
#include <cstring>

namespace moebench::cpu {

void CpuBackend::phase_attn_norm(int64_t slot) {
    LayerWeights& w = lw(slot);
    norm(x_.data(), w.attn_norm_w, w.attn_norm_b, xn_.data(), T_);
}

void CpuBackend::phase_qkv(int64_t slot) {
    LayerWeights& w = lw(slot);
    const int64_t H = d_.H, nh = d_.nh, nkv = d_.nkv, dq = d_.qk_dim, dv = d_.v_dim;
    const float eps = static_cast<float>(m_.norm_eps);
    if (w.is_linear) {  // linear attention: its input projections only (cpu_linear_attention.cpp runs the rest)
        gemm_w(*pool_, T_, d_.la_in, H, xn_.data(), w.la_in.data(), w.la_in.panels, la_proj_.data());
        return;
    }
    if (!d_.mla) {
        const int64_t W = d_.qkv_width, qn = nh * dq, kn = nkv * dq;
        gemm_w(*pool_, T_, W, H, xn_.data(), w.w_qkv.data(), w.w_qkv.panels, qkv_.data());
        if (!w.b_qkv.empty()) add_bias_rows(*pool_, qkv_.data(), w.b_qkv.data(), T_, W);
        const float* src = qkv_.data();
        float *q = q_.data(), *k = k_.data(), *v = v_.data();
        pool_->parallel_for(
            T_,
            [&](int64_t b, int64_t e) {
                for (int64_t t = b; t < e; ++t) {
                    std::memcpy(q + t * qn, src + t * W, sizeof(float) * qn);
                    std::memcpy(k + t * kn, src + t * W + qn, sizeof(float) * kn);
                    std::memcpy(v + t * kn, src + t * W + qn + kn, sizeof(float) * kn);
                }
            },
            16);
        if (!w.q_norm.empty()) {  // Qwen3: RMSNorm over each head's dims, before RoPE
            rmsnorm_rows(*pool_, q, w.q_norm.data(), q, T_ * nh, dq, eps);
            rmsnorm_rows(*pool_, k, w.k_norm.data(), k, T_ * nkv, dq, eps);
        }
        rope_rows(*pool_, q, T_, qn, nh, dq, 0, d_.rot_dim, rope_cs_.data(), positions_.data());
        rope_rows(*pool_, k, T_, kn, nkv, dq, 0, d_.rot_dim, rope_cs_.data(), positions_.data());
        return;
    }
    // MLA, plain (non-absorbed) form as in the HF reference:
    //   q = q_b(rmsnorm(q_a(x))) or q_proj(x);  [c_kv | k_pe] = kv_a_proj_with_mqa(x);
    //   [k_nope | v] per head = kv_b(rmsnorm(c_kv));  k = [k_nope | rope(k_pe) shared by all heads].
    const int64_t qn = nh * dq, R = d_.rot_dim, C = d_.kv_lora, nope = d_.nope, KA = C + R;
    if (d_.q_lora > 0) {
        gemm_w(*pool_, T_, d_.q_lora, H, xn_.data(), w.w_q_a.data(), w.w_q_a.panels, q_a_.data());
        rmsnorm_rows(*pool_, q_a_.data(), w.q_a_norm.data(), q_a_.data(), T_, d_.q_lora, eps);
        gemm_w(*pool_, T_, qn, d_.q_lora, q_a_.data(), w.w_q_b.data(), w.w_q_b.panels, q_.data());
    } else {
        gemm_w(*pool_, T_, qn, H, xn_.data(), w.w_q.data(), w.w_q.panels, q_.data());
    }
    gemm_w(*pool_, T_, KA, H, xn_.data(), w.w_kv_a.data(), w.w_kv_a.panels, kv_a_.data());
    rmsnorm_rows(*pool_, kv_a_.data(), w.kv_a_norm.data(), kv_lat_.data(), T_, C, eps, KA, C);
    const int64_t BW = nope + dv;
    gemm_w(*pool_, T_, nh * BW, C, kv_lat_.data(), w.w_kv_b.data(), w.w_kv_b.panels, kvb_.data());
    rope_rows(*pool_, q_.data(), T_, qn, nh, dq, nope, R, rope_cs_.data(), positions_.data());
    rope_rows(*pool_, kv_a_.data(), T_, KA, 1, KA, C, R, rope_cs_.data(), positions_.data());
    const float *kvb = kvb_.data(), *kva = kv_a_.data();
    float *k = k_.data(), *v = v_.data();
    pool_->parallel_for(
        T_,
        [&](int64_t b, int64_t e) {
            for (int64_t t = b; t < e; ++t)
                for (int64_t h = 0; h < nh; ++h) {
                    std::memcpy(k + (t * nh + h) * dq, kvb + t * nh * BW + h * BW, sizeof(float) * nope);
                    std::memcpy(k + (t * nh + h) * dq + nope, kva + t * KA + C, sizeof(float) * R);
                    std::memcpy(v + (t * nh + h) * dv, kvb + t * nh * BW + h * BW + nope, sizeof(float) * dv);
                }
        },
        4);
}

void CpuBackend::phase_attention(int64_t slot) {
    LayerWeights& w = lw(slot);
    AttnParams p;
    p.num_heads = d_.nh;
    p.num_kv_heads = d_.nkv;
    p.qk_dim = d_.qk_dim;
    p.v_dim = d_.v_dim;
    p.scale = 1.0f / std::sqrt(static_cast<float>(d_.qk_dim));
    p.sinks = w.sinks.empty() ? nullptr : w.sinks.data();
    const bool local = !m_.layer_sliding.empty() && m_.layer_sliding[static_cast<size_t>(w.layer)] != 0;
    if (local) {
        p.window = m_.attn.sliding_window;
        if (p.window == 0) p.chunk = m_.attn.attention_chunk;
    }
    if (shape_.mode == Mode::prefill)
        attention_prefill(*pool_, p, shape_.batch, shape_.seq_len, q_.data(), k_.data(), v_.data(), attn_out_.data());
    else
        attention_decode(*pool_, p, shape_.batch, shape_.context, q_.data(), k_.data(), v_.data(), w.k_cache.data(),
                         w.v_cache.data(), attn_out_.data());
    if (d_.out_gate) {  // Qwen3-Next: out *= sigmoid(gate), the gate projected beside q|k|v
        const int64_t W = d_.qkv_width, n = d_.nh * d_.qk_dim, gate_at = n + 2 * d_.nkv * d_.qk_dim;
        const float* qkv = qkv_.data();
        float* out = attn_out_.data();
        pool_->parallel_for(
            T_,
            [&](int64_t b, int64_t e) {
                for (int64_t t = b; t < e; ++t)
                    for (int64_t i = 0; i < n; ++i)
                        out[t * n + i] *= 1.0f / (1.0f + std::exp(-qkv[t * W + gate_at + i]));
            },
            16);
    }
}

void CpuBackend::phase_o_proj(int64_t slot) {
    LayerWeights& w = lw(slot);
    const int64_t H = d_.H, in = w.is_linear ? d_.la_v : d_.nh * d_.v_dim;
    if (w.post_attn_norm_w.empty() && w.b_o.empty()) {
        gemm_w(*pool_, T_, H, in, attn_out_.data(), w.w_o.data(), w.w_o.panels, x_.data(),
               1.0f);  // residual add inside the GEMM
        return;
    }
    gemm_w(*pool_, T_, H, in, attn_out_.data(), w.w_o.data(), w.w_o.panels, tmp_h_.data());
    if (!w.b_o.empty()) add_bias_rows(*pool_, tmp_h_.data(), w.b_o.data(), T_, H);
    if (!w.post_attn_norm_w.empty()) norm(tmp_h_.data(), w.post_attn_norm_w, FBuf{}, tmp_h_.data(), T_);
    float *x = x_.data(), *o = tmp_h_.data();
    pool_->parallel_for(
        T_ * H,
        [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) x[i] += o[i];
        },
        1 << 14);
}

}  // namespace moebench::cpu
