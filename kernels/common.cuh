// SPDX-License-Identifier: Apache-2.0
// Small device helpers shared by kernels/*.cu: launch checks, grid sizing, warp and block reductions.
#pragma once
#include "kernels/cuda_check.hpp"
#include "kernels/launch.hpp"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

namespace moebench::kernels {

constexpr int kWarp = 32;

/// Blocks for a grid-stride loop over n items: enough to fill the GPU, capped (the loop covers the rest).
inline unsigned grid_for(int64_t n, int block) {
    const int64_t blocks = (n + block - 1) / block;
    return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(blocks, 65535 * 8)));
}

#define MOEBENCH_LAUNCH_CHECK() MOEBENCH_CUDA_CHECK(cudaGetLastError())

__device__ inline float warp_sum(float v) {
    for (int o = kWarp / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ inline float warp_max(float v) {
    for (int o = kWarp / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/// Sum over the block (blockDim.x a multiple of 32, <= 1024). `shm` holds 32 floats. Every thread gets the result.
__device__ inline float block_sum(float v, float* shm) {
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    v = warp_sum(v);
    __syncthreads();  // shm may still be read by a previous call
    if (lane == 0) shm[warp] = v;
    __syncthreads();
    const int num_warps = (blockDim.x + kWarp - 1) / kWarp;
    float t = lane < num_warps ? shm[lane] : 0.0f;
    return warp_sum(t);
}

__device__ inline float to_f(bf16 x) { return __bfloat162float(x); }
__device__ inline bf16 to_bf(float x) { return __float2bfloat16(x); }

/// Eight bf16 in one 16-byte word <-> eight floats (element q at the q-th 2 bytes, as memory holds them).
__device__ inline void unpack_bf16x8(const uint4& w, float* v) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&w);
    for (int q = 0; q < 4; ++q) {
        const float2 f = __bfloat1622float2(h[q]);
        v[2 * q] = f.x;
        v[2 * q + 1] = f.y;
    }
}
__device__ inline uint4 pack_bf16x8(const float* v) {
    uint4 w;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&w);
    for (int q = 0; q < 4; ++q) h[q] = __floats2bfloat162_rn(v[2 * q], v[2 * q + 1]);
    return w;
}

}  // namespace moebench::kernels
