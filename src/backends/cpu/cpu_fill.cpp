// SPDX-License-Identifier: Apache-2.0
// Seeded fills: weights and inputs from core/moe_core.cuh's counter-based RNG, the same values the CUDA backend makes.
#include "backends/cpu/cpu_ops.hpp"

#include "core/moe_core.cuh"

#include <cstdint>

namespace moebench::cpu {

void fill_uniform(ThreadPool& pool, float* dst, int64_t n, uint64_t base, uint64_t first_index, float scale,
                  float offset) {
    pool.parallel_for(
        n,
        [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i)
                dst[i] = offset + scale * core::uniform_pm1(base, first_index + static_cast<uint64_t>(i));
        },
        1 << 16);
}

}  // namespace moebench::cpu
