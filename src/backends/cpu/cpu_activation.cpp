// SPDX-License-Identifier: Apache-2.0
// The families' activations on 16 lanes (core/moe_core.cuh's definitions, vectorised) and bias rows.
#include "backends/cpu/cpu_ops.hpp"
#include "backends/cpu/cpu_simd.hpp"

#include "core/moe_core.cuh"

#include <cstdint>

namespace moebench::cpu {

using namespace simd;  // NOLINT: the 16-lane helpers (cpu_simd.hpp)

namespace {

// The families' activations of core/moe_core.cuh on 16 lanes, written in the same form and order.
template <int Kind>
inline __attribute__((always_inline)) v16f act16(const v16f& gin, const v16f& uin, float limit) {
    v16f g = gin, u = uin;
    if constexpr (Kind == core::kActGeglu) {
        const v16f t = tanh16(0.7978845608028654f * (g + 0.044715f * g * g * g));
        return 0.5f * g * (1.0f + t) * u;
    } else if constexpr (Kind == core::kActSwigluOai) {
        const v16f lim = v16f{} + limit, nlim = v16f{} - limit;
        g = g > lim ? lim : g;
        u = u > lim ? lim : u;
        u = u < nlim ? nlim : u;
        return g * sigmoid16(core::kSwigluOaiAlpha * g) * (u + 1.0f);
    } else {
        return g * sigmoid16(g) * u;  // silu(g) * up
    }
}

template <int Kind>
inline __attribute__((always_inline)) void act_rows_kind(const float* gu, float* act, int64_t rb, int64_t re, int64_t n,
                                                         float limit) {
    for (int64_t r = rb; r < re; ++r) {
        const float* g = gu + r * 2 * n;
        const float* u = g + n;
        float* o = act + r * n;
        int64_t i = 0;
        for (; i + 16 <= n; i += 16) {
            const v16f v = act16<Kind>(load16(g + i), load16(u + i), limit);
            __builtin_memcpy(o + i, &v, sizeof(v));
        }
        for (; i < n; ++i) o[i] = core::activate(Kind, g[i], u[i], limit);
    }
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void act_rows(int kind, const float* gu, float* act, int64_t rb, int64_t re, int64_t n, float limit) {
    if (kind == core::kActGeglu)
        act_rows_kind<core::kActGeglu>(gu, act, rb, re, n, limit);
    else if (kind == core::kActSwigluOai)
        act_rows_kind<core::kActSwigluOai>(gu, act, rb, re, n, limit);
    else
        act_rows_kind<core::kActSwiglu>(gu, act, rb, re, n, limit);
}

}  // namespace

void activate_rows(ThreadPool& pool, int kind, const float* gu, float* act, int64_t rows, int64_t n, float limit) {
    if (rows <= 0 || n <= 0) return;
    // Rows per task: at least ~16K elements so that small decode batches do not pay a wake-up per row.
    const int64_t min_rows = std::max<int64_t>(1, (int64_t(1) << 14) / n);
    pool.parallel_for(
        rows, [&](int64_t b, int64_t e) { act_rows(kind, gu, act, b, e, n, limit); }, min_rows);
}

void add_bias_rows(ThreadPool& pool, float* y, const float* bias, int64_t rows, int64_t n, int64_t ldy) {
    if (!ldy) ldy = n;
    pool.parallel_for(
        rows,
        [&](int64_t b, int64_t e) {
            for (int64_t r = b; r < e; ++r)
                for (int64_t i = 0; i < n; ++i) y[r * ldy + i] += bias[i];
        },
        16);
}

}  // namespace moebench::cpu
