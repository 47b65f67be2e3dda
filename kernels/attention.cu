// SPDX-License-Identifier: Apache-2.0
// Attention kernels: RoPE (rotate-half), KV-cache append, and a split-context attention (flash-decoding style:
// per-chunk partial softmax, then a merge) used for decode and, with a causal key range per query, for prefill. The
// heads that share a kv head (a GQA group; all heads of MLA's latent cache) share a block, which reads each cached
// row once for them. launch_attention also dispatches the tensor-core kernels: flash (attention_flash.cu, prefill)
// and latent (attention_latent.cu, MLA decode: its partials go through the same workspace and merge).
#include "kernels/attention_range.cuh"
#include "kernels/attention_tile.cuh"
#include "kernels/common.cuh"

#include <cmath>

namespace moebench::kernels {
namespace {

constexpr int kAttnThreads = 128;
constexpr int kMaxDk = 1024;
constexpr int kMaxDv = 512;
constexpr int kAccPerThread = kMaxDv / kAttnThreads;  // 4
constexpr int kMaxChunk = 512;

__global__ void rope_table_kernel(float* cos_sin, int64_t first_pos, int64_t num_pos, int64_t rot_dim, double theta) {
    const int64_t half = rot_dim / 2, n = num_pos * half;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t p = i / half, d = i % half;
        // Angles in double, once: positions up to ~1e5 times inv_freq ~1 lose radians in fp32.
        const double inv_freq = pow(theta, -2.0 * static_cast<double>(d) / static_cast<double>(rot_dim));
        double s, c;
        sincos(static_cast<double>(first_pos + p) * inv_freq, &s, &c);
        cos_sin[p * rot_dim + d] = static_cast<float>(c);
        cos_sin[p * rot_dim + half + d] = static_cast<float>(s);
    }
}

__global__ void rope_kernel(bf16* x, int64_t num_tokens, int64_t num_heads, int64_t token_stride, int64_t head_stride,
                            int64_t dim_offset, int64_t rot_dim, int64_t tokens_per_seq, const float* cos_sin) {
    const int64_t half = rot_dim / 2;
    const int64_t n = num_tokens * num_heads * half;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t d = i % half, th = i / half, h = th % num_heads, t = th / num_heads;
        const float* cs = cos_sin + (t % tokens_per_seq) * rot_dim;
        const float c = cs[d], s = cs[half + d];
        bf16* base = x + t * token_stride + h * head_stride + dim_offset;
        const float x1 = to_f(base[d]), x2 = to_f(base[d + half]);
        base[d] = to_bf(x1 * c - x2 * s);
        base[d + half] = to_bf(x2 * c + x1 * s);
    }
}

__global__ void kv_append_kernel(const bf16* src, int64_t src_ld, bf16* cache, int64_t row_elems, int64_t num_tokens,
                                 int64_t tokens_per_seq, int64_t cache_len, int64_t pos_base) {
    const int64_t n = num_tokens * row_elems;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t t = i / row_elems, c = i % row_elems;
        const int64_t b = t / tokens_per_seq, s = t % tokens_per_seq;
        cache[(b * cache_len + pos_base + s) * row_elems + c] = src[t * src_ld + c];
    }
}

__device__ inline float block_max(float v, float* shm) {
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) shm[warp] = v;
    __syncthreads();
    const int num_warps = blockDim.x / kWarp;
    float t = lane < num_warps ? shm[lane] : -INFINITY;
    return warp_max(t);
}

