// SPDX-License-Identifier: Apache-2.0
// Prefill attention on tensor cores (flash-attention style): a block holds 64 queries of one head of one sequence,
// walks the keys they see in tiles of 64 (causal, window, local chunk), and keeps a running softmax (max, sum) and
// the output in shared memory, so nothing goes through a workspace and each K/V tile is read once per 64 queries
// instead of once per query. Scores and P.V on WMMA 16x16x16 bf16 with fp32 accumulation; P is rounded to bf16 for
// the P.V product, as flash-attention does. Decode (one query per sequence) runs split over the context
// (attention.cu; MLA's latent cache on tensor cores in attention_latent.cu).
#include "kernels/attention_range.cuh"
#include "kernels/attention_tile.cuh"

#include <cmath>

namespace moebench::kernels {
namespace {

using namespace attn_tile;

constexpr int kFlashMaxDim = 256;     // dk and dv (the output tile of a warp lives in shared memory)
constexpr int kFlashMinQueries = 16;  // automatic: fewer queries per sequence than this stay on the split kernel

// Queries and keys both in tiles of 64, a separate value tile.
__host__ __device__ inline TileLayout flash_layout(int dk, int dv) { return TileLayout(dk, dv, kRows, true); }

// Grid: x = sequence * query tiles per sequence + tile, y = head. Block: 4 warps; warp w owns query rows 16w..16w+15.
// Keys come in tiles of 64 (kRows).
__global__ void __launch_bounds__(kThreads) attention_flash_kernel(AttentionArgs a) {
    extern __shared__ __align__(128) unsigned char flash_smem[];
    const int dk = static_cast<int>(a.dk), dv = static_cast<int>(a.dv);
    const TileLayout L = flash_layout(dk, dv);
    const TileSmem S(flash_smem, L);

    const int64_t tps = a.tokens_per_seq;
    const int64_t tiles_per_seq = (tps + kRows - 1) / kRows;
    const int64_t b = blockIdx.x / tiles_per_seq, s0 = (blockIdx.x % tiles_per_seq) * kRows;
    const int64_t h = blockIdx.y, g = h / (a.num_heads / a.num_kv_heads);
    const int nq = static_cast<int>(min(int64_t(kRows), tps - s0));
    const int64_t t0 = b * tps + s0;         // token index of query row 0
    const int64_t pos0 = a.pos_base + s0;    // its position
    const int64_t pos_last = pos0 + nq - 1;  // the last key any row of the tile sees
    const int lane = threadIdx.x % kWarp, r0 = (threadIdx.x / kWarp) * 16;

    stage_rows(S.q, L.ld_qk, a.q + t0 * a.q_token_stride + h * a.q_head_stride, a.q_token_stride, nq, dk, kRows);
    for (int i = threadIdx.x; i < kRows * dv; i += kThreads) S.o[(i / dv) * L.ld_o + i % dv] = 0.0f;
    for (int r = threadIdx.x; r < kRows; r += kThreads) {
        S.m[r] = -INFINITY;
        S.l[r] = 0.0f;
    }

    const bf16* k_base = a.k + b * a.cache_len * a.kv_row_stride + g * a.kv_head_stride;
    const bf16* v_base = a.v + b * a.cache_len * a.kv_row_stride + g * a.kv_head_stride;
    for (int64_t kb = first_key(a, pos0); kb <= pos_last; kb += kRows) {
        const int nk = static_cast<int>(min(int64_t(kRows), pos_last + 1 - kb));
        __syncthreads();  // the previous tile's K/V (and, first time, nothing) is no longer read
        stage_rows(S.k, L.ld_qk, k_base + kb * a.kv_row_stride, a.kv_row_stride, nk, dk, kRows);
        stage_rows(S.v, L.ld_v, v_base + kb * a.kv_row_stride, a.kv_row_stride, nk, dv, kRows);
        __syncthreads();
        warp_scores<kRows>(S.q, L.ld_qk, S.k, L.ld_qk, dk, S.s, L.ld_s, r0);
        __syncwarp();
        // Row r sees key kb + c when it is in the tile, in the row's window / chunk, and not after the row (causal).
        warp_online_softmax<kRows>(S.s, L.ld_s, S.p, L.ld_p, S.m, S.l, S.alpha, r0, a.scale, [&](int r, int c) {
            const int64_t pos = pos0 + r, key = kb + c;
            return r < nq && c < nk && key >= first_key(a, pos) && key <= pos;
        });
        warp_rescale_pv<kRows>(S.p, L.ld_p, S.v, L.ld_v, S.o, L.ld_o, S.alpha, r0, dv);
    }
    __syncwarp();

    // out = O e^(m - M) / (l e^(m - M) + e^(sink - M)), M = max(m, sink): the split kernel's merge for one split.
    for (int rr = 0; rr < 16; ++rr) {
        const int r = r0 + rr;
        if (r >= nq) break;
        const float m = S.m[r], l = S.l[r];
        const float sink = a.sinks ? a.sinks[h] : -INFINITY;
        const float M = fmaxf(m, sink);
        const float keep = m == -INFINITY ? 0.0f : __expf(m - M);
        const float denom = l * keep + (a.sinks ? __expf(sink - M) : 0.0f);
        const float inv = denom > 0.0f ? keep / denom : 0.0f;
        bf16* out = a.out + ((t0 + r) * a.num_heads + h) * a.dv;
        for (int c = lane; c < dv; c += kWarp) out[c] = to_bf(S.o[r * L.ld_o + c] * inv);
    }
}

}  // namespace

namespace attn_tile {

int max_optin_smem_bytes() {
    static const int bytes = [] {
        int dev = 0, v = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
            (void)cudaGetLastError();
            return 48 * 1024;
        }
        return v;
    }();
    return bytes;
}

void allow_smem(const void* kernel, int64_t bytes, int64_t* allowed) {
    if (bytes <= std::max<int64_t>(*allowed, 48 * 1024)) return;
    MOEBENCH_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
    *allowed = bytes;
}

bool rows_aligned(const AttentionArgs& a) {
    const auto aligned16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    const bool strides =
        a.q_token_stride % 8 == 0 && a.q_head_stride % 8 == 0 && a.kv_row_stride % 8 == 0 && a.kv_head_stride % 8 == 0;
    // Pointers are checked when set (a shape-only probe leaves them null).
    const bool pointers = (!a.q || aligned16(a.q)) && (!a.k || aligned16(a.k)) && (!a.v || aligned16(a.v));
    return strides && pointers;
}

}  // namespace attn_tile

