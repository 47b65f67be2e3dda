// SPDX-License-Identifier: Apache-2.0
// Device-side weight and input generation with moe_core.cuh's RNG (no host copies of large tensors), and conversions.
#include "core/moe_core.cuh"
#include "kernels/common.cuh"

namespace moebench::kernels {
namespace {

__global__ void fill_bf16_kernel(bf16* dst, int64_t n, uint64_t base, uint64_t first, float scale, float offset) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        dst[i] = to_bf(offset + scale * core::uniform_pm1(base, first + static_cast<uint64_t>(i)));
}

__global__ void fill_f32_kernel(float* dst, int64_t n, uint64_t base, uint64_t first, float scale, float offset) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        dst[i] = offset + scale * core::uniform_pm1(base, first + static_cast<uint64_t>(i));
}

__global__ void fill_ids_kernel(int32_t* dst, int64_t n, int64_t vocab, uint64_t base) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        dst[i] = static_cast<int32_t>(core::mix64(base + static_cast<uint64_t>(i)) % static_cast<uint64_t>(vocab));
}

__global__ void f32_to_bf16_kernel(const float* src, bf16* dst, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        dst[i] = to_bf(src[i]);
}

__global__ void bf16_to_f32_kernel(const bf16* src, float* dst, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        dst[i] = to_f(src[i]);
}

}  // namespace

void launch_fill_bf16(bf16* dst, int64_t n, uint64_t base, uint64_t first_index, float scale, float offset,
                      cudaStream_t stream) {
    if (n <= 0) return;
    fill_bf16_kernel<<<grid_for(n, 256), 256, 0, stream>>>(dst, n, base, first_index, scale, offset);
    MOEBENCH_LAUNCH_CHECK();
}

void launch_fill_f32(float* dst, int64_t n, uint64_t base, uint64_t first_index, float scale, float offset,
                     cudaStream_t stream) {
    if (n <= 0) return;
    fill_f32_kernel<<<grid_for(n, 256), 256, 0, stream>>>(dst, n, base, first_index, scale, offset);
    MOEBENCH_LAUNCH_CHECK();
}

void launch_fill_token_ids(int32_t* dst, int64_t n, int64_t vocab, uint64_t base, cudaStream_t stream) {
    if (n <= 0 || vocab <= 0) return;
    fill_ids_kernel<<<grid_for(n, 256), 256, 0, stream>>>(dst, n, vocab, base);
    MOEBENCH_LAUNCH_CHECK();
}

void launch_f32_to_bf16(const float* src, bf16* dst, int64_t n, cudaStream_t stream) {
    if (n <= 0) return;
    f32_to_bf16_kernel<<<grid_for(n, 256), 256, 0, stream>>>(src, dst, n);
    MOEBENCH_LAUNCH_CHECK();
}

void launch_bf16_to_f32(const bf16* src, float* dst, int64_t n, cudaStream_t stream) {
    if (n <= 0) return;
    bf16_to_f32_kernel<<<grid_for(n, 256), 256, 0, stream>>>(src, dst, n);
    MOEBENCH_LAUNCH_CHECK();
}

}  // namespace moebench::kernels
