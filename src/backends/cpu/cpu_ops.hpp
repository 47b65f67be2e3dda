// SPDX-License-Identifier: Apache-2.0
// fp32 building blocks of the CPU backend, one header for the kernels of cpu_gemm, cpu_activation, cpu_norm_rope,
// cpu_attention_ops and cpu_fill (as kernels/launch.hpp for kernels/*.cu).
// Plain functions over raw row-major buffers so that tests can check each against a naive loop.
#pragma once
#include "backends/cpu/thread_pool.hpp"

#include <cstdint>

namespace moebench::cpu {

/// Y[m, n] = X[m, k] . W[n, k]^T + beta * Y (PyTorch Linear layout: W is [out, in]). ldx/ldy/ldw default to k/n/k.
void gemm_xwt(int64_t m, int64_t n, int64_t k, const float* x, const float* w, float* y, float beta = 0.0f,
              int64_t ldx = 0, int64_t ldw = 0, int64_t ldy = 0);
/// The same product for few rows (m <= kSkinnyRows): a memory-bound pass over W on the thread pool, each W row
/// read once for all m rows of X (OpenBLAS packs W first, which doubles the traffic at decode sizes; measured on a
/// 2-core Xeon it stays behind this kernel up to about 24 rows).
inline constexpr int64_t kSkinnyRows = 24;
void gemm_xwt_skinny(ThreadPool& pool, int64_t m, int64_t n, int64_t k, const float* x, const float* w, float* y,
                     float beta = 0.0f, int64_t ldx = 0, int64_t ldw = 0, int64_t ldy = 0);
/// Dispatches: skinny kernel when m <= kSkinnyRows, else OpenBLAS.
void gemm_auto(ThreadPool& pool, int64_t m, int64_t n, int64_t k, const float* x, const float* w, float* y,
               float beta = 0.0f, int64_t ldx = 0, int64_t ldw = 0, int64_t ldy = 0);

/// Column-panel layout of a weight W [n, k] (n outputs): panels of kPanelCols consecutive outputs, panel p stored
/// k-major as [k][kPanelCols] (the last one [k][n % kPanelCols]); the same n * k floats. The small-row kernel
/// then reads one contiguous stream per panel and multiplies each X element by a row of 32 weights (outer
/// product), no horizontal sums: measured on the 2-core Xeon at 16 rows, 215 GFLOP/s per core from L2 against
/// 130 for the dot-product kernel over [n, k] rows. OpenBLAS cannot take this layout, so it is used for expert
/// weights of decode-sized steps only (see CpuBackend::prepare).
inline constexpr int64_t kPanelCols = 16;
/// w [n, k] row-major -> out in panel layout; out may be w (in place, a panel of scratch per thread).
void pack_panels(ThreadPool& pool, const float* w, int64_t n, int64_t k, float* out);
/// The inverse: panel layout -> [n, k] row-major.
void unpack_panels(ThreadPool& pool, const float* wp, int64_t n, int64_t k, float* out);

/// One product of a batch: Y[m, n] = X[m, k] . W[n, k]^T + beta * Y; ld* = 0 means contiguous rows.
/// w_panels: W is in panel layout (ldw unused); any m then runs on the panel kernel.
struct XwtProblem {
    int64_t m = 0, n = 0, k = 0;
    const float* x = nullptr;
    const float* w = nullptr;
    float* y = nullptr;
    int64_t ldx = 0, ldw = 0, ldy = 0;
    bool w_panels = false;
};
/// Y[m, n] = X[m, k] . W^T + beta * Y for a weight W [n, k] in panel layout (w_panels) or [out, in] (gemm_auto).
void gemm_w(ThreadPool& pool, int64_t m, int64_t n, int64_t k, const float* x, const float* w, bool w_panels, float* y,
            float beta = 0.0f);
/// Runs independent products (one per expert): those with m > kSkinnyRows (and W not in panels) through OpenBLAS
/// one by one, the rest in ONE pass of the pool over (product, row or panel block) items, so that many tiny
/// per-expert products still keep every thread streaming weights. times_us (optional, [num_probs]): measured
/// time of each product; for the shared pass, the summed time of its blocks divided by the pool's threads.
void gemm_xwt_many(ThreadPool& pool, const XwtProblem* probs, int64_t num_probs, float beta = 0.0f,
                   double* times_us = nullptr);
/// act[r, i] = core::activate(kind, gu[r, i], gu[r, n + i], limit) for `rows` rows: gu is [rows, 2n] (gate half,
/// then up half), act is [rows, n]. Vectorised (a polynomial expf, ~1 ulp); equals the scalar core:: activations
/// within fp32 rounding.
void activate_rows(ThreadPool& pool, int kind, const float* gu, float* act, int64_t rows, int64_t n, float limit);
/// y[r, :] += bias for each of `rows` rows of width n (row stride ldy, default n).
void add_bias_rows(ThreadPool& pool, float* y, const float* bias, int64_t rows, int64_t n, int64_t ldy = 0);

/// RMSNorm per row: out = x / sqrt(mean(x^2) + eps) * w. x and out may alias. Row strides ldx/ldo (default n).
void rmsnorm_rows(ThreadPool& pool, const float* x, const float* w, float* out, int64_t rows, int64_t n, float eps,
                  int64_t ldx = 0, int64_t ldo = 0);
/// LayerNorm per row: (x - mean) / sqrt(var + eps) * w + b (b may be null).
void layernorm_rows(ThreadPool& pool, const float* x, const float* w, const float* b, float* out, int64_t rows,
                    int64_t n, float eps);

/// RoPE, rotate-half (GPT-NeoX / HF) convention, in place on dims [rot_offset, rot_offset + rot_dim) of each of
/// `heads` heads of width head_stride in each of `rows` rows (row stride ld). cos_sin: [num_positions, rot_dim]
/// as (cos[0..rot_dim/2), sin[0..rot_dim/2)); positions[r] indexes it.
void rope_rows(ThreadPool& pool, float* x, int64_t rows, int64_t ld, int64_t heads, int64_t head_stride,
               int64_t rot_offset, int64_t rot_dim, const float* cos_sin, const int64_t* positions);
/// Fills cos_sin [num_positions, rot_dim] for positions 0..num_positions-1 with inv_freq = theta^(-2i/rot_dim).
void rope_table(float* cos_sin, int64_t num_positions, int64_t rot_dim, double theta);

/// Shape of one attention call. q: [T, num_heads, qk_dim]; k: [T, num_kv_heads, qk_dim]; v: [T, num_kv_heads,
/// v_dim]; out: [T, num_heads, v_dim] (all contiguous). Query head h reads kv head h / (num_heads / num_kv_heads).
struct AttnParams {
    int64_t num_heads = 0, num_kv_heads = 0, qk_dim = 0, v_dim = 0;
    float scale = 1.0f;            // usually 1/sqrt(qk_dim)
    const float* sinks = nullptr;  // [num_heads] gpt-oss sink logits: join the softmax denominator, carry no value
    int64_t window = 0;            // sliding window (keys with q_pos - k_pos < window); 0 = none
    int64_t chunk = 0;             // chunked local attention (keys in the query's chunk); 0 = none
};

/// Prefill: `batch` sequences of `seq_len` tokens (T = batch * seq_len), causal within each sequence.
void attention_prefill(ThreadPool& pool, const AttnParams& p, int64_t batch, int64_t seq_len, const float* q,
                       const float* k, const float* v, float* out);
/// Decode: token b (of `batch`) at position `context` attends to its cache (kcache [batch, num_kv_heads,
/// context, qk_dim], vcache [batch, num_kv_heads, context, v_dim]) and to its own k/v.
void attention_decode(ThreadPool& pool, const AttnParams& p, int64_t batch, int64_t context, const float* q,
                      const float* k, const float* v, const float* kcache, const float* vcache, float* out);

/// dst[i] = offset + scale * uniform_pm1(base, first_index + i) for i in [0, n), in parallel.
void fill_uniform(ThreadPool& pool, float* dst, int64_t n, uint64_t base, uint64_t first_index, float scale,
                  float offset = 0.0f);

}  // namespace moebench::cpu