// Grid: x = token * (num_heads / kHeads) + head group, y = split. Block: kAttnThreads. A block serves kHeads query
// heads that share one kv head (GQA's group, or MLA's single latent head), so each key and value row of the chunk is
// read once for all of them instead of once per head. Steps: 1) the heads' q to shared (fp32); 2) each warp scores keys
// j = warp, warp + 4, ... of the chunk (lanes split dk, one read of the key for every head); 3) per head: chunk max and
// exp-sum; 4) threads split dv and accumulate p_hj * v_j for every head (one read of the value); 5) partials (m, l,
// o[dv]) per head to the workspace. Dynamic shared memory: kHeads * (dk + chunk) floats (sized in launch_attention).
template <int kHeads>
__global__ void attention_split_kernel(AttentionArgs a, float* ws_ml, float* ws_o, int num_splits) {
    extern __shared__ float attn_smem[];
    float* q_s = attn_smem;                  // [kHeads][dk]
    float* p_s = attn_smem + kHeads * a.dk;  // [kHeads][chunk]
    __shared__ float red[32];
    const int64_t groups = a.num_heads / kHeads;
    const int64_t tg = blockIdx.x;  // (token - a.token_begin) * groups + group
    const int64_t t = a.token_begin + tg / groups, h0 = (tg % groups) * kHeads;
    const int split = blockIdx.y;
    const int64_t b = t / a.tokens_per_seq;
    const int64_t pos = a.pos_base + t % a.tokens_per_seq;
    const int64_t lo = first_key(a, pos);
    const int64_t k0 = lo + static_cast<int64_t>(split) * a.chunk;
    const int64_t k1 = min(k0 + a.chunk, pos + 1);
    // Workspace rows of this launch: (token - token_begin) * num_heads + head.
    const int64_t th0 = (tg / groups) * a.num_heads + h0;
    if (k0 >= k1) {  // this split holds no key of this query
        if (threadIdx.x < kHeads) {
            float* ml = ws_ml + ((th0 + threadIdx.x) * num_splits + split) * 2;
            ml[0] = -INFINITY;
            ml[1] = 0.0f;
        }
        return;
    }
    const int64_t g = h0 / (a.num_heads / a.num_kv_heads);  // every head of the block maps to this kv head
    for (int hh = 0; hh < kHeads; ++hh) {
        const bf16* qp = a.q + t * a.q_token_stride + (h0 + hh) * a.q_head_stride;
        for (int64_t d = threadIdx.x; d < a.dk; d += blockDim.x) q_s[hh * a.dk + d] = to_f(qp[d]);
    }
    __syncthreads();

    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, num_warps = blockDim.x / kWarp;
    const int64_t n = k1 - k0;
    for (int64_t j = warp; j < n; j += num_warps) {
        const bf16* kp = a.k + (b * a.cache_len + k0 + j) * a.kv_row_stride + g * a.kv_head_stride;
        float s[kHeads];
#pragma unroll
        for (int hh = 0; hh < kHeads; ++hh) s[hh] = 0.0f;
        for (int64_t d = lane; d < a.dk; d += kWarp) {
            const float kv = to_f(kp[d]);
#pragma unroll
            for (int hh = 0; hh < kHeads; ++hh) s[hh] += q_s[hh * a.dk + d] * kv;
        }
#pragma unroll
        for (int hh = 0; hh < kHeads; ++hh) {
            const float v = warp_sum(s[hh]);
            if (lane == 0) p_s[hh * a.chunk + j] = v * a.scale;
        }
    }
    __syncthreads();
    float m[kHeads], l[kHeads];
#pragma unroll
    for (int hh = 0; hh < kHeads; ++hh) {
        float* ph = p_s + hh * a.chunk;
        float mh = -INFINITY;
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) mh = fmaxf(mh, ph[j]);
        mh = block_max(mh, red);
        float lh = 0.0f;
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
            const float p = __expf(ph[j] - mh);
            ph[j] = p;
            lh += p;
        }
        lh = block_sum(lh, red);  // block_sum syncs before and after its shared write
        m[hh] = mh;
        l[hh] = lh;
    }
    __syncthreads();  // every head's p_s is final

    float acc[kHeads][kAccPerThread];
#pragma unroll
    for (int hh = 0; hh < kHeads; ++hh)
#pragma unroll
        for (int i = 0; i < kAccPerThread; ++i) acc[hh][i] = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
        const bf16* vp = a.v + (b * a.cache_len + k0 + j) * a.kv_row_stride + g * a.kv_head_stride;
#pragma unroll
        for (int i = 0; i < kAccPerThread; ++i) {
            const int64_t d = threadIdx.x + i * kAttnThreads;
            if (d < a.dv) {
                const float v = to_f(vp[d]);
#pragma unroll
                for (int hh = 0; hh < kHeads; ++hh) acc[hh][i] += p_s[hh * a.chunk + j] * v;
            }
        }
    }
#pragma unroll
    for (int hh = 0; hh < kHeads; ++hh) {
        float* o = ws_o + ((th0 + hh) * num_splits + split) * a.dv;
#pragma unroll
        for (int i = 0; i < kAccPerThread; ++i) {
            const int64_t d = threadIdx.x + i * kAttnThreads;
            if (d < a.dv) o[d] = acc[hh][i];
        }
        if (threadIdx.x == 0) {
            float* ml = ws_ml + ((th0 + hh) * num_splits + split) * 2;
            ml[0] = m[hh];
            ml[1] = l[hh];
        }
    }
}

