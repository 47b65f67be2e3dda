// SPDX-License-Identifier: Apache-2.0
// The tiled expert GEMM: bf16 tensor cores (WMMA 16x16x16, fp32 accumulation) over the tile map the permutation
// leaves on the device (PermuteMaps::tile_offsets: kExpertTileRows rows of one expert per tile), so that any number
// of rows per expert runs without the host knowing the counts: a CUDA graph replays it whatever the routing.
// Deliberately simple (synchronous shared-memory staging, no cp.async or wgmma): it is the variant that never waits
// for the host, not the fastest; cuBLAS stays for speed where the counts may go to the host.
#include "kernels/common.cuh"

#include <mma.h>

namespace moebench::kernels {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kBM = static_cast<int>(kExpertTileRows);  // rows of a tile (one expert)
constexpr int kBN = 64;                                 // weight rows (output columns) of a tile
constexpr int kBK = 32;                                 // k per shared-memory stage
constexpr int kPad = 8;                                 // bf16 of padding per shared row (bank spread; ldm % 8 == 0)
constexpr int kThreads = 128;                           // 4 warps, each a 32 x 32 quarter of the 64 x 64 tile
constexpr int kLd = kBK + kPad;

// Expert of row tile `tile`: the last e with tile_offsets[e] <= tile (binary search over E + 1 entries).
__device__ inline int expert_of_tile(const int32_t* tile_offsets, int num_experts, int tile) {
    int lo = 0, hi = num_experts - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (tile_offsets[mid] <= tile)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

// fused: the tile's 64 weight rows are 32 gate rows (c0 ..) and the 32 up rows (n_cols + c0 ..) of the same
// columns, and the epilogue writes act(gate, up) for 32 columns; else 64 plain output columns.
template <bool kFused>
__global__ void __launch_bounds__(kThreads) expert_tiled_kernel(ExpertKernelArgs a) {
    __shared__ __align__(32) bf16 xs[kBM][kLd];
    __shared__ __align__(32) bf16 ws[kBN][kLd];
    __shared__ __align__(32) float cs[kBM][kBN + 4];
    const int warp = threadIdx.x / kWarp;
    const int64_t num_tiles = a.tile_offsets[a.num_experts];
    constexpr int kColsOut = kFused ? kBN / 2 : kBN;  // output columns per tile
    const int64_t col_blocks = (a.n_cols + kColsOut - 1) / kColsOut;
    const int64_t items = num_tiles * col_blocks;
    const int64_t w_rows = kFused ? 2 * a.n_cols : a.n_cols;
    for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
        const int tile = static_cast<int>(item / col_blocks);
        const int64_t c0 = (item % col_blocks) * kColsOut;
        const int e = expert_of_tile(a.tile_offsets, static_cast<int>(a.num_experts), tile);
        const int64_t row0 = a.offsets[e] + static_cast<int64_t>(tile - a.tile_offsets[e]) * kBM;
        const int64_t left = a.offsets[e + 1] - row0;
        const int rows = static_cast<int>(left < kBM ? left : kBM);
        const bf16* w_e = a.w + static_cast<int64_t>(e) * w_rows * a.k;
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
        for (int i = 0; i < 2; ++i)
            for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
        for (int64_t k0 = 0; k0 < a.k; k0 += kBK) {
            // Stage x rows [row0, row0 + kBM) and weight rows of this tile, k0 .. k0 + kBK, 8 bf16 per load; rows past
            // the expert's and k past the end are zeros.
            for (int v = threadIdx.x; v < (kBM + kBN) * (kBK / 8); v += kThreads) {
                const int r = v / (kBK / 8), c = (v % (kBK / 8)) * 8;
                const int64_t kk = k0 + c;
                uint4 val = make_uint4(0, 0, 0, 0);
                if (r < kBM) {
                    if (r < rows && kk < a.k) val = *reinterpret_cast<const uint4*>(a.x + (row0 + r) * a.k + kk);
                    *reinterpret_cast<uint4*>(&xs[r][c]) = val;
                } else {
                    const int j = r - kBM;
                    int64_t wr;
                    bool valid;
                    if (kFused) {  // 0..31 gate rows c0 + j, 32..63 up rows n_cols + c0 + (j - 32)
                        const int64_t col = c0 + (j % (kBN / 2));
                        valid = col < a.n_cols;
                        wr = (j < kBN / 2 ? 0 : a.n_cols) + col;
                    } else {
                        wr = c0 + j;
                        valid = wr < a.n_cols;
                    }
                    if (valid && kk < a.k) val = __ldg(reinterpret_cast<const uint4*>(w_e + wr * a.k + kk));
                    *reinterpret_cast<uint4*>(&ws[j][c]) = val;
                }
            }
            __syncthreads();
            const int wr0 = (warp / 2) * 32, wc0 = (warp % 2) * 32;  // this warp's 32 x 32 quarter
            for (int kk = 0; kk < kBK; kk += 16) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa[2];
                wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> fb[2];
                for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], &xs[wr0 + 16 * i][kk], kLd);
                // B = W^T: the weight rows [n][k] are B's columns, i.e. B in column-major with ld = kLd.
                for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], &ws[wc0 + 16 * j][kk], kLd);
                for (int i = 0; i < 2; ++i)
                    for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
            }
            __syncthreads();
        }
        {
            const int wr0 = (warp / 2) * 32, wc0 = (warp % 2) * 32;
            for (int i = 0; i < 2; ++i)
                for (int j = 0; j < 2; ++j)
                    wmma::store_matrix_sync(&cs[wr0 + 16 * i][wc0 + 16 * j], acc[i][j], kBN + 4, wmma::mem_row_major);
        }
        __syncthreads();
        for (int v = threadIdx.x; v < rows * kColsOut; v += kThreads) {
            const int r = v / kColsOut, j = v % kColsOut;
            const int64_t col = c0 + j;
            if (col >= a.n_cols) continue;
            float out;
            if (kFused) {
                float g = cs[r][j], u = cs[r][j + kBN / 2];
                if (a.bias) {
                    g += to_f(a.bias[static_cast<int64_t>(e) * 2 * a.n_cols + col]);
                    u += to_f(a.bias[static_cast<int64_t>(e) * 2 * a.n_cols + a.n_cols + col]);
                }
                out = core::activate(a.act, g, u, a.limit);
            } else {
                out = cs[r][j];
            }
            a.y[(row0 + r) * a.n_cols + col] = to_bf(out);
        }
        __syncthreads();  // cs and the stages are reused by the next item
    }
}

}  // namespace

