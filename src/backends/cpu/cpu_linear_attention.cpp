// SPDX-License-Identifier: Apache-2.0
// linear_attention phase of the CPU backend (hybrid models): the recurrence on each sequence's state, in its plain
// token-by-token form (the chunked kernels of the references compute the same sums in another order).
//   gated DeltaNet (Qwen3-Next, HF torch_recurrent_gated_delta_rule): causal depthwise conv + SiLU over q|k|v;
//     q, k L2-normalised, q scaled by 1/sqrt(Dk); per value head: beta = sigmoid(b), g = -exp(A_log) softplus(a +
//     dt_bias); S *= exp(g); delta = beta (v - S^T k); S += k delta^T; o = S^T q; then RMSNorm(o) * w * silu(z).
//   lightning (MiniMax-Text-01): q, k, v = silu(proj); S = exp(-slope_h) S + k v^T; o = S^T q; then
//     RMSNorm over all heads * w * sigmoid(gate). slope_h = 2^(-8 (h + 1) / N) * (1 - l / (L - 1) + 1e-5).
// Prefill starts every sequence from a zero state (and zero conv padding); decode from the state and conv window
// of `context` earlier tokens (cpu_weights.cpp). The updated state goes to a scratch buffer, so steps stay identical.
#include "backends/cpu/cpu_backend_impl.hpp"

#include <cmath>
#include <cstring>
#include <vector>

