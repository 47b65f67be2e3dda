// SPDX-License-Identifier: Apache-2.0
// MoE kernels: router scoring + top-k (moe_core route_row), deterministic permutation by expert (counts, offsets,
// scatter, capacity drops), row gather, the family's activation, weighted combine with residual, shared-expert gate.
#include "kernels/common.cuh"
#include "core/moe_core.cuh"

#include <cub/block/block_scan.cuh>

namespace moebench::kernels {
namespace {

// ---- top-k ------------------------------------------------------------------------------------------------------
// One thread per token: the row semantics are moe_core's route_row / soft_topn_row, run verbatim, so the CPU and
// the GPU choose the same experts by construction (same code, same tie-break). Per-token scratch lives in global
// memory (E up to 384 does not fit in registers). Steps: 1) biased logits into scratch; 2) route; 3) write ids/weights.
__global__ void topk_thread_kernel(const float* logits, const float* bias, const float* correction,
                                   core::RouteParams p, int soft_topn, int64_t num_tokens, int32_t* ids,
                                   float* weights, float* scratch, int64_t scratch_per_token) {
    const int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
    if (t >= num_tokens) return;
    const int E = p.num_experts;
    float* s = scratch + t * scratch_per_token;
    float* row = s;          // [E] logits (+ router bias)
    float* work = s + E;     // route_scratch_floats(E, G)
    for (int e = 0; e < E; ++e) row[e] = logits[t * E + e] + (bias ? bias[e] : 0.0f);
    if (soft_topn > 0) {
        core::soft_topn_row(row, E, soft_topn, work, ids + t * soft_topn, weights + t * soft_topn);
    } else {
        core::route_row(p, row, correction, work, ids + t * p.top_k, weights + t * p.top_k);
    }
}

// ---- permutation ----------------------------------------------------------------------------------------------
// 1) one block per expert counts its assignments (integer sum: exact at any size).
__global__ void count_kernel(const int32_t* ids, int64_t num_assign, int32_t* raw_counts) {
    __shared__ int total;
    const int e = blockIdx.x;
    if (threadIdx.x == 0) total = 0;
    __syncthreads();
    int local = 0;
    for (int64_t a = threadIdx.x; a < num_assign; a += blockDim.x) local += (ids[a] == e);
    local = __reduce_add_sync(0xffffffffu, local);  // blockDim.x is a multiple of 32: every lane is active here
    if (threadIdx.x % kWarp == 0 && local) atomicAdd(&total, local);
    __syncthreads();
    if (threadIdx.x == 0) raw_counts[e] = total;
}

// 2) one thread: capacity clamp, drops, exclusive offsets (E <= a few hundred: a serial loop is the simplest exact form).
__global__ void offsets_kernel(const int32_t* raw_counts, int num_experts, int64_t capacity, int32_t* counts,
                               int32_t* offsets, int32_t* dropped) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    int32_t total_dropped = 0, off = 0;
    for (int e = 0; e < num_experts; ++e) {
        int32_t c = raw_counts[e];
        if (capacity >= 0 && c > capacity) {
            total_dropped += c - static_cast<int32_t>(capacity);
            c = static_cast<int32_t>(capacity);
        }
        counts[e] = c;
        offsets[e] = off;
        off += c;
    }
    offsets[num_experts] = off;
    *dropped = total_dropped;
}

// 3) one block per expert walks the assignments in order; a block scan ranks the matches, so the row of each
// assignment is offsets[e] + (matches before it), exactly moe_core::permuted_row. Ranks >= capacity are dropped.
constexpr int kScatterThreads = 256;
__global__ void scatter_kernel(int32_t* ids, float* weights, int64_t num_assign, int64_t capacity,
                               const int32_t* offsets, int32_t* perm_slot, int32_t* perm_expert, int32_t* slot_pos) {
    using Scan = cub::BlockScan<int, kScatterThreads>;
    __shared__ typename Scan::TempStorage temp;
    __shared__ int base_shared;
    const int e = blockIdx.x;
    if (threadIdx.x == 0) base_shared = 0;
    __syncthreads();
    for (int64_t start = 0; start < num_assign; start += kScatterThreads) {
        const int64_t a = start + threadIdx.x;
        const int match = (a < num_assign && ids[a] == e) ? 1 : 0;
        int rank = 0, chunk_total = 0;
        Scan(temp).ExclusiveSum(match, rank, chunk_total);
        const int base = base_shared;
        if (match) {
            const int64_t r = base + rank;
            if (capacity >= 0 && r >= capacity) {
                ids[a] = -1;
                weights[a] = 0.0f;
                slot_pos[a] = -1;
            } else {
                const int32_t row = offsets[e] + static_cast<int32_t>(r);
                slot_pos[a] = row;
                perm_slot[row] = static_cast<int32_t>(a);
                perm_expert[row] = e;
            }
        }
        __syncthreads();  // everyone read base_shared and temp
        if (threadIdx.x == 0) base_shared = base + chunk_total;
        __syncthreads();
    }
}

// One block per permuted row; 16-byte copies when the row allows it.
__global__ void gather_rows_kernel(const bf16* x, const int32_t* perm_slot, const float* weights, bool scale_by_weight,
                                   bf16* x_perm, int64_t k, int64_t hidden) {
    const int64_t r = blockIdx.x;
    const int32_t slot = perm_slot[r];
    const int64_t t = slot / k;
    const bf16* src = x + t * hidden;
    bf16* dst = x_perm + r * hidden;
    if (scale_by_weight) {
        const float w = weights[slot];
        for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) dst[c] = to_bf(to_f(src[c]) * w);
    } else if (hidden % 8 == 0) {
        const uint4* s4 = reinterpret_cast<const uint4*>(src);
        uint4* d4 = reinterpret_cast<uint4*>(dst);
        for (int64_t c = threadIdx.x; c < hidden / 8; c += blockDim.x) d4[c] = s4[c];
    } else {
        for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) dst[c] = src[c];
    }
}

