// SPDX-License-Identifier: Apache-2.0
// Prefill attention on tensor cores (flash-attention style): a block holds 64 queries of one head of one sequence,
// walks the keys they see in tiles of 64 (causal, window, local chunk), and keeps a running softmax (max, sum) and
// the output in shared memory, so nothing goes through a workspace and each K/V tile is read once per 64 queries
// instead of once per query. Scores and P.V on WMMA 16x16x16 bf16 with fp32 accumulation; P is rounded to bf16 for
// the P.V product, as flash-attention does. Decode (one query per sequence) and MLA's 512-wide latent values stay on
// the split-context kernel (attention.cu).
#include "kernels/attention_range.cuh"
#include "kernels/common.cuh"

#include <mma.h>

#include <cmath>

namespace moebench::kernels {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kFlashRows = 64;  // queries per block (16 per warp) and keys per tile
constexpr int kFlashWarps = 4;
constexpr int kFlashThreads = kFlashWarps * kWarp;
constexpr int kFlashMaxDim = 256;      // dk and dv (the output tile of a warp lives in shared memory)
constexpr int kFlashMinQueries = 16;   // automatic: fewer queries per sequence than this stay on the split kernel
constexpr int kPadBf16 = 8;            // row padding: 16 bytes keeps rows 16-byte aligned and ldm % 8 == 0
constexpr int kPadF32 = 4;             // ldm % 4 == 0 for float

// Shared-memory layout, one definition for the host (size) and the device (carving). Every section size is a
// multiple of 128 bytes, so every WMMA pointer (row offsets of 16 rows, column offsets of 16) is 32-byte aligned.
struct FlashLayout {
    int ld_qk, ld_v, ld_s, ld_p, ld_o;
    int64_t q_off, k_off, v_off, s_off, p_off, o_off, stats_off, bytes;
    __host__ __device__ FlashLayout(int dk, int dv)
        : ld_qk(dk + kPadBf16), ld_v(dv + kPadBf16), ld_s(kFlashRows + kPadF32), ld_p(kFlashRows + kPadBf16),
          ld_o(dv + kPadF32) {
        q_off = 0;
        k_off = q_off + int64_t(kFlashRows) * ld_qk * 2;
        v_off = k_off + int64_t(kFlashRows) * ld_qk * 2;
        s_off = v_off + int64_t(kFlashRows) * ld_v * 2;
        p_off = s_off + int64_t(kFlashRows) * ld_s * 4;
        o_off = p_off + int64_t(kFlashRows) * ld_p * 2;
        stats_off = o_off + int64_t(kFlashRows) * ld_o * 4;
        bytes = stats_off + 3 * kFlashRows * 4;  // running max, running sum, this tile's rescale factor
    }
};

// Copy `rows` rows of `cols` bf16 (cols % 8 == 0, 16-byte aligned) into shared rows of ld; rows up to kFlashRows
// past `rows` are zero (their scores are masked; zero keeps NaN out of the products).
__device__ inline void stage_rows(bf16* dst, int ld, const bf16* src, int64_t src_stride, int rows, int cols) {
    const int vecs = cols / 8;
    for (int i = threadIdx.x; i < kFlashRows * vecs; i += kFlashThreads) {
        const int r = i / vecs, c = (i % vecs) * 8;
        uint4 w = make_uint4(0, 0, 0, 0);
        if (r < rows) w = *reinterpret_cast<const uint4*>(src + r * src_stride + c);
        *reinterpret_cast<uint4*>(dst + r * ld + c) = w;
    }
}

// Grid: x = sequence * query tiles per sequence + tile, y = head. Block: 4 warps; warp w owns query rows 16w..16w+15.
__global__ void __launch_bounds__(kFlashThreads) attention_flash_kernel(AttentionArgs a) {
    extern __shared__ __align__(128) unsigned char flash_smem[];
    const int dk = static_cast<int>(a.dk), dv = static_cast<int>(a.dv);
    const FlashLayout L(dk, dv);
    bf16* q_s = reinterpret_cast<bf16*>(flash_smem + L.q_off);
    bf16* k_s = reinterpret_cast<bf16*>(flash_smem + L.k_off);
    bf16* v_s = reinterpret_cast<bf16*>(flash_smem + L.v_off);
    float* s_s = reinterpret_cast<float*>(flash_smem + L.s_off);
    bf16* p_s = reinterpret_cast<bf16*>(flash_smem + L.p_off);
    float* o_s = reinterpret_cast<float*>(flash_smem + L.o_off);
    float* m_s = reinterpret_cast<float*>(flash_smem + L.stats_off);
    float* l_s = m_s + kFlashRows;
    float* alpha_s = l_s + kFlashRows;

    const int64_t tps = a.tokens_per_seq;
    const int64_t tiles_per_seq = (tps + kFlashRows - 1) / kFlashRows;
    const int64_t b = blockIdx.x / tiles_per_seq, s0 = (blockIdx.x % tiles_per_seq) * kFlashRows;
    const int64_t h = blockIdx.y, g = h / (a.num_heads / a.num_kv_heads);
    const int nq = static_cast<int>(min(int64_t(kFlashRows), tps - s0));
    const int64_t t0 = b * tps + s0;            // token index of query row 0
    const int64_t pos0 = a.pos_base + s0;       // its position
    const int64_t pos_last = pos0 + nq - 1;     // the last key any row of the tile sees
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, r0 = warp * 16;

    stage_rows(q_s, L.ld_qk, a.q + t0 * a.q_token_stride + h * a.q_head_stride, a.q_token_stride, nq, dk);
    for (int i = threadIdx.x; i < kFlashRows * dv; i += kFlashThreads) o_s[(i / dv) * L.ld_o + i % dv] = 0.0f;
    for (int r = threadIdx.x; r < kFlashRows; r += kFlashThreads) {
        m_s[r] = -INFINITY;
        l_s[r] = 0.0f;
    }

    const bf16* k_base = a.k + b * a.cache_len * a.kv_row_stride + g * a.kv_head_stride;
    const bf16* v_base = a.v + b * a.cache_len * a.kv_row_stride + g * a.kv_head_stride;
    for (int64_t kb = first_key(a, pos0); kb <= pos_last; kb += kFlashRows) {
        const int nk = static_cast<int>(min(int64_t(kFlashRows), pos_last + 1 - kb));
        __syncthreads();  // the previous tile's K/V (and, first time, nothing) is no longer read
        stage_rows(k_s, L.ld_qk, k_base + kb * a.kv_row_stride, a.kv_row_stride, nk, dk);
        stage_rows(v_s, L.ld_v, v_base + kb * a.kv_row_stride, a.kv_row_stride, nk, dv);
        __syncthreads();

        // S (this warp's 16 rows x 64 keys) = Q K^T: K is [key][d] row-major, i.e. K^T column-major with ld_qk.
        for (int n = 0; n < kFlashRows / 16; ++n) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::fill_fragment(acc, 0.0f);
            for (int kk = 0; kk < dk; kk += 16) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> fb;
                wmma::load_matrix_sync(fa, q_s + r0 * L.ld_qk + kk, L.ld_qk);
                wmma::load_matrix_sync(fb, k_s + n * 16 * L.ld_qk + kk, L.ld_qk);
                wmma::mma_sync(acc, fa, fb, acc);
            }
            wmma::store_matrix_sync(s_s + r0 * L.ld_s + n * 16, acc, L.ld_s, wmma::mem_row_major);
        }
        __syncwarp();