bool flash_attention_fits(const AttentionArgs& a) {
    const bool dims =
        a.dk > 0 && a.dk <= kFlashMaxDim && a.dk % 16 == 0 && a.dv > 0 && a.dv <= kFlashMaxDim && a.dv % 16 == 0;
    if (!dims || !attn_tile::rows_aligned(a)) return false;
    return flash_layout(static_cast<int>(a.dk), static_cast<int>(a.dv)).bytes <= attn_tile::max_optin_smem_bytes();
}

AttentionKernel attention_kernel_of(const AttentionArgs& a) {
    switch (a.kernel) {
        case AttentionKernel::split: return AttentionKernel::split;
        case AttentionKernel::flash: return AttentionKernel::flash;
        case AttentionKernel::latent: return AttentionKernel::latent;
        case AttentionKernel::automatic: break;
    }
    if (a.tokens_per_seq >= kFlashMinQueries && flash_attention_fits(a)) return AttentionKernel::flash;
    if (latent_attention_fits(a) && a.num_heads >= kLatentMinHeads) return AttentionKernel::latent;
    return AttentionKernel::split;
}

void launch_attention_flash(const AttentionArgs& a, cudaStream_t stream) {
    MOEBENCH_CHECK(
        flash_attention_fits(a),
        "attention: the flash kernel needs dk, dv <= {} and multiples of 16, strides multiples of 8, 16-byte "
        "aligned q/k/v and its shared memory (dk={} dv={})",
        kFlashMaxDim, a.dk, a.dv);
    const int64_t seqs = a.num_tokens / a.tokens_per_seq;
    const int64_t blocks = seqs * ((a.tokens_per_seq + kRows - 1) / kRows);
    MOEBENCH_CHECK(blocks < (int64_t(1) << 31) && a.num_heads <= 65535, "attention: flash grid too large ({} x {})",
                   blocks, a.num_heads);
    const int64_t smem = flash_layout(static_cast<int>(a.dk), static_cast<int>(a.dv)).bytes;
    static int64_t smem_allowed = 0;
    attn_tile::allow_smem(reinterpret_cast<const void*>(attention_flash_kernel), smem, &smem_allowed);
    const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(a.num_heads));
    attention_flash_kernel<<<grid, kThreads, static_cast<size_t>(smem), stream>>>(a);
    MOEBENCH_LAUNCH_CHECK();
}

}  // namespace moebench::kernels