void launch_expert_tiled(const ExpertKernelArgs& a, cudaStream_t stream) {
    MOEBENCH_CHECK(a.k > 0 && a.k % 8 == 0, "tiled expert GEMM: k = {} is not a multiple of 8", a.k);
    MOEBENCH_CHECK(a.slot_weights == nullptr, "tiled expert GEMM: slot weights are applied by the combine");
    if (a.num_experts <= 0 || a.n_cols <= 0) return;
    const unsigned grid = static_cast<unsigned>(std::max(1, a.grid_blocks));
    if (a.fused_up)
        expert_tiled_kernel<true><<<grid, kThreads, 0, stream>>>(a);
    else
        expert_tiled_kernel<false><<<grid, kThreads, 0, stream>>>(a);
    MOEBENCH_LAUNCH_CHECK();
}

int tiled_grid_blocks(int num_sms) {
    // The smaller residency of the two instantiations (their register counts differ), so both fill one wave.
    int fused = 0, plain = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fused, expert_tiled_kernel<true>, kThreads, 0) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&plain, expert_tiled_kernel<false>, kThreads, 0) != cudaSuccess) {
        cudaGetLastError();  // no device to ask: a safe guess
        fused = plain = 2;
    }
    return std::max(1, num_sms) * std::max(1, std::min(fused, plain));
}

}  // namespace moebench::kernels
