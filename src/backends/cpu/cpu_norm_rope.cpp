// SPDX-License-Identifier: Apache-2.0
// Row norms (RMSNorm, LayerNorm) and rotary position embedding (rotate-half).
#include "backends/cpu/cpu_ops.hpp"

#include <cmath>
#include <cstdint>

namespace moebench::cpu {

void rmsnorm_rows(ThreadPool& pool, const float* x, const float* w, float* out, int64_t rows, int64_t n, float eps,
                  int64_t ldx, int64_t ldo) {
    if (!ldx) ldx = n;
    if (!ldo) ldo = n;
    pool.parallel_for(
        rows,
        [&](int64_t b, int64_t e) {
            for (int64_t r = b; r < e; ++r) {
                const float* xr = x + r * ldx;
                float* orow = out + r * ldo;
                double ss = 0.0;
                for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(xr[i]) * xr[i];
                const float inv = 1.0f / std::sqrt(static_cast<float>(ss / n) + eps);
                for (int64_t i = 0; i < n; ++i) orow[i] = xr[i] * inv * w[i];
            }
        },
        4);
}

void layernorm_rows(ThreadPool& pool, const float* x, const float* w, const float* b, float* out, int64_t rows,
                    int64_t n, float eps) {
    pool.parallel_for(
        rows,
        [&](int64_t rb, int64_t re) {
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
        },
        4);
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
    pool.parallel_for(
        rows,
        [&](int64_t b, int64_t e) {
            for (int64_t r = b; r < e; ++r) {
                const float* cs = cos_sin + positions[r] * rot_dim;
                for (int64_t h = 0; h < heads; ++h) {
                    float* v = x + r * ld + h * head_stride + rot_offset;
                    for (int64_t i = 0; i < half; ++i) {
                        const float x1 = v[i], x2 = v[half + i], c = cs[i], s = cs[half + i];
                        v[i] = x1 * c - x2 * s;  // x * cos + rotate_half(x) * sin, rotate_half = (-x2, x1)
                        v[half + i] = x2 * c + x1 * s;
                    }
                }
            }
        },
        8);
}

}  // namespace moebench::cpu