__global__ void activation_kernel(const bf16* h, bf16* a, int64_t rows, int64_t inter, int act, float limit,
                                  const bf16* bias, const int32_t* row_expert) {
    const int64_t n = rows * inter;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t r = i / inter, c = i % inter;
        float g = to_f(h[r * 2 * inter + c]);
        float u = to_f(h[r * 2 * inter + inter + c]);
        if (bias) {
            const int64_t e = row_expert ? row_expert[r] : 0;
            g += to_f(bias[e * 2 * inter + c]);
            u += to_f(bias[e * 2 * inter + inter + c]);
        }
        a[i] = to_bf(core::activate(act, g, u, limit));
    }
}

// One block per token; threads over hidden. The k-way sum runs in fp32 in slot order (j = 0..k-1), as the CPU does.
__global__ void combine_kernel(const bf16* y_perm, const int32_t* slot_pos, const int32_t* ids, const float* weights,
                               bool unit_weights, const bf16* down_bias, const bf16* shared,
                               const float* shared_gate_logit, bf16* moe_out, bf16* residual, int64_t k,
                               int64_t hidden) {
    const int64_t t = blockIdx.x;
    const float sg = shared_gate_logit ? core::sigmoidf_(shared_gate_logit[t]) : 1.0f;
    for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) {
        float acc = 0.0f;
        for (int64_t j = 0; j < k; ++j) {
            const int64_t a = t * k + j;
            const int32_t row = slot_pos[a];
            if (row < 0) continue;
            float v = to_f(y_perm[static_cast<int64_t>(row) * hidden + c]);
            if (down_bias) v += to_f(down_bias[static_cast<int64_t>(ids[a]) * hidden + c]);
            acc += (unit_weights ? 1.0f : weights[a]) * v;
        }
        if (shared) acc += sg * to_f(shared[t * hidden + c]);
        const bf16 out = to_bf(acc);
        moe_out[t * hidden + c] = out;
        if (residual) residual[t * hidden + c] = to_bf(to_f(residual[t * hidden + c]) + to_f(out));
    }
}

// One warp per token.
__global__ void row_dot_kernel(const bf16* x, const bf16* w, float* logit, int64_t num_tokens, int64_t hidden) {
    const int64_t t = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / kWarp;
    const int lane = threadIdx.x % kWarp;
    if (t >= num_tokens) return;
    float s = 0.0f;
    for (int64_t c = lane; c < hidden; c += kWarp) s += to_f(x[t * hidden + c]) * to_f(w[c]);
    s = warp_sum(s);
    if (lane == 0) logit[t] = s;
}

}  // namespace

int64_t topk_scratch_floats(int64_t num_experts, int64_t num_groups) {
    return num_experts + core::route_scratch_floats(static_cast<int>(num_experts),
                                                    static_cast<int>(num_groups < 1 ? 1 : num_groups));
}

