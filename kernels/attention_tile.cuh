// SPDX-License-Identifier: Apache-2.0
// Building blocks of the tensor-core attention kernels (attention_flash.cu: prefill, queries as rows;
// attention_latent.cu: MLA decode, heads as rows). A block of 4 warps holds a tile of 64 rows; warp w owns rows
// 16w..16w+15 of the score, probability and output tiles and of the running statistics, so after the block-wide
// staging of a key tile each warp works alone (__syncwarp between its steps). WMMA 16x16x16 bf16, fp32 accumulation.
// Shared-memory pointers must be 32-byte aligned and every ld a multiple of 8 (bf16) or 4 (float): callers pad rows
// by kPadBf16 / kPadF32 and carve sections of multiples of 128 bytes.
#pragma once
#include "kernels/common.cuh"

#include <mma.h>

namespace moebench::kernels::attn_tile {

namespace wmma = nvcuda::wmma;

constexpr int kRows = 64;  // rows of a tile (16 per warp)
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarp;
constexpr int kPadBf16 = 8;  // 16 bytes: rows stay 16-byte aligned and ldm % 8 == 0
constexpr int kPadF32 = 4;   // ldm % 4 == 0

/// Shared-memory layout of a tile, one definition for the host (size) and the device (carving): q [64][dk], the key
/// tile [keys][dk], a value tile [keys][out_cols] when the values are not the key rows themselves (own_v), scores
/// [64][keys] fp32, probabilities [64][keys] bf16, output [64][out_cols] fp32, and per row the running max, sum and
/// rescale factor. Every section is a multiple of 128 bytes, so every WMMA pointer (row offsets of 16 rows, column
/// offsets of 16) is 32-byte aligned.
struct TileLayout {
    int ld_qk, ld_v, ld_s, ld_p, ld_o;
    int64_t q_off, k_off, v_off, s_off, p_off, o_off, stats_off, bytes;
    __host__ __device__ TileLayout(int dk, int out_cols, int keys, bool own_v)
        : ld_qk(dk + kPadBf16),
          ld_v(out_cols + kPadBf16),
          ld_s(keys + kPadF32),
          ld_p(keys + kPadBf16),
          ld_o(out_cols + kPadF32) {
        q_off = 0;
        k_off = q_off + int64_t(kRows) * ld_qk * 2;
        v_off = k_off + int64_t(keys) * ld_qk * 2;
        s_off = v_off + (own_v ? int64_t(keys) * ld_v * 2 : 0);
        p_off = s_off + int64_t(kRows) * ld_s * 4;
        o_off = p_off + int64_t(kRows) * ld_p * 2;
        stats_off = o_off + int64_t(kRows) * ld_o * 4;
        bytes = stats_off + 3 * kRows * 4;
    }
};

/// The sections carved from a kernel's dynamic shared memory.
struct TileSmem {
    bf16* q;
    bf16* k;
    bf16* v;  // own_v only
    float* s;
    bf16* p;
    float* o;
    float* m;
    float* l;
    float* alpha;
    __device__ TileSmem(unsigned char* base, const TileLayout& L)
        : q(reinterpret_cast<bf16*>(base + L.q_off)),
          k(reinterpret_cast<bf16*>(base + L.k_off)),
          v(reinterpret_cast<bf16*>(base + L.v_off)),
          s(reinterpret_cast<float*>(base + L.s_off)),
          p(reinterpret_cast<bf16*>(base + L.p_off)),
          o(reinterpret_cast<float*>(base + L.o_off)),
          m(reinterpret_cast<float*>(base + L.stats_off)),
          l(m + kRows),
          alpha(l + kRows) {}
};

/// Copies `rows` rows of `cols` bf16 (cols % 8 == 0, 16-byte aligned rows) into shared rows of ld; rows up to
/// `max_rows` past `rows` are zero (their scores are masked; zero keeps NaN out of the products). All threads.
__device__ inline void stage_rows(bf16* dst, int ld, const bf16* src, int64_t src_stride, int rows, int cols,
                                  int max_rows) {
    const int vecs = cols / 8;
    for (int i = threadIdx.x; i < max_rows * vecs; i += kThreads) {
        const int r = i / vecs, c = (i % vecs) * 8;
        uint4 w = make_uint4(0, 0, 0, 0);
        if (r < rows) w = *reinterpret_cast<const uint4*>(src + r * src_stride + c);
        *reinterpret_cast<uint4*>(dst + r * ld + c) = w;
    }
}

/// S[r0.., 0..kKeys) = Q[r0.., :dk] K[0..kKeys, :dk]^T for the warp's 16 rows (K is [key][d] row-major, i.e. K^T
/// column-major with ld_k).
template <int kKeys>
__device__ inline void warp_scores(const bf16* q_s, int ld_q, const bf16* k_s, int ld_k, int dk, float* s_s, int ld_s,
                                   int r0) {
    for (int n = 0; n < kKeys / 16; ++n) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        wmma::fill_fragment(acc, 0.0f);
        for (int kk = 0; kk < dk; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa;
            wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> fb;
            wmma::load_matrix_sync(fa, q_s + r0 * ld_q + kk, ld_q);
            wmma::load_matrix_sync(fb, k_s + n * 16 * ld_k + kk, ld_k);
            wmma::mma_sync(acc, fa, fb, acc);
        }
        wmma::store_matrix_sync(s_s + r0 * ld_s + n * 16, acc, ld_s, wmma::mem_row_major);
    }
}

