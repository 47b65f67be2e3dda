// SPDX-License-Identifier: Apache-2.0
// Attention kernels on raw buffers: prefill (causal, blocked score GEMMs through OpenBLAS) and decode against a
// KV cache; sliding windows, chunks and gpt-oss sinks. The backend's attention phase (cpu_attention.cpp) calls them.
#include "backends/cpu/cpu_ops.hpp"
#include "backends/cpu/cpu_simd.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace moebench::cpu {

using namespace simd;  // NOLINT: the 16-lane helpers (cpu_simd.hpp)

namespace {

inline void axpy(float a, const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

// First key position a query at `pos` may see (keys up to pos itself).
inline int64_t first_key(const AttnParams& p, int64_t pos) {
    int64_t lo = 0;
    if (p.window > 0) lo = std::max<int64_t>(lo, pos - p.window + 1);
    if (p.chunk > 0) lo = std::max<int64_t>(lo, (pos / p.chunk) * p.chunk);
    return lo;
}

// In-place softmax over s[0..n), with an optional sink logit in the denominator. Returns nothing; s holds probs.
inline __attribute__((always_inline)) void softmax_with_sink(float* s, int64_t n, const float* sink) {
    float mx = sink ? *sink : -INFINITY;
    for (int64_t i = 0; i < n; ++i) mx = std::max(mx, s[i]);
    float sum = sink ? std::exp(*sink - mx) : 0.0f;
    int64_t i = 0;
    v16f vs{};
    for (; i + 16 <= n; i += 16) {  // exp on 16 lanes (~1 ulp)
        const v16f e = exp16(load16(s + i) - mx);
        __builtin_memcpy(s + i, &e, sizeof(e));
        vs += e;
    }
    sum += hsum16(vs);
    for (; i < n; ++i) sum += (s[i] = std::exp(s[i] - mx));
    const float inv = 1.0f / sum;
    for (i = 0; i < n; ++i) s[i] *= inv;
}

// a . b over n floats, 32 lanes at a time (two 16-lane sums), the n % 32 tail in scalar.
inline __attribute__((always_inline)) float dot16(const float* a, const float* b, int64_t n) {
    v16f s0{}, s1{};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 += load16(a + i) * load16(b + i);
        s1 += load16(a + i + 16) * load16(b + i + 16);
    }
    if (i + 16 <= n) {
        s0 += load16(a + i) * load16(b + i);
        i += 16;
    }
    float t = hsum16(s0 + s1);
    for (; i < n; ++i) t += a[i] * b[i];
    return t;
}

// The query heads [h0, h0 + group) of one sequence against one kv head's cache (keys [lo, context) of kc / vc) and
// the token's own key / value: scores, softmax (with the head's sink), weighted sum of values. Cloned per ISA (the
// build targets baseline x86-64; the lambda that calls this is not cloned). s: scratch of context + 1 floats.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void attn_decode_heads(const AttnParams& p, int64_t h0, int64_t group, int64_t lo, int64_t context, const float* q,
                       const float* kc, const float* vc, const float* kself, const float* vself, float* out,
                       float* s) {
    const int64_t dq = p.qk_dim, dv = p.v_dim, n = context - lo + 1;  // cache keys [lo, context) and the token
    for (int64_t h = h0; h < h0 + group; ++h) {
        const float* qh = q + (h - h0) * dq;
        int64_t j4 = lo;
        if (dq % 16 == 0) {  // four keys at a time: four independent sums, one 4-way horizontal reduction
            for (; j4 + 4 <= context; j4 += 4) {
                const float* k0 = kc + j4 * dq;
                __builtin_prefetch(k0 + 16 * dq, 0, 3);
                __builtin_prefetch(k0 + 16 * dq + 2 * dq, 0, 3);
                v16f a0{}, a1{}, a2{}, a3{};
                for (int64_t c = 0; c < dq; c += 16) {
                    const v16f qv = load16(qh + c);
                    a0 += qv * load16(k0 + c);
                    a1 += qv * load16(k0 + dq + c);
                    a2 += qv * load16(k0 + 2 * dq + c);
                    a3 += qv * load16(k0 + 3 * dq + c);
                }
                hsum16x4(a0, a1, a2, a3, s + (j4 - lo));
                for (int r = 0; r < 4; ++r) s[j4 - lo + r] *= p.scale;
            }
        }
        for (int64_t j = j4; j < context; ++j) s[j - lo] = p.scale * dot16(qh, kc + j * dq, dq);
        s[n - 1] = p.scale * dot16(qh, kself, dq);
        softmax_with_sink(s, n, p.sinks ? p.sinks + h : nullptr);
        float* oh = out + (h - h0) * dv;
        for (int64_t i = 0; i < dv; ++i) oh[i] = 0.0f;
        for (int64_t jj = lo; jj < context; ++jj) {
            __builtin_prefetch(vc + (jj + 8) * dv, 0, 3);
            axpy(s[jj - lo], vc + jj * dv, oh, dv);
        }
        axpy(s[n - 1], vself, oh, dv);
    }
}

}  // namespace