namespace moebench::cpu {
namespace {

float silu(float x) { return x / (1.0f + std::exp(-x)); }
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// x[0..n) *= 1 / sqrt(sum x^2 + eps) (HF l2norm, eps 1e-6), then * scale.
void l2_normalise(float* x, int64_t n, float scale) {
    float ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
    const float r = scale / std::sqrt(ss + 1e-6f);
    for (int64_t i = 0; i < n; ++i) x[i] *= r;
}

// The per-head decay of lightning attention on model layer `layer` (ALiBi's slopes for a power-of-2 head count).
float lightning_decay(int64_t head, int64_t num_heads, int64_t layer, int64_t num_layers) {
    const double slope = std::pow(2.0, -8.0 * static_cast<double>(head + 1) / static_cast<double>(num_heads));
    const double depth = num_layers > 1 ? 1.0 - static_cast<double>(layer) / static_cast<double>(num_layers - 1) : 1.0;
    return static_cast<float>(std::exp(-slope * (depth + 1e-5)));
}

}  // namespace

void CpuBackend::phase_linear_attention(int64_t slot) {
    LayerWeights& w = lw(slot);
    const Dims& d = d_;
    const int64_t B = shape_.batch, S = shape_.mode == Mode::decode ? 1 : shape_.seq_len;
    const int64_t Dk = d.la_dk, Dv = d.la_dv, Nv = d.la_nv, state = Dk * Dv, W = d.la_in;
    // Decode starts from the stored state and conv window of `context` earlier tokens; with none (context 0) there
    // is nothing stored (cpu_weights.cpp) and it starts from zeros, as a prefill does.
    const bool from_state = shape_.mode == Mode::decode && shape_.context > 0;
    const float* proj = la_proj_.data();
    float* out = attn_out_.data();
    float* run = la_run_.data();
    if (d.la_delta) {
        // Causal depthwise conv over the q|k|v channels, then SiLU; earlier inputs from the conv window (decode).
        const int64_t C = d.la_channels, K = d.la_conv;
        float* conv = la_conv_out_.data();
        pool_->parallel_for(
            B * S,
            [&](int64_t b0, int64_t e0) {
                for (int64_t t = b0; t < e0; ++t) {
                    const int64_t seq = t / S, pos = t % S;
                    for (int64_t c = 0; c < C; ++c) {
                        float acc = 0;
                        for (int64_t j = 0; j < K; ++j) {  // tap j sees the input at position pos - (K - 1) + j
                            const int64_t p = pos - (K - 1) + j;
                            float x = 0;
                            if (p >= 0)
                                x = proj[(seq * S + p) * W + c];
                            else if (from_state)
                                x = w.la_conv_state.data()[(seq * C + c) * (K - 1) + (K - 1 + p)];
                            acc += w.la_conv.data()[c * K + j] * x;
                        }
                        conv[t * C + c] = K > 0 ? silu(acc) : silu(proj[t * W + c]);
                    }
                }
            },
            1);
        const int64_t Kw = d.la_nk * Dk, group = Nv / d.la_nk;
        const float eps = static_cast<float>(m_.norm_eps), qscale = 1.0f / std::sqrt(static_cast<float>(Dk));
        pool_->parallel_for(
            B * Nv,
            [&](int64_t b0, int64_t e0) {
                std::vector<float> q(Dk), k(Dk), kv(Dv), o(Dv);
                for (int64_t sh = b0; sh < e0; ++sh) {
                    const int64_t seq = sh / Nv, h = sh % Nv, kh = h / group;
                    float* St = run + sh * state;  // [Dk, Dv]
                    if (from_state)
                        std::memcpy(St, w.la_state.data() + sh * state, sizeof(float) * state);
                    else
                        std::memset(St, 0, sizeof(float) * state);
                    const float A = std::exp(w.la_a_log.data()[h]), dt = w.la_dt_bias.data()[h];
                    for (int64_t pos = 0; pos < S; ++pos) {
                        const int64_t t = seq * S + pos;
                        const float* ct = conv + t * d.la_channels;
                        std::memcpy(q.data(), ct + kh * Dk, sizeof(float) * Dk);
                        std::memcpy(k.data(), ct + Kw + kh * Dk, sizeof(float) * Dk);
                        const float* v = ct + 2 * Kw + h * Dv;
                        l2_normalise(q.data(), Dk, qscale);
                        l2_normalise(k.data(), Dk, 1.0f);
                        const float* ba = proj + t * W + d.la_channels + d.la_v;
                        const float beta = sigmoid(ba[h]), decay = std::exp(-A * softplus(ba[Nv + h] + dt));
                        std::fill(kv.begin(), kv.end(), 0.0f);
                        for (int64_t i = 0; i < Dk; ++i)
                            for (int64_t j = 0; j < Dv; ++j) {
                                St[i * Dv + j] *= decay;
                                kv[j] += St[i * Dv + j] * k[i];
                            }
                        for (int64_t j = 0; j < Dv; ++j) kv[j] = beta * (v[j] - kv[j]);  // delta
                        std::fill(o.begin(), o.end(), 0.0f);
                        for (int64_t i = 0; i < Dk; ++i)
                            for (int64_t j = 0; j < Dv; ++j) {
                                St[i * Dv + j] += k[i] * kv[j];
                                o[j] += St[i * Dv + j] * q[i];
                            }
                        // Gated RMSNorm over the head: rmsnorm(o) * w * silu(z).
                        float ss = 0;
                        for (int64_t j = 0; j < Dv; ++j) ss += o[j] * o[j];
                        const float r = 1.0f / std::sqrt(ss / static_cast<float>(Dv) + eps);
                        const float* z = proj + t * W + d.la_channels + h * Dv;
                        for (int64_t j = 0; j < Dv; ++j)
                            out[t * d.la_v + h * Dv + j] = o[j] * r * w.la_norm.data()[j] * silu(z[j]);
                    }
                }
            },
            1);
        return;
    }
    // Lightning attention.
    const int64_t V = d.la_v, N = Nv;
    pool_->parallel_for(
        B * N,
        [&](int64_t b0, int64_t e0) {
            std::vector<float> q(Dk), k(Dk), v(Dv);
            for (int64_t sh = b0; sh < e0; ++sh) {
                const int64_t seq = sh / N, h = sh % N;
                float* St = run + sh * state;
                if (from_state)
                    std::memcpy(St, w.la_state.data() + sh * state, sizeof(float) * state);
                else
                    std::memset(St, 0, sizeof(float) * state);
                const float decay = lightning_decay(h, N, w.layer, m_.num_layers);
                for (int64_t pos = 0; pos < S; ++pos) {
                    const int64_t t = seq * S + pos;
                    for (int64_t i = 0; i < Dk; ++i) {
                        q[i] = silu(proj[t * W + h * Dk + i]);
                        k[i] = silu(proj[t * W + V + h * Dk + i]);
                    }
                    for (int64_t j = 0; j < Dv; ++j) v[j] = silu(proj[t * W + 2 * V + h * Dv + j]);
                    float* o = out + t * V + h * Dv;
                    std::fill(o, o + Dv, 0.0f);
                    for (int64_t i = 0; i < Dk; ++i)
                        for (int64_t j = 0; j < Dv; ++j) {
                            St[i * Dv + j] = decay * St[i * Dv + j] + k[i] * v[j];
                            o[j] += St[i * Dv + j] * q[i];
                        }
                }
            }
        },
        1);
    // RMSNorm over all heads, times sigmoid(output gate).
    const float eps = static_cast<float>(m_.norm_eps);
    pool_->parallel_for(
        B * S,
        [&](int64_t b0, int64_t e0) {
            for (int64_t t = b0; t < e0; ++t) {
                float* o = out + t * V;
                float ss = 0;
                for (int64_t i = 0; i < V; ++i) ss += o[i] * o[i];
                const float r = 1.0f / std::sqrt(ss / static_cast<float>(V) + eps);
                for (int64_t i = 0; i < V; ++i)
                    o[i] = o[i] * r * w.la_norm.data()[i] * sigmoid(proj[t * W + 3 * V + i]);
            }
        },
        1);
}

}  // namespace moebench::cpu
