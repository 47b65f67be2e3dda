// SPDX-License-Identifier: Apache-2.0
// MLA decode attention over the latent cache on tensor cores. Absorbed MLA has one kv head shared by every query head
// and values that are the first dv columns of the key rows, so the heads of one token are the rows of a tile: a block
// holds 64 heads of one token, walks its chunk of the context in key tiles of 32 (each latent row read once for the
// 64 heads, and K and V from the same staged rows), and writes the chunk's partial softmax (m, l, o) in the
// split-context layout, which attention.cu's merge combines (+ sinks). dv > 256 is cut into slices of 256 (one per
// block, the scores computed again for each): the fp32 output tile must fit in shared memory beside Q and the key
// tile (DeepSeek: dk 576, dv 512: 189 KiB).
#include "kernels/attention_range.cuh"
#include "kernels/attention_tile.cuh"

namespace moebench::kernels {
namespace {

using namespace attn_tile;

constexpr int kKeys = 32;          // keys per tile
constexpr int kMaxSlice = 256;     // output columns per block
constexpr int kMaxLatentDk = 576;  // the key row (kv_lora + rope) the shared memory holds with 64 rows of q

int slice_of(int64_t dv) { return static_cast<int>(dv <= kMaxSlice ? dv : kMaxSlice); }

// 64 heads, key tiles of 32 whose rows are also the values, an output slice of `slice` columns.
__host__ __device__ inline TileLayout latent_layout(int dk, int slice) { return TileLayout(dk, slice, kKeys, false); }

// Grid: x = (token - token_begin) * head tiles + head tile, y = split of the context, z = output slice.
// Block: 4 warps; warp w owns head rows h0 + 16w .. + 15.
__global__ void __launch_bounds__(kThreads)
    attention_latent_kernel(AttentionArgs a, float* ws_ml, float* ws_o, int num_splits, int slice) {
    extern __shared__ __align__(128) unsigned char latent_smem[];
    const int dk = static_cast<int>(a.dk);
    const TileLayout L = latent_layout(dk, slice);
    const TileSmem S(latent_smem, L);

    const int64_t head_tiles = (a.num_heads + kRows - 1) / kRows;
    const int64_t tl = blockIdx.x / head_tiles, h0 = (blockIdx.x % head_tiles) * kRows;
    const int64_t t = a.token_begin + tl;
    const int nh = static_cast<int>(min(int64_t(kRows), a.num_heads - h0));
    const int split = blockIdx.y, c0 = static_cast<int>(blockIdx.z) * slice;
    const int64_t b = t / a.tokens_per_seq, pos = a.pos_base + t % a.tokens_per_seq;
    const int64_t k0 = first_key(a, pos) + static_cast<int64_t>(split) * a.chunk;
    const int64_t k1 = min(k0 + a.chunk, pos + 1);
    const int64_t th0 = tl * a.num_heads + h0;  // workspace row of head row 0 (split-context layout)
    const int lane = threadIdx.x % kWarp, r0 = (threadIdx.x / kWarp) * 16;
    if (k0 >= k1) {  // this split holds no key of this token
        if (blockIdx.z == 0)
            for (int r = threadIdx.x; r < nh; r += kThreads) {
                float* ml = ws_ml + ((th0 + r) * num_splits + split) * 2;
                ml[0] = -INFINITY;
                ml[1] = 0.0f;
            }
        return;
    }

    stage_rows(S.q, L.ld_qk, a.q + t * a.q_token_stride + h0 * a.q_head_stride, a.q_head_stride, nh, dk, kRows);
    for (int i = threadIdx.x; i < kRows * slice; i += kThreads) S.o[(i / slice) * L.ld_o + i % slice] = 0.0f;
    for (int r = threadIdx.x; r < kRows; r += kThreads) {
        S.m[r] = -INFINITY;
        S.l[r] = 0.0f;
    }

    const bf16* k_base = a.k + b * a.cache_len * a.kv_row_stride;
    for (int64_t kb = k0; kb < k1; kb += kKeys) {
        const int nk = static_cast<int>(min(int64_t(kKeys), k1 - kb));
        __syncthreads();  // the previous key tile is no longer read
        stage_rows(S.k, L.ld_qk, k_base + kb * a.kv_row_stride, a.kv_row_stride, nk, dk, kKeys);
        __syncthreads();
        warp_scores<kKeys>(S.q, L.ld_qk, S.k, L.ld_qk, dk, S.s, L.ld_s, r0);
        __syncwarp();
        // Every key of the chunk is visible to the token (the chunk lies in [first_key, pos]); rows past the heads
        // and keys past the chunk are not.
        warp_online_softmax<kKeys>(S.s, L.ld_s, S.p, L.ld_p, S.m, S.l, S.alpha, r0, a.scale,
                                   [&](int r, int c) { return r < nh && c < nk; });
        // Values: columns c0 .. c0 + slice of the same staged key rows.
        warp_rescale_pv<kKeys>(S.p, L.ld_p, S.k + c0, L.ld_qk, S.o, L.ld_o, S.alpha, r0, slice);
    }
    __syncwarp();

    // Partials of this split (split-context layout): o unnormalised (sum of p v at the running max), m, l.
    for (int rr = 0; rr < 16; ++rr) {
        const int r = r0 + rr;
        if (r >= nh) break;
        const int64_t row = (th0 + r) * num_splits + split;
        for (int c = lane; c < slice; c += kWarp) ws_o[row * a.dv + c0 + c] = S.o[r * L.ld_o + c];
        if (blockIdx.z == 0 && lane == 0) {
            ws_ml[row * 2] = S.m[r];
            ws_ml[row * 2 + 1] = S.l[r];
        }
    }
}

}  // namespace

bool latent_attention_fits(const AttentionArgs& a) {
    // One kv head whose values are its keys' first dv columns (said by the caller; the pointers agree when set).
    const bool shared_rows = a.num_kv_heads == 1 && a.values_in_keys && a.k == a.v;
    const bool dims = a.dk > 0 && a.dk <= kMaxLatentDk && a.dk % 16 == 0 && a.dv > 0 && a.dv <= a.dk &&
                      a.dv % 16 == 0 && a.dv % slice_of(a.dv) == 0;
    if (!shared_rows || !dims || !attn_tile::rows_aligned(a)) return false;
    return latent_layout(static_cast<int>(a.dk), slice_of(a.dv)).bytes <= attn_tile::max_optin_smem_bytes();
}

namespace attn_tile {

int64_t latent_blocks_per_token(const AttentionArgs& a) {
    return (a.num_heads + kRows - 1) / kRows * (a.dv / slice_of(a.dv));
}

void launch_latent_partials(const AttentionArgs& part, int64_t tokens, float* ws_ml, float* ws_o, int num_splits,
                            cudaStream_t stream) {
    MOEBENCH_CHECK(latent_attention_fits(part),
                   "attention: the latent kernel needs one kv head whose values are the first dv columns of its keys, "
                   "dk <= {} and dk, dv multiples of 16, strides multiples of 8 (dk={} dv={} kv_heads={})",
                   kMaxLatentDk, part.dk, part.dv, part.num_kv_heads);
    const int slice = slice_of(part.dv);
    const int64_t head_tiles = (part.num_heads + kRows - 1) / kRows;
    MOEBENCH_CHECK(tokens * head_tiles < (int64_t(1) << 31), "attention: latent grid too large ({})",
                   tokens * head_tiles);
    const int64_t smem = latent_layout(static_cast<int>(part.dk), slice).bytes;
    static int64_t smem_allowed = 0;
    allow_smem(reinterpret_cast<const void*>(attention_latent_kernel), smem, &smem_allowed);
    const dim3 grid(static_cast<unsigned>(tokens * head_tiles), static_cast<unsigned>(num_splits),
                    static_cast<unsigned>(part.dv / slice));
    attention_latent_kernel<<<grid, kThreads, static_cast<size_t>(smem), stream>>>(part, ws_ml, ws_o, num_splits,
                                                                                   slice);
    MOEBENCH_LAUNCH_CHECK();
}

}  // namespace attn_tile
}  // namespace moebench::kernels