void attention_prefill(ThreadPool& pool, const AttnParams& p, int64_t batch, int64_t seq_len, const float* q,
                       const float* k, const float* v, float* out) {
    const int64_t nh = p.num_heads, nkv = p.num_kv_heads, dq = p.qk_dim, dv = p.v_dim;
    const int64_t group = nh / nkv;
    const int64_t ldq = nh * dq, ldk = nkv * dq, ldv = nkv * dv, ldo = nh * dv;
    constexpr int64_t kBlock = 256;  // query rows per score block: [kBlock, seq_len] floats of scratch
    std::vector<float> scores(static_cast<size_t>(std::min(kBlock, seq_len) * seq_len));
    for (int64_t b = 0; b < batch; ++b) {
        for (int64_t h = 0; h < nh; ++h) {
            const int64_t g = h / group;
            const float* qb = q + b * seq_len * ldq + h * dq;
            const float* kb = k + b * seq_len * ldk + g * dq;
            const float* vb = v + b * seq_len * ldv + g * dv;
            float* ob = out + b * seq_len * ldo + h * dv;
            for (int64_t i0 = 0; i0 < seq_len; i0 += kBlock) {
                const int64_t i1 = std::min(seq_len, i0 + kBlock), rows = i1 - i0;
                const int64_t klo = first_key(p, i0), khi = i1;  // keys [klo, khi) cover the block
                const int64_t nk = khi - klo;
                // scores[r, j] = q[i0 + r] . k[klo + j]
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, nk, dq, p.scale, qb + i0 * ldq, ldq,
                            kb + klo * ldk, ldk, 0.0f, scores.data(), nk);
                pool.parallel_for(
                    rows,
                    [&](int64_t rb, int64_t re) {
                        for (int64_t r = rb; r < re; ++r) {
                            const int64_t i = i0 + r, lo = first_key(p, i) - klo, hi = i - klo + 1;
                            float* s = scores.data() + r * nk;
                            for (int64_t j = 0; j < lo; ++j) s[j] = 0.0f;
                            softmax_with_sink(s + lo, hi - lo, p.sinks ? p.sinks + h : nullptr);
                            for (int64_t j = hi; j < nk; ++j) s[j] = 0.0f;
                        }
                    },
                    8);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, dv, nk, 1.0f, scores.data(), nk,
                            vb + klo * ldv, ldv, 0.0f, ob + i0 * ldo, ldo);
            }
        }
    }
}

void attention_decode(ThreadPool& pool, const AttnParams& p, int64_t batch, int64_t context, const float* q,
                      const float* k, const float* v, const float* kcache, const float* vcache, float* out) {
    const int64_t nh = p.num_heads, nkv = p.num_kv_heads, dq = p.qk_dim, dv = p.v_dim;
    const int64_t group = nh / nkv;
    const int64_t lo = first_key(p, context);  // the query sits at position `context`
    // One task per (sequence, kv head): the cache block is read once for its `group` query heads.
    pool.parallel_for(batch * nkv, [&](int64_t tb, int64_t te) {
        std::vector<float> s(static_cast<size_t>(context + 1));
        for (int64_t task = tb; task < te; ++task) {
            const int64_t b = task / nkv, g = task % nkv;
            attn_decode_heads(p, g * group, group, lo, context, q + b * nh * dq + g * group * dq,
                              kcache + (b * nkv + g) * context * dq, vcache + (b * nkv + g) * context * dv,
                              k + b * nkv * dq + g * dq, v + b * nkv * dv + g * dv, out + b * nh * dv + g * group * dv,
                              s.data());
        }
    });
}

}  // namespace moebench::cpu
