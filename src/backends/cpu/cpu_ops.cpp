// SPDX-License-Identifier: Apache-2.0
// fp32 building blocks: OpenBLAS sgemm, row norms, RoPE, prefill/decode attention, seeded fills.
#include "backends/cpu/cpu_ops.hpp"

#include "kernels/moe_core.cuh"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace moebench::cpu {

void gemm_xwt(int64_t m, int64_t n, int64_t k, const float* x, const float* w, float* y, float beta, int64_t ldx,
              int64_t ldw, int64_t ldy) {
    if (m <= 0 || n <= 0) return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n),
                static_cast<int>(k), 1.0f, x, static_cast<int>(ldx ? ldx : k), w, static_cast<int>(ldw ? ldw : k),
                beta, y, static_cast<int>(ldy ? ldy : n));
}

namespace {

// Rows [jb, je) of W against all m rows of X. Cloned for AVX2+FMA with a generic fallback picked at load time
// (the build targets baseline x86-64); accumulators are locals so they stay in registers.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
void skinny_rows(int64_t m, int64_t jb, int64_t je, int64_t k, const float* x, int64_t ldx, const float* w,
                 int64_t ldw, float* y, int64_t ldy, float beta) {
    constexpr int64_t kStep = 512;  // k-chunk of a W row kept in L1 while every X row uses it
    const int64_t k8 = k & ~int64_t(7);
    float acc[kSkinnyRows][8];
    for (int64_t j = jb; j < je; ++j) {
        const float* wr = w + j * ldw;
        for (int64_t i = 0; i < m; ++i)
            for (int l = 0; l < 8; ++l) acc[i][l] = 0.0f;
        for (int64_t k0 = 0; k0 < k8; k0 += kStep) {
            const int64_t k1 = std::min(k8, k0 + kStep);
            for (int64_t i = 0; i < m; ++i) {
                const float* xr = x + i * ldx;
                float t[8];
                for (int l = 0; l < 8; ++l) t[l] = acc[i][l];
                for (int64_t c = k0; c < k1; c += 8)
                    for (int l = 0; l < 8; ++l) t[l] += xr[c + l] * wr[c + l];
                for (int l = 0; l < 8; ++l) acc[i][l] = t[l];
            }
        }
        for (int64_t i = 0; i < m; ++i) {
            const float* a = acc[i];
            float s = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
            for (int64_t c = k8; c < k; ++c) s += x[i * ldx + c] * wr[c];
            float* yo = y + i * ldy + j;
            *yo = beta == 0.0f ? s : s + beta * *yo;
        }
    }
}

}  // namespace

void gemm_xwt_skinny(ThreadPool& pool, int64_t m, int64_t n, int64_t k, const float* x, const float* w, float* y,
                     float beta, int64_t ldx, int64_t ldw, int64_t ldy) {
    if (m <= 0 || n <= 0) return;
    if (!ldx) ldx = k;
    if (!ldw) ldw = k;
    if (!ldy) ldy = n;
    pool.parallel_for(n, [&](int64_t jb, int64_t je) { skinny_rows(m, jb, je, k, x, ldx, w, ldw, y, ldy, beta); }, 16);
}

void gemm_auto(ThreadPool& pool, int64_t m, int64_t n, int64_t k, const float* x, const float* w, float* y, float beta,
               int64_t ldx, int64_t ldw, int64_t ldy) {
    if (m <= kSkinnyRows)
        gemm_xwt_skinny(pool, m, n, k, x, w, y, beta, ldx, ldw, ldy);
    else
        gemm_xwt(m, n, k, x, w, y, beta, ldx, ldw, ldy);
}

void add_bias_rows(ThreadPool& pool, float* y, const float* bias, int64_t rows, int64_t n, int64_t ldy) {
    if (!ldy) ldy = n;
    pool.parallel_for(rows, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r)
            for (int64_t i = 0; i < n; ++i) y[r * ldy + i] += bias[i];
    }, 16);
}

void rmsnorm_rows(ThreadPool& pool, const float* x, const float* w, float* out, int64_t rows, int64_t n, float eps,
                  int64_t ldx, int64_t ldo) {
    if (!ldx) ldx = n;
    if (!ldo) ldo = n;
    pool.parallel_for(rows, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
            const float* xr = x + r * ldx;
            float* orow = out + r * ldo;
            double ss = 0.0;
            for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(xr[i]) * xr[i];
            const float inv = 1.0f / std::sqrt(static_cast<float>(ss / n) + eps);
            for (int64_t i = 0; i < n; ++i) orow[i] = xr[i] * inv * w[i];
        }
    }, 4);
}

