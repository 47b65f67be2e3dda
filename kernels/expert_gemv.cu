// SPDX-License-Identifier: Apache-2.0
// The decode expert kernel: few rows per expert, so the weights' bytes are the cost. Each warp streams one weight row
// (two for the fused gate/up) once per group of kGemvRows rows with 16-byte loads, the rows of the expert read from
// L1/L2 beside it; blocks walk (active expert, column block) items from the device-side maps, so the launch needs no
// host count and the grid covers every SM whatever the routing.
#include "kernels/common.cuh"

namespace moebench::kernels {
namespace {

constexpr int kGemvWarps = 8;  // output columns per block (one per warp)
constexpr int kGemvRows = 8;   // rows held in registers per pass; more rows take further passes over the weight row
constexpr int kGemvUnroll = 2; // 16-byte weight loads per lane in flight per row (times two when fused)

__device__ inline float dot8(const float* a, const float* b) {
    float s = 0.0f;
#pragma unroll
    for (int q = 0; q < 8; ++q) s = fmaf(a[q], b[q], s);
    return s;
}

template <bool kFused>
__global__ void __launch_bounds__(kGemvWarps * kWarp) expert_gemv_kernel(ExpertGemvArgs a) {
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int64_t num_active = a.active[0];
    const int64_t col_blocks = (a.n_cols + kGemvWarps - 1) / kGemvWarps;
    const int64_t items = num_active * col_blocks;
    const int64_t w_rows = kFused ? 2 * a.n_cols : a.n_cols;  // weight rows per expert
    const int64_t step = int64_t(kWarp) * 8 * kGemvUnroll;     // k covered by one warp iteration
    for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
        const int e = a.active[1 + item / col_blocks];
        const int64_t col = (item % col_blocks) * kGemvWarps + warp;
        if (col >= a.n_cols) continue;  // warp-uniform
        const int64_t row0 = a.offsets[e], rows = a.offsets[e + 1] - row0;
        const bf16* wg = a.w + (static_cast<int64_t>(e) * w_rows + col) * a.k;
        const bf16* wu = wg + a.n_cols * a.k;  // fused: the up row of the same column
        // One pass reads the weight row once: stream it past L2. More passes re-read it: keep it cached.
        const bool stream_w = rows <= kGemvRows;
        for (int64_t rb = 0; rb < rows; rb += kGemvRows) {
            const int nr = static_cast<int>(rows - rb < kGemvRows ? rows - rb : kGemvRows);
            const bf16* xr = a.x + (row0 + rb) * a.k;
            float acc_g[kGemvRows], acc_u[kGemvRows];
#pragma unroll
            for (int r = 0; r < kGemvRows; ++r) acc_g[r] = acc_u[r] = 0.0f;
            for (int64_t c0 = int64_t(lane) * 8; c0 < a.k; c0 += step) {
                // Issue every weight load of this iteration before using any (bytes in flight hide the latency).
                uint4 wv[kGemvUnroll], uv[kGemvUnroll];
#pragma unroll
                for (int u = 0; u < kGemvUnroll; ++u) {
                    const int64_t c = c0 + int64_t(u) * kWarp * 8;
                    if (c < a.k) {
                        const uint4* pg = reinterpret_cast<const uint4*>(wg + c);
                        const uint4* pu = reinterpret_cast<const uint4*>(wu + c);
                        wv[u] = stream_w ? __ldcs(pg) : __ldg(pg);
                        if (kFused) uv[u] = stream_w ? __ldcs(pu) : __ldg(pu);
                    }
                }
#pragma unroll
                for (int u = 0; u < kGemvUnroll; ++u) {
                    const int64_t c = c0 + int64_t(u) * kWarp * 8;
                    if (c >= a.k) break;
                    float wf[8], uf[8], xf[8];
                    unpack_bf16x8(wv[u], wf);
                    if (kFused) unpack_bf16x8(uv[u], uf);
#pragma unroll
                    for (int r = 0; r < kGemvRows; ++r) {
                        if (r < nr) {
                            unpack_bf16x8(__ldg(reinterpret_cast<const uint4*>(xr + r * a.k + c)), xf);
                            acc_g[r] += dot8(xf, wf);
                            if (kFused) acc_u[r] += dot8(xf, uf);
                        }
                    }
                }
            }
#pragma unroll
            for (int r = 0; r < kGemvRows; ++r) {
                if (r >= nr) break;  // nr is warp-uniform
                const float g = warp_sum(acc_g[r]);
                const float u = kFused ? warp_sum(acc_u[r]) : 0.0f;
                if (lane != 0) continue;
                const int64_t row = row0 + rb + r;
                float out;
                if (kFused) {
                    float gb = g, ub = u;
                    if (a.bias) {
                        gb += to_f(a.bias[static_cast<int64_t>(e) * 2 * a.n_cols + col]);
                        ub += to_f(a.bias[static_cast<int64_t>(e) * 2 * a.n_cols + a.n_cols + col]);
                    }
                    out = core::activate(a.act, gb, ub, a.limit);
                } else {
                    out = a.slot_weights ? g * a.slot_weights[a.perm_slot[row]] : g;
                }
                a.y[row * a.n_cols + col] = to_bf(out);
            }
        }
    }
}

}  // namespace

bool gemv_supported(int64_t k) { return k > 0 && k % 8 == 0; }

int gemv_grid_blocks(int num_sms) {
    // 256-thread blocks, 8 resident per SM at full occupancy (2048 threads); the grid walks the items from there.
    return std::max(1, num_sms) * (2048 / (kGemvWarps * kWarp));
}

void launch_expert_gemv(const ExpertGemvArgs& a, cudaStream_t stream) {
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