        // Online softmax over the row's visible keys; lane covers keys lane and lane + 32 of the tile.
        for (int rr = 0; rr < 16; ++rr) {
            const int r = r0 + rr;
            const int64_t pos = pos0 + r, lo = first_key(a, pos);
            float x[2];
            float mx = -INFINITY;
            for (int u = 0; u < 2; ++u) {
                const int c = lane + u * kWarp;
                const int64_t key = kb + c;
                const bool seen = r < nq && c < nk && key >= lo && key <= pos;
                x[u] = seen ? s_s[r * L.ld_s + c] * a.scale : -INFINITY;
                mx = fmaxf(mx, x[u]);
            }
            mx = warp_max(mx);
            const float m_old = m_s[r], m_new = fmaxf(m_old, mx);
            // Nothing seen yet (m_new = -inf): p = 0 and the (zero) row keeps its scale.
            const float alpha = m_new == -INFINITY ? 1.0f : __expf(m_old - m_new);
            float sum = 0.0f;
            for (int u = 0; u < 2; ++u) {
                const bf16 p = to_bf(x[u] == -INFINITY ? 0.0f : __expf(x[u] - m_new));
                p_s[r * L.ld_p + lane + u * kWarp] = p;
                sum += to_f(p);  // the sum of what P.V multiplies
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
        for (int i = lane; i < 16 * dv; i += kWarp) o_s[(r0 + i / dv) * L.ld_o + i % dv] *= alpha_s[r0 + i / dv];
        __syncwarp();

        // O (16 rows x dv) += P (16 x 64) V (64 x dv); V is [key][d] row-major.
        for (int n = 0; n < dv; n += 16) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::load_matrix_sync(acc, o_s + r0 * L.ld_o + n, L.ld_o, wmma::mem_row_major);
            for (int kk = 0; kk < kFlashRows; kk += 16) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> fb;
                wmma::load_matrix_sync(fa, p_s + r0 * L.ld_p + kk, L.ld_p);
                wmma::load_matrix_sync(fb, v_s + kk * L.ld_v + n, L.ld_v);
                wmma::mma_sync(acc, fa, fb, acc);
            }
            wmma::store_matrix_sync(o_s + r0 * L.ld_o + n, acc, L.ld_o, wmma::mem_row_major);
        }
    }
    __syncwarp();

    // out = O e^(m - M) / (l e^(m - M) + e^(sink - M)), M = max(m, sink): the split kernel's merge for one split.
    for (int rr = 0; rr < 16; ++rr) {
        const int r = r0 + rr;
        if (r >= nq) break;
        const float m = m_s[r], l = l_s[r];
        const float sink = a.sinks ? a.sinks[h] : -INFINITY;
        const float M = fmaxf(m, sink);
        const float keep = m == -INFINITY ? 0.0f : __expf(m - M);
        const float denom = l * keep + (a.sinks ? __expf(sink - M) : 0.0f);
        const float inv = denom > 0.0f ? keep / denom : 0.0f;
        bf16* out = a.out + ((t0 + r) * a.num_heads + h) * a.dv;
        for (int c = lane; c < dv; c += kWarp) out[c] = to_bf(o_s[r * L.ld_o + c] * inv);
    }
}

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

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool flash_attention_fits(const AttentionArgs& a) {
    const bool dims = a.dk > 0 && a.dk <= kFlashMaxDim && a.dk % 16 == 0 && a.dv > 0 && a.dv <= kFlashMaxDim &&
                      a.dv % 16 == 0;
    const bool strides = a.q_token_stride % 8 == 0 && a.q_head_stride % 8 == 0 && a.kv_row_stride % 8 == 0 &&
                         a.kv_head_stride % 8 == 0;
    // Pointers are checked when set (a shape-only probe leaves them null).
    const bool pointers = (!a.q || aligned16(a.q)) && (!a.k || aligned16(a.k)) && (!a.v || aligned16(a.v));
    if (!dims || !strides || !pointers) return false;
    return FlashLayout(static_cast<int>(a.dk), static_cast<int>(a.dv)).bytes <= max_optin_smem_bytes();
}

