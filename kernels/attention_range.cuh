// SPDX-License-Identifier: Apache-2.0
// The keys a query sees, shared by the split-context and the flash attention kernels (host twin: cpu_ops.cpp
// first_key).
#pragma once
#include "kernels/launch.hpp"

namespace moebench::kernels {

// First key a query at `pos` sees: the sliding window and Llama-4's chunked local attention. Non-decreasing in pos,
// so a run of queries sees keys from first_key(first query) on.
__device__ inline int64_t first_key(const AttentionArgs& a, int64_t pos) {
    int64_t lo = 0;
    if (a.window > 0) lo = max(lo, pos - a.window + 1);
    if (a.local_chunk > 0) lo = max(lo, (pos / a.local_chunk) * a.local_chunk);
    return lo;
}

}  // namespace moebench::kernels
