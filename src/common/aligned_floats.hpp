// SPDX-License-Identifier: Apache-2.0
// Cache-line-aligned float arrays for buffers that vector loads stream through (weights, the read-bandwidth
// buffer): a 64-byte load at an unaligned address straddles two lines, and on an AMD EPYC (Zen 5) KVM guest that
// cut a 2-thread streaming read from 64-72 GB/s to 45 (malloc's large blocks start 16 bytes into a page).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

namespace moebench {

inline constexpr std::size_t kCacheLineBytes = 64;

struct AlignedFloatsDelete {
    void operator()(float* q) const { ::operator delete[](q, std::align_val_t(kCacheLineBytes)); }
};
/// Uninitialised (no zero-fill, so that the owner can first-touch pages on the threads that will use them).
using AlignedFloats = std::unique_ptr<float[], AlignedFloatsDelete>;

inline AlignedFloats alloc_aligned_floats(int64_t count) {
    if (count <= 0) return AlignedFloats();
    return AlignedFloats(static_cast<float*>(
        ::operator new[](sizeof(float) * static_cast<std::size_t>(count), std::align_val_t(kCacheLineBytes))));
}

}  // namespace moebench