AttentionKernel attention_kernel_of(const AttentionArgs& a) {
    switch (a.kernel) {
        case AttentionKernel::split: return AttentionKernel::split;
        case AttentionKernel::flash: return AttentionKernel::flash;
        case AttentionKernel::automatic: break;
    }
    return a.tokens_per_seq >= kFlashMinQueries && flash_attention_fits(a) ? AttentionKernel::flash
                                                                          : AttentionKernel::split;
}

void launch_attention_flash(const AttentionArgs& a, cudaStream_t stream) {
    MOEBENCH_CHECK(flash_attention_fits(a),
                   "attention: the flash kernel needs dk, dv <= {} and multiples of 16, strides multiples of 8, 16-byte "
                   "aligned q/k/v and its shared memory (dk={} dv={})",
                   kFlashMaxDim, a.dk, a.dv);
    const int64_t seqs = a.num_tokens / a.tokens_per_seq;
    const int64_t blocks = seqs * ((a.tokens_per_seq + kFlashRows - 1) / kFlashRows);
    MOEBENCH_CHECK(blocks < (int64_t(1) << 31) && a.num_heads <= 65535, "attention: flash grid too large ({} x {})",
                   blocks, a.num_heads);
    const int64_t smem = FlashLayout(static_cast<int>(a.dk), static_cast<int>(a.dv)).bytes;
    // Raised once per larger size: the eager step sets it, so a later graph capture of the same shapes calls nothing.
    static int64_t smem_allowed = 48 * 1024;
    if (smem > smem_allowed) {
        MOEBENCH_CUDA_CHECK(cudaFuncSetAttribute(attention_flash_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 static_cast<int>(smem)));
        smem_allowed = smem;
    }
    const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(a.num_heads));
    attention_flash_kernel<<<grid, kFlashThreads, static_cast<size_t>(smem), stream>>>(a);
    MOEBENCH_LAUNCH_CHECK();
}

}  // namespace moebench::kernels