// Grid: token * num_heads. Merges the splits: M = max m_s (and the sink), L = sum l_s e^(m_s - M) (+ e^(sink - M)),
// out = sum o_s e^(m_s - M) / L.
__global__ void attention_merge_kernel(AttentionArgs a, const float* ws_ml, const float* ws_o, int num_splits) {
    const int64_t th = blockIdx.x;
    const int64_t h = th % a.num_heads;
    const float* ml = ws_ml + th * num_splits * 2;
    float M = a.sinks ? a.sinks[h] : -INFINITY;
    for (int s = 0; s < num_splits; ++s) M = fmaxf(M, ml[2 * s]);
    float L = a.sinks ? __expf(a.sinks[h] - M) : 0.0f;
    for (int s = 0; s < num_splits; ++s)
        if (ml[2 * s + 1] > 0.0f) L += ml[2 * s + 1] * __expf(ml[2 * s] - M);
    const float inv = L > 0.0f ? 1.0f / L : 0.0f;
    for (int64_t d = threadIdx.x; d < a.dv; d += blockDim.x) {
        float acc = 0.0f;
        for (int s = 0; s < num_splits; ++s)
            if (ml[2 * s + 1] > 0.0f) acc += ws_o[(th * num_splits + s) * a.dv + d] * __expf(ml[2 * s] - M);
        a.out[(a.token_begin * a.num_heads + th) * a.dv + d] = to_bf(acc * inv);
    }
}

// Query heads per block: the most of 8, 4, 2 that share one kv head (they divide the GQA group; MLA has one latent
// head for all) and whose q and scores fit the default 48 KiB of dynamic shared memory; else 1.
int heads_per_block(const AttentionArgs& a) {
    const int64_t group = a.num_heads / a.num_kv_heads;
    for (int h : {8, 4, 2})
        if (group % h == 0 && static_cast<int64_t>(h) * (a.dk + a.chunk) * 4 + 256 <= 48 * 1024) return h;
    return 1;
}

int64_t num_splits_of(const AttentionArgs& a) {
    int64_t max_keys = a.pos_base + a.tokens_per_seq;  // the last query of a sequence sees every key up to itself
    if (a.window > 0) max_keys = std::min(max_keys, a.window);
    if (a.local_chunk > 0) max_keys = std::min(max_keys, a.local_chunk);
    return (max_keys + a.chunk - 1) / a.chunk;
}

}  // namespace

int64_t attention_max_dv() { return kMaxDv; }

// Query tokens per launch: as many as the workspace budget holds (at least one). Prefill of long sequences runs in
// query tiles, so the split workspace is bounded by the tile, not by tokens x heads x splits (DeepSeek-V3 at 16k
// tokens would need ~138 GB in one launch).
int64_t tile_tokens_of(const AttentionArgs& a) {
    const int64_t per_token = a.num_heads * num_splits_of(a) * (2 + a.dv) * static_cast<int64_t>(sizeof(float));
    return std::max<int64_t>(
        1, std::min<int64_t>(a.num_tokens, kAttnWorkspaceBudgetBytes / std::max<int64_t>(1, per_token)));
}

size_t attention_workspace_bytes(const AttentionArgs& a) {
    if (attention_kernel_of(a) == AttentionKernel::flash) return 0;
    const int64_t rows = tile_tokens_of(a) * a.num_heads * num_splits_of(a);
    return static_cast<size_t>(rows) * (2 + a.dv) * sizeof(float);
}

// Decode: the largest chunk (256 down to 32 keys, multiples of the latent kernel's key tile) whose launch has at
// least two blocks per SM; small batches then split the context finer instead of leaving most SMs idle (DeepSeek-V3
// at batch 1 and 1024 keys: 16 blocks of 256 keys, or 128 of 32). Prefill (flash) has no splits.
int64_t attention_decode_chunk(const AttentionArgs& a, int num_sms) {
    const AttentionKernel kernel = attention_kernel_of(a);
    if (kernel == AttentionKernel::flash) return a.chunk;
    int64_t chunk = 256;
    for (; chunk > 32; chunk /= 2) {
        AttentionArgs c = a;
        c.chunk = chunk;
        const int64_t per_split = kernel == AttentionKernel::latent ? attn_tile::latent_blocks_per_token(c)
                                                                    : c.num_heads / heads_per_block(c);
        if (tile_tokens_of(c) * per_split * num_splits_of(c) >= 2 * int64_t(num_sms)) break;
    }
    return chunk;
}

void launch_rope_table(float* cos_sin, int64_t first_pos, int64_t num_pos, int64_t rot_dim, double theta,
                       cudaStream_t stream) {
    const int64_t n = num_pos * (rot_dim / 2);
    if (n <= 0) return;
    rope_table_kernel<<<grid_for(n, 256), 256, 0, stream>>>(cos_sin, first_pos, num_pos, rot_dim, theta);
    MOEBENCH_LAUNCH_CHECK();
}

