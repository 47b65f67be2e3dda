// SPDX-License-Identifier: Apache-2.0
// Read-bandwidth kernel for `moebench devices --measure`: 16-byte loads, grid-stride, XOR checksum so nothing is elided.
#include "kernels/common.cuh"

namespace moebench::kernels {
namespace {

__global__ void read_bytes_kernel(const uint4* src, size_t n_vec, unsigned long long* sink) {
    unsigned x = 0;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n_vec; i += size_t(gridDim.x) * blockDim.x) {
        const uint4 v = __ldcs(src + i);  // streaming load: do not keep in L2
        x ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    // The branch is almost never taken; it only keeps the loads alive.
    if (x == 0x9E3779B9u) atomicAdd(sink, 1ull);
}

// Reads through L2 with ordinary (allocating) loads: every line read displaces an older one.
__global__ void l2_flush_kernel(const uint4* src, size_t n_vec, unsigned long long* sink) {
    unsigned x = 0;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n_vec; i += size_t(gridDim.x) * blockDim.x) {
        const uint4 v = src[i];
        x ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (x == 0x9E3779B9u) atomicAdd(sink, 1ull);
}

}  // namespace

void launch_l2_flush(const void* src, size_t bytes, unsigned long long* sink, int num_sms, cudaStream_t stream) {
    const size_t n_vec = bytes / sizeof(uint4);
    if (n_vec == 0) return;
    const unsigned blocks = static_cast<unsigned>(std::max(1, num_sms) * 8);
    l2_flush_kernel<<<blocks, 512, 0, stream>>>(static_cast<const uint4*>(src), n_vec, sink);
    MOEBENCH_LAUNCH_CHECK();
}

void launch_read_bytes(const void* src, size_t bytes, unsigned long long* sink, int num_sms, cudaStream_t stream) {
    const size_t n_vec = bytes / sizeof(uint4);
    if (n_vec == 0) return;
    const unsigned blocks = static_cast<unsigned>(std::max(1, num_sms) * 8);
    read_bytes_kernel<<<blocks, 512, 0, stream>>>(static_cast<const uint4*>(src), n_vec, sink);
    MOEBENCH_LAUNCH_CHECK();
}

}  // namespace moebench::kernels
