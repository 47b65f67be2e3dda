// SPDX-License-Identifier: Apache-2.0
// Helpers for the GPU tests: bf16 rounding on the host, uploads/downloads, error norms.
#pragma once
#include "backends/cuda/device_buffer.hpp"
#include "core/dispatch_dtype.hpp"
#include "kernels/launch.hpp"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace moebench::test {

using kernels::bf16;

/// Round-to-nearest-even fp32 -> bf16 bits, and back; the host mirror of what the GPU stores.
inline uint16_t f2bf_bits(float f) { return core::bf16_from_float(f); }
inline float bf_bits2f(uint16_t b) { return core::bf16_to_float(b); }
inline float round_bf(float f) { return bf_bits2f(f2bf_bits(f)); }

inline std::vector<float> random_vec(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
    std::mt19937 g(seed);
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = round_bf(d(g));  // representable in bf16: the device sees exactly these values
    return v;
}

inline DeviceBuffer<bf16> upload_bf16(const std::vector<float>& v) {
    std::vector<uint16_t> bits(v.size());
    for (size_t i = 0; i < v.size(); ++i) bits[i] = f2bf_bits(v[i]);
    DeviceBuffer<bf16> d(static_cast<int64_t>(v.size()));
    MOEBENCH_CUDA_CHECK(cudaMemcpy(d.get(), bits.data(), bits.size() * 2, cudaMemcpyHostToDevice));
    return d;
}
template <typename T>
inline DeviceBuffer<T> upload(const std::vector<T>& v) {
    DeviceBuffer<T> d(static_cast<int64_t>(v.size()));
    MOEBENCH_CUDA_CHECK(cudaMemcpy(d.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}
inline std::vector<float> download_bf16(const bf16* d, size_t n) {
    MOEBENCH_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<uint16_t> bits(n);
    MOEBENCH_CUDA_CHECK(cudaMemcpy(bits.data(), d, n * 2, cudaMemcpyDeviceToHost));
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = bf_bits2f(bits[i]);
    return v;
}
template <typename T>
inline std::vector<T> download(const T* d, size_t n) {
    MOEBENCH_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<T> v(n);
    MOEBENCH_CUDA_CHECK(cudaMemcpy(v.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
}

/// ||a - b|| / ||b|| (relative L2 error against the reference b).
inline double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
        num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
        den += double(b[i]) * b[i];
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace moebench::test