const char* launch_topk(const float* logits, const float* bias, const float* correction, const RoutingParams& p,
                        int64_t num_tokens, int32_t* ids, float* weights, float* scratch, cudaStream_t stream) {
    if (num_tokens <= 0) return "topk_thread_per_token";
    const core::RouteParams& rp = p.route;
    MOEBENCH_CHECK(rp.topk_groups <= 64, "topk_groups {} > 64 is not supported by moe_core", rp.topk_groups);
    const int block = 128;
    const unsigned grid = static_cast<unsigned>((num_tokens + block - 1) / block);
    topk_thread_kernel<<<grid, block, 0, stream>>>(logits, bias, correction, rp, p.soft_topn, num_tokens, ids, weights,
                                                   scratch, topk_scratch_floats(rp.num_experts, rp.num_groups));
    MOEBENCH_LAUNCH_CHECK();
    return p.soft_topn > 0 ? "soft_topn_thread_per_token" : "topk_thread_per_token";
}

void launch_permute_index(int32_t* ids, float* weights, int64_t num_tokens, int64_t k, int64_t num_experts,
                          int64_t capacity, int32_t* raw_counts, int32_t* counts, int32_t* offsets, int32_t* perm_slot,
                          int32_t* perm_expert, int32_t* slot_pos, int32_t* dropped, cudaStream_t stream) {
    const int64_t num_assign = num_tokens * k;
    MOEBENCH_CUDA_CHECK(cudaMemsetAsync(slot_pos, 0xFF, static_cast<size_t>(num_assign) * sizeof(int32_t), stream));
    if (num_experts <= 0) return;
    count_kernel<<<static_cast<unsigned>(num_experts), 256, 0, stream>>>(ids, num_assign, raw_counts);
    MOEBENCH_LAUNCH_CHECK();
    offsets_kernel<<<1, 32, 0, stream>>>(raw_counts, static_cast<int>(num_experts), capacity, counts, offsets, dropped);
    MOEBENCH_LAUNCH_CHECK();
    scatter_kernel<<<static_cast<unsigned>(num_experts), kScatterThreads, 0, stream>>>(
        ids, weights, num_assign, capacity, offsets, perm_slot, perm_expert, slot_pos);
    MOEBENCH_LAUNCH_CHECK();
}

void launch_gather_rows(const bf16* x, const int32_t* perm_slot, const float* weights, bool scale_by_weight,
                        bf16* x_perm, int64_t num_rows, int64_t k, int64_t hidden, cudaStream_t stream) {
    if (num_rows <= 0) return;
    gather_rows_kernel<<<static_cast<unsigned>(num_rows), 128, 0, stream>>>(x, perm_slot, weights, scale_by_weight,
                                                                            x_perm, k, hidden);
    MOEBENCH_LAUNCH_CHECK();
}

void launch_activation(const bf16* h, bf16* a, int64_t rows, int64_t inter, int act, float limit, const bf16* bias,
                       const int32_t* row_expert, cudaStream_t stream) {
    if (rows * inter <= 0) return;
    activation_kernel<<<grid_for(rows * inter, 256), 256, 0, stream>>>(h, a, rows, inter, act, limit, bias,
                                                                       row_expert);
    MOEBENCH_LAUNCH_CHECK();
}

void launch_combine(const bf16* y_perm, const int32_t* slot_pos, const int32_t* ids, const float* weights,
                    bool unit_weights, const bf16* down_bias, const bf16* shared, const float* shared_gate_logit,
                    bf16* moe_out, bf16* residual, int64_t num_tokens, int64_t k, int64_t hidden,
                    cudaStream_t stream) {
    if (num_tokens <= 0) return;
    combine_kernel<<<static_cast<unsigned>(num_tokens), 256, 0, stream>>>(y_perm, slot_pos, ids, weights, unit_weights,
                                                                          down_bias, shared, shared_gate_logit,
                                                                          moe_out, residual, k, hidden);
    MOEBENCH_LAUNCH_CHECK();
}

void launch_row_dot(const bf16* x, const bf16* w, float* logit, int64_t num_tokens, int64_t hidden,
                    cudaStream_t stream) {
    if (num_tokens <= 0) return;
    const int block = 256;
    const int64_t threads = num_tokens * kWarp;
    row_dot_kernel<<<static_cast<unsigned>((threads + block - 1) / block), block, 0, stream>>>(x, w, logit, num_tokens,
                                                                                              hidden);
    MOEBENCH_LAUNCH_CHECK();
}

}  // namespace moebench::kernels