/// Online softmax of the warp's 16 rows over this key tile: lane covers keys lane, lane + 32, ...; seen(r, c) says
/// whether row r sees key c of the tile. Writes P (bf16) and updates the running max m, sum l (of the bf16 P that
/// P.V multiplies) and the factor alpha that rescales the row's output. A row that has seen nothing keeps p = 0.
template <int kKeys, typename Seen>
__device__ inline void warp_online_softmax(const float* s_s, int ld_s, bf16* p_s, int ld_p, float* m_s, float* l_s,
                                           float* alpha_s, int r0, float scale, Seen seen) {
    const int lane = threadIdx.x % kWarp;
    for (int rr = 0; rr < 16; ++rr) {
        const int r = r0 + rr;
        float x[kKeys / kWarp];
        float mx = -INFINITY;
        for (int u = 0; u < kKeys / kWarp; ++u) {
            const int c = lane + u * kWarp;
            x[u] = seen(r, c) ? s_s[r * ld_s + c] * scale : -INFINITY;
            mx = fmaxf(mx, x[u]);
        }
        mx = warp_max(mx);
        const float m_old = m_s[r], m_new = fmaxf(m_old, mx);
        const float alpha = m_new == -INFINITY ? 1.0f : __expf(m_old - m_new);
        float sum = 0.0f;
        for (int u = 0; u < kKeys / kWarp; ++u) {
            const bf16 p = to_bf(x[u] == -INFINITY ? 0.0f : __expf(x[u] - m_new));
            p_s[r * ld_p + lane + u * kWarp] = p;
            sum += to_f(p);
        }
        sum = warp_sum(sum);
        __syncwarp();  // every lane has read m_s[r]
        if (lane == 0) {
            m_s[r] = m_new;
            l_s[r] = l_s[r] * alpha + sum;
            alpha_s[r] = alpha;
        }
    }
    __syncwarp();
}

/// O[r0.., :cols] *= alpha[row], then O += P[r0.., :kKeys] V[0..kKeys, :cols] (V is [key][d] row-major with ld_v).
template <int kKeys>
__device__ inline void warp_rescale_pv(const bf16* p_s, int ld_p, const bf16* v_s, int ld_v, float* o_s, int ld_o,
                                       const float* alpha_s, int r0, int cols) {
    const int lane = threadIdx.x % kWarp;
    for (int i = lane; i < 16 * cols; i += kWarp) o_s[(r0 + i / cols) * ld_o + i % cols] *= alpha_s[r0 + i / cols];
    __syncwarp();
    for (int n = 0; n < cols; n += 16) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        wmma::load_matrix_sync(acc, o_s + r0 * ld_o + n, ld_o, wmma::mem_row_major);
        for (int kk = 0; kk < kKeys; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa;
            wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> fb;
            wmma::load_matrix_sync(fa, p_s + r0 * ld_p + kk, ld_p);
            wmma::load_matrix_sync(fb, v_s + kk * ld_v + n, ld_v);
            wmma::mma_sync(acc, fa, fb, acc);
        }
        wmma::store_matrix_sync(o_s + r0 * ld_o + n, acc, ld_o, wmma::mem_row_major);
    }
}

/// The device's opt-in shared memory per block (cached; 48 KiB if it cannot be asked).
int max_optin_smem_bytes();
/// q, k, v rows can be staged with 16-byte loads: strides multiples of 8 elements, pointers (when set) aligned.
bool rows_aligned(const AttentionArgs& a);
/// The latent kernel's blocks per query token and context split (head tiles x output slices).
int64_t latent_blocks_per_token(const AttentionArgs& a);
/// The latent kernel's partials for `tokens` query tokens from part.token_begin, in the split-context workspace
/// layout (attention_latent.cu); launch_attention merges them.
void launch_latent_partials(const AttentionArgs& part, int64_t tokens, float* ws_ml, float* ws_o, int num_splits,
                            cudaStream_t stream);
/// Raises kernel's dynamic shared memory limit to `bytes` once per larger size (the eager step sets it, so a later
/// graph capture of the same shapes calls nothing).
void allow_smem(const void* kernel, int64_t bytes, int64_t* allowed);

}  // namespace moebench::kernels::attn_tile
