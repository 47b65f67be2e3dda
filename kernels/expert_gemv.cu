// SPDX-License-Identifier: Apache-2.0
// The decode expert kernel: few rows per expert, so the weights' bytes are the cost. Each warp streams two weight rows
// (gate and up of a column, or two down columns) once per group of kGemvRows rows with 16-byte loads, the rows of the
// expert read from L1/L2 beside it; blocks walk (active expert, column block) items from the device-side maps, so the
// launch needs no host count and the grid covers every SM whatever the routing.
#include "kernels/common.cuh"

namespace moebench::kernels {
namespace {

constexpr int kGemvWarps = 8;   // warps per block
constexpr int kGemvRows = 8;    // rows held in registers per pass; more rows take further passes over the weight row
constexpr int kGemvUnroll = 2;  // 16-byte weight loads per lane in flight per row (times two when fused)

__device__ inline float dot8(const float* a, const float* b) {
    float s = 0.0f;
#pragma unroll
    for (int q = 0; q < 8; ++q) s = fmaf(a[q], b[q], s);
    return s;
}

// Each warp streams two weight rows: gate and up of one column (fused), or two adjacent output columns (down), so
// every x load from L1 serves two rows of weights (with one row the x reads of 8 rows outrun L1 before HBM is busy).
template <bool kFused>
__global__ void __launch_bounds__(kGemvWarps* kWarp) expert_gemv_kernel(ExpertKernelArgs a) {
    constexpr int kCols = kFused ? 1 : 2;  // output columns per warp
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int64_t num_active = a.active[0];
    const int64_t cols_per_block = int64_t(kGemvWarps) * kCols;
    const int64_t col_blocks = (a.n_cols + cols_per_block - 1) / cols_per_block;
    const int64_t items = num_active * col_blocks;
    const int64_t w_rows = kFused ? 2 * a.n_cols : a.n_cols;  // weight rows per expert
    const int64_t step = int64_t(kWarp) * 8 * kGemvUnroll;    // k covered by one warp iteration
    for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
        const int e = a.active[1 + item / col_blocks];
        const int64_t col = (item % col_blocks) * cols_per_block + int64_t(warp) * kCols;
        if (col >= a.n_cols) continue;  // warp-uniform
        // Second weight row: fused, the up row of the same column; down, the next column (if there is one).
        const bool has_second = kFused || col + 1 < a.n_cols;
        const int64_t row0 = a.offsets[e], rows = a.offsets[e + 1] - row0;
        const bf16* w0 = a.w + (static_cast<int64_t>(e) * w_rows + col) * a.k;
        const bf16* w1 = kFused ? w0 + a.n_cols * a.k : w0 + a.k;
        // One pass reads the weight rows once: stream them past L2. More passes re-read them: keep them cached.
        const bool stream_w = rows <= kGemvRows;
        for (int64_t rb = 0; rb < rows; rb += kGemvRows) {
            const int nr = static_cast<int>(rows - rb < kGemvRows ? rows - rb : kGemvRows);
            const bf16* xr = a.x + (row0 + rb) * a.k;
            float acc0[kGemvRows], acc1[kGemvRows];
#pragma unroll
            for (int r = 0; r < kGemvRows; ++r) acc0[r] = acc1[r] = 0.0f;
            for (int64_t c0 = int64_t(lane) * 8; c0 < a.k; c0 += step) {
                // Issue every weight load of this iteration before using any (bytes in flight hide the latency).
                uint4 v0[kGemvUnroll], v1[kGemvUnroll];
#pragma unroll
                for (int u = 0; u < kGemvUnroll; ++u) {
                    const int64_t c = c0 + int64_t(u) * kWarp * 8;
                    v0[u] = v1[u] = make_uint4(0, 0, 0, 0);
                    if (c < a.k) {
                        const uint4* p0 = reinterpret_cast<const uint4*>(w0 + c);
                        const uint4* p1 = reinterpret_cast<const uint4*>(w1 + c);
                        v0[u] = stream_w ? __ldcs(p0) : __ldg(p0);
                        if (has_second) v1[u] = stream_w ? __ldcs(p1) : __ldg(p1);
                    }
                }
#pragma unroll
                for (int u = 0; u < kGemvUnroll; ++u) {
                    const int64_t c = c0 + int64_t(u) * kWarp * 8;
                    if (c >= a.k) break;
                    float f0[8], f1[8], xf[8];
                    unpack_bf16x8(v0[u], f0);
                    unpack_bf16x8(v1[u], f1);
#pragma unroll
                    for (int r = 0; r < kGemvRows; ++r) {
                        if (r < nr) {
                            unpack_bf16x8(__ldg(reinterpret_cast<const uint4*>(xr + r * a.k + c)), xf);
                            acc0[r] += dot8(xf, f0);
                            acc1[r] += dot8(xf, f1);
                        }
                    }
                }
            }
#pragma unroll
            for (int r = 0; r < kGemvRows; ++r) {
                if (r >= nr) break;  // nr is warp-uniform
                const float s0 = warp_sum(acc0[r]);
                const float s1 = warp_sum(acc1[r]);
                if (lane != 0) continue;
                const int64_t row = row0 + rb + r;
                if (kFused) {
                    float g = s0, u = s1;
                    if (a.bias) {
                        g += to_f(a.bias[static_cast<int64_t>(e) * 2 * a.n_cols + col]);
                        u += to_f(a.bias[static_cast<int64_t>(e) * 2 * a.n_cols + a.n_cols + col]);
                    }
                    a.y[row * a.n_cols + col] = to_bf(core::activate(a.act, g, u, a.limit));
                } else {
                    const float scale = a.slot_weights ? a.slot_weights[a.perm_slot[row]] : 1.0f;
                    a.y[row * a.n_cols + col] = to_bf(s0 * scale);
                    if (has_second) a.y[row * a.n_cols + col + 1] = to_bf(s1 * scale);
                }
            }
        }
    }
}

}  // namespace

bool gemv_supported(int64_t k) { return k > 0 && k % 8 == 0; }

int gemv_grid_blocks(int num_sms) {
    // As many blocks as stay resident (registers bound it), the smaller of the two instantiations; the grid walks the
    // items from there.
    int fused = 0, plain = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fused, expert_gemv_kernel<true>, kGemvWarps * kWarp, 0) !=
            cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&plain, expert_gemv_kernel<false>, kGemvWarps * kWarp, 0) !=
            cudaSuccess) {
        cudaGetLastError();  // no device to ask: a safe guess
        fused = plain = 2;
    }
    return std::max(1, num_sms) * std::max(1, std::min(fused, plain));
}

void launch_expert_gemv(const ExpertKernelArgs& a, cudaStream_t stream) {
    MOEBENCH_CHECK(gemv_supported(a.k), "expert gemv: k = {} is not a multiple of 8", a.k);
    if (a.num_experts <= 0 || a.n_cols <= 0) return;
    const unsigned grid = static_cast<unsigned>(std::max(1, a.grid_blocks));
    if (a.fused_up)
        expert_gemv_kernel<true><<<grid, kGemvWarps * kWarp, 0, stream>>>(a);
    else
        expert_gemv_kernel<false><<<grid, kGemvWarps * kWarp, 0, stream>>>(a);
    MOEBENCH_LAUNCH_CHECK();
}

}  // namespace moebench::kernels
