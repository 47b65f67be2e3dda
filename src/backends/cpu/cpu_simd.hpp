// SPDX-License-Identifier: Apache-2.0
// 16 fp32 lanes as a GCC vector and the helpers the CPU kernels share (cpu_gemm, cpu_activation, cpu_attention_ops):
// one zmm on AVX-512, two ymm on AVX2, four xmm on the generic clone. Internal to src/backends/cpu.
#pragma once
#include <cstdint>

namespace moebench::cpu::simd {

// The vector helpers below are always inlined into the ISA clones, so the AVX-512 ABI note does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

// 16 fp32 lanes as a GCC vector: one zmm on AVX-512, two ymm on AVX2, four xmm on the generic clone.
typedef float v16f __attribute__((vector_size(64)));

inline __attribute__((always_inline)) v16f load16(const float* p) {
    v16f v;
    __builtin_memcpy(&v, p, sizeof(v));  // unaligned load
    return v;
}

inline __attribute__((always_inline)) float hsum16(const v16f& v) {
    float s[16];
    __builtin_memcpy(s, &v, sizeof(v));
    return (((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))) +
           (((s[8] + s[9]) + (s[10] + s[11])) + ((s[12] + s[13]) + (s[14] + s[15])));
}

// The four horizontal sums of v0..v3 at once: halving steps that pair the vectors up (5 adds and 8 shuffles for
// four sums instead of 4 x 15 scalar adds; at decode sizes the sums are ~10% of the kernel's work otherwise).
inline __attribute__((always_inline)) void hsum16x4(const v16f& v0, const v16f& v1, const v16f& v2, const v16f& v3,
                                                    float* out) {
    const v16f a = __builtin_shufflevector(v0, v1, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
                   __builtin_shufflevector(v0, v1, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    const v16f b = __builtin_shufflevector(v2, v3, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
                   __builtin_shufflevector(v2, v3, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    // c: four lanes per input vector, in order v0, v1, v2, v3.
    const v16f c = __builtin_shufflevector(a, b, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27) +
                   __builtin_shufflevector(a, b, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
    const v16f d = c + __builtin_shufflevector(c, c, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
    const v16f e = d + __builtin_shufflevector(d, d, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
    out[0] = e[0];
    out[1] = e[4];
    out[2] = e[8];
    out[3] = e[12];
}

typedef int32_t v16i __attribute__((vector_size(64)));

// expf on 16 lanes: range reduction by ln 2 (split in two for exactness) and Cephes' degree-6 polynomial, ~1 ulp.
// The input is clamped to [-87, 87] so that 2^n and 1 / (1 + e) stay normal floats: a denormal would cost a
// microcode assist per lane (~100 cycles), and callers below map those ranges to the same 0 / +-1 as expf does.
inline __attribute__((always_inline)) v16f exp16(const v16f& xin) {
    const v16f lo = v16f{} - 87.0f, hi = v16f{} + 87.0f;
    v16f x = xin < lo ? lo : xin;
    x = x > hi ? hi : x;
    const v16f magic = v16f{} + 12582912.0f;  // 1.5 * 2^23: adding and subtracting rounds to the nearest integer
    const v16f n = (x * 1.44269504088896341f + magic) - magic;
    const v16f r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
    v16f p = v16f{} + 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const v16f e = p * r * r + r + 1.0f;
    const v16i bits = (__builtin_convertvector(n, v16i) + 127) << 23;  // 2^n
    v16f scale;
    __builtin_memcpy(&scale, &bits, sizeof(scale));
    return e * scale;
}

// 1 / (1 + exp(-z)); exactly 0 below z = -87 (where expf's form gives at most ~1.6e-38).
inline __attribute__((always_inline)) v16f sigmoid16(const v16f& z) {
    const v16f s = 1.0f / (1.0f + exp16(-z));
    return z < -87.0f ? v16f{} : s;
}

// tanh(u) = 1 - 2 / (exp(2u) + 1): exactly +-1 beyond |u| = 43.5, as tanhf rounds there.
inline __attribute__((always_inline)) v16f tanh16(const v16f& u) { return 1.0f - 2.0f / (exp16(u + u) + 1.0f); }

}  // namespace moebench::cpu::simd