void layernorm_rows(ThreadPool& pool, const float* x, const float* w, const float* b, float* out, int64_t rows,
                    int64_t n, float eps) {
    pool.parallel_for(rows, [&](int64_t rb, int64_t re) {
        for (int64_t r = rb; r < re; ++r) {
            const float* xr = x + r * n;
            float* orow = out + r * n;
            double s = 0.0, ss = 0.0;
            for (int64_t i = 0; i < n; ++i) s += xr[i];
            const double mean = s / n;
            for (int64_t i = 0; i < n; ++i) ss += (xr[i] - mean) * (xr[i] - mean);
            const float inv = 1.0f / std::sqrt(static_cast<float>(ss / n) + eps);
            const float meanf = static_cast<float>(mean);
            for (int64_t i = 0; i < n; ++i) orow[i] = (xr[i] - meanf) * inv * w[i] + (b ? b[i] : 0.0f);
        }
    }, 4);
}

void rope_table(float* cos_sin, int64_t num_positions, int64_t rot_dim, double theta) {
    const int64_t half = rot_dim / 2;
    for (int64_t p = 0; p < num_positions; ++p)
        for (int64_t i = 0; i < half; ++i) {
            const double inv_freq = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(rot_dim));
            const double a = static_cast<double>(p) * inv_freq;
            cos_sin[p * rot_dim + i] = static_cast<float>(std::cos(a));
            cos_sin[p * rot_dim + half + i] = static_cast<float>(std::sin(a));
        }
}

void rope_rows(ThreadPool& pool, float* x, int64_t rows, int64_t ld, int64_t heads, int64_t head_stride,
               int64_t rot_offset, int64_t rot_dim, const float* cos_sin, const int64_t* positions) {
    const int64_t half = rot_dim / 2;
    pool.parallel_for(rows, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
            const float* cs = cos_sin + positions[r] * rot_dim;
            for (int64_t h = 0; h < heads; ++h) {
                float* v = x + r * ld + h * head_stride + rot_offset;
                for (int64_t i = 0; i < half; ++i) {
                    const float x1 = v[i], x2 = v[half + i], c = cs[i], s = cs[half + i];
                    v[i] = x1 * c - x2 * s;       // x * cos + rotate_half(x) * sin, rotate_half = (-x2, x1)
                    v[half + i] = x2 * c + x1 * s;
                }
            }
        }
    }, 8);
}

namespace {

// 8 partial sums so that the compiler vectorises without -ffast-math.
inline float dot(const float* a, const float* b, int64_t n) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
    float s = 0.0f;
    for (; i < n; ++i) s += a[i] * b[i];
    return s + ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

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
inline void softmax_with_sink(float* s, int64_t n, const float* sink) {
    float mx = sink ? *sink : -INFINITY;
    for (int64_t i = 0; i < n; ++i) mx = std::max(mx, s[i]);
    float sum = sink ? std::exp(*sink - mx) : 0.0f;
    for (int64_t i = 0; i < n; ++i) {
        s[i] = std::exp(s[i] - mx);
        sum += s[i];
    }
    const float inv = 1.0f / sum;
    for (int64_t i = 0; i < n; ++i) s[i] *= inv;
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
                pool.parallel_for(rows, [&](int64_t rb, int64_t re) {
                    for (int64_t r = rb; r < re; ++r) {
                        const int64_t i = i0 + r, lo = first_key(p, i) - klo, hi = i - klo + 1;
                        float* s = scores.data() + r * nk;
                        for (int64_t j = 0; j < lo; ++j) s[j] = 0.0f;
                        softmax_with_sink(s + lo, hi - lo, p.sinks ? p.sinks + h : nullptr);
                        for (int64_t j = hi; j < nk; ++j) s[j] = 0.0f;
                    }
                }, 8);
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
            const float* kc = kcache + (b * nkv + g) * context * dq;
            const float* vc = vcache + (b * nkv + g) * context * dv;
            const float* kself = k + b * nkv * dq + g * dq;
            const float* vself = v + b * nkv * dv + g * dv;
            for (int64_t h = g * group; h < (g + 1) * group; ++h) {
                const float* qh = q + b * nh * dq + h * dq;
                const int64_t n = context - lo + 1;  // cache keys [lo, context) and the token itself
                for (int64_t j = lo; j < context; ++j) s[j - lo] = p.scale * dot(qh, kc + j * dq, dq);
                s[n - 1] = p.scale * dot(qh, kself, dq);
                softmax_with_sink(s.data(), n, p.sinks ? p.sinks + h : nullptr);
                float* oh = out + b * nh * dv + h * dv;
                for (int64_t i = 0; i < dv; ++i) oh[i] = 0.0f;
                for (int64_t j = lo; j < context; ++j) axpy(s[j - lo], vc + j * dv, oh, dv);
                axpy(s[n - 1], vself, oh, dv);
            }
        }
    });
}

void fill_uniform(ThreadPool& pool, float* dst, int64_t n, uint64_t base, uint64_t first_index, float scale,
                  float offset) {
    pool.parallel_for(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
            dst[i] = offset + scale * core::uniform_pm1(base, first_index + static_cast<uint64_t>(i));
    }, 1 << 16);
}

}  // namespace moebench::cpu