void launch_rope(bf16* x, int64_t num_tokens, int64_t num_heads, int64_t token_stride, int64_t head_stride,
                 int64_t dim_offset, int64_t rot_dim, int64_t tokens_per_seq, const float* cos_sin,
                 cudaStream_t stream) {
    const int64_t n = num_tokens * num_heads * (rot_dim / 2);
    if (n <= 0) return;
    rope_kernel<<<grid_for(n, 256), 256, 0, stream>>>(x, num_tokens, num_heads, token_stride, head_stride, dim_offset,
                                                      rot_dim, tokens_per_seq, cos_sin);
    MOEBENCH_LAUNCH_CHECK();
}

void launch_kv_append(const bf16* src, int64_t src_ld, bf16* cache, int64_t row_elems, int64_t num_tokens,
                      int64_t tokens_per_seq, int64_t cache_len, int64_t pos_base, cudaStream_t stream) {
    const int64_t n = num_tokens * row_elems;
    if (n <= 0) return;
    kv_append_kernel<<<grid_for(n, 256), 256, 0, stream>>>(src, src_ld, cache, row_elems, num_tokens, tokens_per_seq,
                                                           cache_len, pos_base);
    MOEBENCH_LAUNCH_CHECK();
}

void launch_attention(const AttentionArgs& a, void* workspace, cudaStream_t stream) {
    if (a.num_tokens <= 0) return;
    MOEBENCH_CHECK(a.dk > 0 && a.dk <= kMaxDk && a.dv > 0 && a.dv <= kMaxDv,
                   "attention: head dims dk={} dv={} exceed the kernel's limits ({} / {})", a.dk, a.dv, kMaxDk, kMaxDv);
    MOEBENCH_CHECK(a.chunk > 0 && a.chunk <= kMaxChunk, "attention: chunk {} not in [1, {}]", a.chunk, kMaxChunk);
    MOEBENCH_CHECK(a.num_kv_heads > 0 && a.num_heads % a.num_kv_heads == 0,
                   "attention: heads {} not a multiple of kv heads {}", a.num_heads, a.num_kv_heads);
    MOEBENCH_CHECK(a.tokens_per_seq > 0 && a.num_tokens % a.tokens_per_seq == 0 && a.pos_base >= 0 &&
                       a.cache_len >= a.pos_base + a.tokens_per_seq,
                   "attention: {} tokens of {} per sequence at position {} do not fit a cache of {}", a.num_tokens,
                   a.tokens_per_seq, a.pos_base, a.cache_len);
    const AttentionKernel kernel = attention_kernel_of(a);
    if (kernel == AttentionKernel::flash) return launch_attention_flash(a, stream);
    const int64_t splits64 = num_splits_of(a);
    int64_t tile = tile_tokens_of(a);
    if (a.workspace_bytes >= 0) {  // a workspace sized for another layer's shape: never run past it
        const int64_t per_token = a.num_heads * splits64 * (2 + a.dv) * static_cast<int64_t>(sizeof(float));
        MOEBENCH_CHECK(a.workspace_bytes >= per_token, "attention: workspace of {} bytes < one token's {}",
                       a.workspace_bytes, per_token);
        tile = std::min(tile, a.workspace_bytes / per_token);
    }
    // gridDim.x <= 2^31 - 1, gridDim.y <= 65535.
    MOEBENCH_CHECK(tile * a.num_heads < (int64_t(1) << 31) && splits64 <= 65535, "attention: grid too large ({} x {})",
                   tile * a.num_heads, splits64);
    const int splits = static_cast<int>(splits64);
    const int heads = heads_per_block(a);
    const size_t smem = static_cast<size_t>(heads) * (a.dk + a.chunk) * sizeof(float);
    for (int64_t begin = 0; begin < a.num_tokens; begin += tile) {
        AttentionArgs part = a;
        part.token_begin = begin;
        const int64_t rows = std::min(tile, a.num_tokens - begin) * a.num_heads;
        float* ws_ml = static_cast<float*>(workspace);
        float* ws_o = ws_ml + rows * splits * 2;
        const dim3 grid(static_cast<unsigned>(rows / heads), static_cast<unsigned>(splits));
        if (kernel == AttentionKernel::latent) {
            attn_tile::launch_latent_partials(part, rows / a.num_heads, ws_ml, ws_o, splits, stream);
        } else {
            auto* split_kernel = heads == 8   ? attention_split_kernel<8>
                                 : heads == 4 ? attention_split_kernel<4>
                                 : heads == 2 ? attention_split_kernel<2>
                                              : attention_split_kernel<1>;
            split_kernel<<<grid, kAttnThreads, smem, stream>>>(part, ws_ml, ws_o, splits);
            MOEBENCH_LAUNCH_CHECK();
        }
        attention_merge_kernel<<<static_cast<unsigned>(rows), 128, 0, stream>>>(part, ws_ml, ws_o, splits);
        MOEBENCH_LAUNCH_CHECK();
    }
}

}  // namespace moebench::kernels
