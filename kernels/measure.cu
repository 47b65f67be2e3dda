// SPDX-License-Identifier: Apache-2.0
// Read kernels: the bandwidth probe of `moebench devices --measure` (streaming loads) and the cold-L2 flush (loads that
// allocate in L2). 16-byte loads, grid-stride, an XOR checksum so nothing is elided.
#include "kernels/common.cuh"

namespace moebench::kernels {
namespace {

// kStreaming: __ldcs (evict first: measures the memory, keeps L2 out of it); else ordinary loads, so every line read
// displaces an older one in L2.
template <bool kStreaming>
__global__ void read_kernel(const uint4* src, size_t n_vec, unsigned long long* sink) {
    unsigned x = 0;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n_vec; i += size_t(gridDim.x) * blockDim.x) {
        const uint4 v = kStreaming ? __ldcs(src + i) : src[i];
        x ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    // The branch is almost never taken; it only keeps the loads alive.
    if (x == 0x9E3779B9u) atomicAdd(sink, 1ull);
}

template <bool kStreaming>
void launch_read(const void* src, size_t bytes, unsigned long long* sink, int num_sms, cudaStream_t stream) {
    const size_t n_vec = bytes / sizeof(uint4);
    if (n_vec == 0) return;
    const unsigned blocks = static_cast<unsigned>(std::max(1, num_sms) * 8);
    read_kernel<kStreaming><<<blocks, 512, 0, stream>>>(static_cast<const uint4*>(src), n_vec, sink);
    MOEBENCH_LAUNCH_CHECK();
}

}  // namespace

void launch_read_bytes(const void* src, size_t bytes, unsigned long long* sink, int num_sms, cudaStream_t stream) {
    launch_read<true>(src, bytes, sink, num_sms, stream);
}

void launch_l2_flush(const void* src, size_t bytes, unsigned long long* sink, int num_sms, cudaStream_t stream) {
    launch_read<false>(src, bytes, sink, num_sms, stream);
}

}  // namespace moebench::kernels
