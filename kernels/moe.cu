// SPDX-License-Identifier: Apache-2.0
// MoE kernels: router scoring + top-k (moe_core's route_row in its three parts; one warp per token), deterministic
// permutation by expert (tile histogram, one scan, stable scatter: O(T k)), row gather, the family's activation,
// weighted combine with residual (16-byte loads), shared-expert gate. No kernel here needs a host-side count.
#include "core/moe_core.cuh"
#include "kernels/common.cuh"

#include <cub/block/block_scan.cuh>

#include <climits>
#include <cmath>

namespace moebench::kernels {
namespace {

// ---- top-k ------------------------------------------------------------------------------------------------------
// One thread per token: the row semantics are moe_core's route_row / soft_topn_row, run verbatim, so the CPU and
// the GPU choose the same experts by construction (same code, same tie-break). Per-token scratch lives in global
// memory (beyond the warp kernel's limits: E > 512, k > 16 or more than 64 groups). Steps: 1) biased logits into
// scratch; 2) route; 3) write ids/weights.
__global__ void topk_thread_kernel(const float* logits, const float* bias, const float* correction, core::RouteParams p,
                                   int soft_topn, int64_t num_tokens, int32_t* ids, float* weights, float* scratch,
                                   int64_t scratch_per_token) {
    const int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
    if (t >= num_tokens) return;
    const int E = p.num_experts;
    float* s = scratch + t * scratch_per_token;
    float* row = s;       // [E] logits (+ router bias)
    float* work = s + E;  // route_scratch_floats(E, G)
    for (int e = 0; e < E; ++e) row[e] = logits[t * E + e] + (bias ? bias[e] : 0.0f);
    if (soft_topn > 0) {
        core::soft_topn_row(row, E, soft_topn, work, ids + t * soft_topn, weights + t * soft_topn);
    } else {
        core::route_row(p, row, correction, work, ids + t * p.top_k, weights + t * p.top_k);
    }
}

// One warp per token (E <= kWarpTopkMaxExperts, k <= kWarpTopkMaxK): the per-expert arrays of route_row are built by
// the lanes (expert i on lane i % 32) in shared memory, the group mask and the weights run on lane 0 with moe_core's
// own functions, and the top-k is a k-round warp argmax over per-lane sorted candidates under moe_core::topk_better
// (a strict total order, so the chosen set and its order equal topk_row's). Sums over experts (softmax, sparsemixer)
// run in lane order: equal to the sequential sum within fp32 rounding, as expf on the device already is.
constexpr int kTopkWarps = 4;
constexpr int kWarpTopkMaxK = 16;
constexpr int kWarpTopkMaxExperts = 512;
constexpr int kWarpTopkMaxGroups = 64;

// Floats of shared memory per warp: row, scores, choice, keep bytes (E each), chosen scores and ids, group scores.
__host__ __device__ inline int warp_topk_floats(int E) { return 4 * E + 2 * kWarpTopkMaxK + 2 * kWarpTopkMaxGroups; }

// Top-k of key[0..n) (optionally masked) over the warp; lane 0 receives out_scores/out_ids. Positions with no
// candidate left (fewer kept experts than k) get id -1.
__device__ void warp_topk(const float* key, const unsigned char* keep, int n, int k, float* out_scores, int* out_ids) {
    const int lane = threadIdx.x % kWarp;
    float ls[kWarpTopkMaxK];
    int li[kWarpTopkMaxK];
    int count = 0;
    for (int i = lane; i < n; i += kWarp) {
        if (keep && !keep[i]) continue;
        core::topk_insert(key[i], i, ls, li, k, &count);
    }
    int head = 0;
    for (int j = 0; j < k; ++j) {
        const bool has = head < count;
        const float mine_s = has ? ls[head] : -INFINITY;
        const int mine_i = has ? li[head] : INT_MAX;
        float best_s = mine_s;
        int best_i = mine_i;
        for (int o = kWarp / 2; o > 0; o >>= 1) {
            const float other_s = __shfl_xor_sync(0xffffffffu, best_s, o);
            const int other_i = __shfl_xor_sync(0xffffffffu, best_i, o);
            if (core::topk_better(other_s, other_i, best_s, best_i)) {
                best_s = other_s;
                best_i = other_i;
            }
        }
        if (has && best_i == mine_i) ++head;  // expert ids are owned by one lane each: the owner pops its head
        if (lane == 0) {
            out_scores[j] = best_s;
            out_ids[j] = best_i == INT_MAX ? -1 : best_i;
        }
    }
    __syncwarp();
}

// out[i] = softmax(in)[i] over the warp (as core::softmax_row: max, exp, sum, multiply by the inverse).
__device__ void warp_softmax(const float* in, int n, float* out) {
    const int lane = threadIdx.x % kWarp;
    float mx = -INFINITY;
    for (int i = lane; i < n; i += kWarp) mx = fmaxf(mx, in[i]);
    mx = warp_max(mx);
    float sum = 0.0f;
    for (int i = lane; i < n; i += kWarp) {
        out[i] = expf(in[i] - mx);
        sum += out[i];
    }
    const float inv = 1.0f / warp_sum(sum);
    for (int i = lane; i < n; i += kWarp) out[i] *= inv;
    __syncwarp();
}

// Sparsemixer's weight of `sel` with `skip` left out: the denominator summed over the warp.
__device__ float warp_sparsemixer_weight(const float* logits, int n, int sel, int skip, float eps) {
    const int lane = threadIdx.x % kWarp;
    const float m = logits[sel];
    float sum = 0.0f;
    for (int i = lane; i < n; i += kWarp)
        if (i != skip) sum += core::sparsemixer_term(logits[i], m, eps);
    return 1.0f / warp_sum(sum);
}

__global__ void __launch_bounds__(kTopkWarps* kWarp)
    topk_warp_kernel(const float* logits, const float* bias, const float* correction, core::RouteParams p,
                     int soft_topn, int64_t num_tokens, int32_t* ids, float* weights) {
    extern __shared__ float topk_smem[];
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int64_t t = blockIdx.x * int64_t(kTopkWarps) + warp;
    if (t >= num_tokens) return;  // warp-uniform
    const int E = p.num_experts;
    float* row = topk_smem + warp * warp_topk_floats(E);
    float* scores = row + E;
    float* choice = scores + E;
    unsigned char* keep = reinterpret_cast<unsigned char*>(choice + E);
    float* chosen_s = choice + 2 * E;
    int* chosen_i = reinterpret_cast<int*>(chosen_s + kWarpTopkMaxK);
    float* gscores = reinterpret_cast<float*>(chosen_i + kWarpTopkMaxK);
    float* gsel = gscores + kWarpTopkMaxGroups;
    for (int i = lane; i < E; i += kWarp) row[i] = logits[t * E + i] + (bias ? bias[i] : 0.0f);
    __syncwarp();
    if (soft_topn > 0) {  // core::soft_topn_row
        warp_softmax(row, E, scores);
        warp_topk(scores, nullptr, E, soft_topn, chosen_s, chosen_i);
        if (lane == 0) {
            core::soft_topn_weights(chosen_s, soft_topn);
            for (int j = 0; j < soft_topn; ++j) {
                ids[t * soft_topn + j] = chosen_i[j];
                weights[t * soft_topn + j] = chosen_s[j];
            }
        }
        return;
    }
    // (1) per-expert arrays, as core::route_row.
    const int key_kind = core::route_key(p.kind, correction != nullptr);
    if (core::route_softmax_scores(p.kind)) {
        warp_softmax(row, E, scores);
    } else if (p.kind == core::kRouteSigmoidGroupTopk) {
        for (int i = lane; i < E; i += kWarp) scores[i] = core::sigmoidf_(row[i]);
    }
    if (key_kind == core::kKeyChoice)
        for (int i = lane; i < E; i += kWarp) choice[i] = scores[i] + (correction ? correction[i] : 0.0f);
    __syncwarp();
    const float* key = key_kind == core::kKeyLogits ? row : (key_kind == core::kKeyScores ? scores : choice);
    // (2) group mask: group scores on the lanes, the choice of groups on lane 0.
    const unsigned char* mask = nullptr;
    if (core::route_grouped(p)) {
        const int G = p.num_groups, group_size = E / G;
        for (int g = lane; g < G; g += kWarp) gscores[g] = core::route_group_score(p.kind, key, g, group_size);
        __syncwarp();
        if (lane == 0) {
            int gids[kWarpTopkMaxGroups];
            core::group_mask(gscores, G, p.topk_groups, group_size, gsel, gids, keep);
        }
        __syncwarp();
        mask = keep;
    }
    // (3) top-k of the key, then the weights (lane 0; sparsemixer's sums over the warp).
    const int k = p.top_k;
    warp_topk(key, mask, E, p.kind == core::kRouteSparsemixer ? 2 : k, chosen_s, chosen_i);
    if (p.kind == core::kRouteSparsemixer) {
        const int i0 = __shfl_sync(0xffffffffu, lane == 0 ? chosen_i[0] : 0, 0);
        const int i1 = __shfl_sync(0xffffffffu, lane == 0 ? chosen_i[1] : 0, 0);
        const float w0 = warp_sparsemixer_weight(row, E, i0, -1, p.jitter_eps);
        const float w1 = warp_sparsemixer_weight(row, E, i1, i0, p.jitter_eps);
        if (lane == 0) {
            ids[t * 2] = i0;
            ids[t * 2 + 1] = i1;
            weights[t * 2] = w0;
            weights[t * 2 + 1] = w1;
        }
        return;
    }
    if (lane == 0) {
        core::route_weights(p, row, scores, chosen_i, chosen_s);
        for (int j = 0; j < k; ++j) {
            ids[t * k + j] = chosen_i[j];
            weights[t * k + j] = chosen_s[j];
        }
    }
}

// ---- permutation ----------------------------------------------------------------------------------------------
// O(T k) and stable (moe_core::permutation_map's order: by expert, then assignment a = t*k + j ascending):
// 1) one warp per tile of assignments counts the tile's assignments per expert (shared-memory histogram);
// 2) one block turns the tile counts into each tile's rank base per expert, clamps to the capacity, scans the kept
//    counts into offsets (cub::BlockScan) and lists the experts that have rows;
// 3) one warp per tile walks its assignments 32 at a time in order; lanes with the same expert (__match_any_sync)
//    rank among themselves by lane, so row = offsets[e] + rank base of the tile + running rank; ranks >= capacity drop.
constexpr int kPermWarps = 4;
constexpr int kPermMaxTiles = 256;  // the scan walks the tiles of each expert serially: keep the walk short
constexpr int kScanThreads = 256;
constexpr int kScanItems = 16;  // experts per scan thread: E <= 4096

__host__ __device__ inline int64_t perm_tile_size(int64_t num_assign) {
    const int64_t per_tile = (num_assign + kPermMaxTiles - 1) / kPermMaxTiles;
    const int64_t rounded = (per_tile + kWarp - 1) / kWarp * kWarp;
    return rounded < 256 ? 256 : rounded;
}

__global__ void tile_histogram_kernel(const int32_t* ids, int64_t num_assign, int64_t tile_size, int64_t num_tiles,
                                      int num_experts, int32_t* tile_counts) {
    extern __shared__ int32_t hist_smem[];
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int64_t tile = blockIdx.x * int64_t(kPermWarps) + warp;
    if (tile >= num_tiles) return;  // warp-uniform; no block-wide barrier below
    int32_t* hist = hist_smem + warp * num_experts;
    for (int e = lane; e < num_experts; e += kWarp) hist[e] = 0;
    __syncwarp();
    const int64_t begin = tile * tile_size, end = min(num_assign, begin + tile_size);
    for (int64_t a = begin + lane; a < end; a += kWarp) {
        const int e = ids[a];
        if (e >= 0 && e < num_experts) atomicAdd(&hist[e], 1);
    }
    __syncwarp();
    for (int e = lane; e < num_experts; e += kWarp) tile_counts[tile * num_experts + e] = hist[e];
}

// One block. tile_counts[tile][e] becomes the tile's exclusive rank base within expert e (arrival order).
// active[0] = experts with kept rows, active[1..] their ids ascending.
__global__ void __launch_bounds__(kScanThreads)
    expert_scan_kernel(int32_t* tile_counts, int64_t num_tiles, int num_experts, int64_t capacity, int32_t* counts,
                       int32_t* offsets, int32_t* dropped, int32_t* active, int32_t* tile_offsets) {
    using Scan = cub::BlockScan<int, kScanThreads>;
    __shared__ typename Scan::TempStorage temp;
    __shared__ int32_t raw[kScanThreads * kScanItems];
    __shared__ int drops;
    if (threadIdx.x == 0) drops = 0;
    // Striped over experts (coalesced across threads), serial over tiles (independent loads: unrolled).
    for (int e = threadIdx.x; e < num_experts; e += kScanThreads) {
        int32_t run = 0;
#pragma unroll 8
        for (int64_t tl = 0; tl < num_tiles; ++tl) {
            const int32_t c = tile_counts[tl * num_experts + e];
            tile_counts[tl * num_experts + e] = run;
            run += c;
        }
        raw[e] = run;
    }
    __syncthreads();
    int kept[kScanItems], has[kScanItems], local_drops = 0;
    for (int i = 0; i < kScanItems; ++i) {
        const int e = threadIdx.x * kScanItems + i;  // blocked: what BlockScan expects
        const int c = e < num_experts ? raw[e] : 0;
        const int cap = (capacity >= 0 && c > capacity) ? static_cast<int>(capacity) : c;
        local_drops += c - cap;
        kept[i] = cap;
        has[i] = cap > 0 ? 1 : 0;
    }
    int off[kScanItems], pos[kScanItems], total = 0, num_active = 0;
    Scan(temp).ExclusiveSum(kept, off, total);
    __syncthreads();  // temp is reused
    Scan(temp).ExclusiveSum(has, pos, num_active);
    if (local_drops) atomicAdd(&drops, local_drops);
    // The tile map: tiles of kExpertTileRows rows per expert, scanned (the tiled expert GEMM walks it).
    int tiles[kScanItems], tile_off[kScanItems], total_tiles = 0;
    for (int i = 0; i < kScanItems; ++i) tiles[i] = static_cast<int>((kept[i] + kExpertTileRows - 1) / kExpertTileRows);
    __syncthreads();  // temp is reused
    Scan(temp).ExclusiveSum(tiles, tile_off, total_tiles);
    for (int i = 0; i < kScanItems; ++i) {
        const int e = threadIdx.x * kScanItems + i;
        if (e >= num_experts) break;
        counts[e] = kept[i];
        offsets[e] = off[i];
        if (has[i]) active[1 + pos[i]] = e;
        if (tile_offsets) tile_offsets[e] = tile_off[i];
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        offsets[num_experts] = total;
        active[0] = num_active;
        *dropped = drops;
        if (tile_offsets) tile_offsets[num_experts] = total_tiles;
    }
}

__global__ void tile_scatter_kernel(int32_t* ids, float* weights, int64_t num_assign, int64_t tile_size,
                                    int64_t num_tiles, int num_experts, int64_t capacity, const int32_t* tile_base,
                                    const int32_t* offsets, int32_t* perm_slot, int32_t* perm_expert,
                                    int32_t* slot_pos) {
    extern __shared__ int32_t run_smem[];
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int64_t tile = blockIdx.x * int64_t(kPermWarps) + warp;
    if (tile >= num_tiles) return;  // warp-uniform
    int32_t* run = run_smem + warp * num_experts;
    for (int e = lane; e < num_experts; e += kWarp) run[e] = tile_base[tile * num_experts + e];
    __syncwarp();
    const unsigned lanes_below = (1u << lane) - 1u;
    const int64_t begin = tile * tile_size, end = min(num_assign, begin + tile_size);
    for (int64_t chunk = begin; chunk < end; chunk += kWarp) {
        const int64_t a = chunk + lane;
        const bool valid = a < end;
        int e = valid ? ids[a] : -1;
        if (e >= num_experts) e = -1;
        const unsigned peers = __match_any_sync(0xffffffffu, e);
        const int rank = e >= 0 ? run[e] + __popc(peers & lanes_below) : -1;
        __syncwarp();
        if (e >= 0 && (31 - __clz(peers)) == lane) run[e] += __popc(peers);  // the last peer moves the cursor
        __syncwarp();
        if (!valid) continue;
        if (e < 0) {
            slot_pos[a] = -1;
        } else if (capacity >= 0 && rank >= capacity) {
            ids[a] = -1;
            weights[a] = 0.0f;
            slot_pos[a] = -1;
        } else {
            const int32_t row = offsets[e] + rank;
            slot_pos[a] = row;
            perm_slot[row] = static_cast<int32_t>(a);
            perm_expert[row] = e;
        }
    }
}

// Permuted rows, as many as offsets[E] says (read on the device: no host count); 16-byte copies when the row allows.
__global__ void gather_rows_kernel(const bf16* x, const int32_t* perm_slot, const float* weights, bool scale_by_weight,
                                   bf16* x_perm, const int32_t* num_rows_dev, int64_t max_rows, int64_t k,
                                   int64_t hidden) {
    const int64_t num_rows = min(static_cast<int64_t>(*num_rows_dev), max_rows);  // never past the caller's buffer
    for (int64_t r = blockIdx.x; r < num_rows; r += gridDim.x) {
        const int32_t slot = perm_slot[r];
        const int64_t t = slot / k;
        const bf16* src = x + t * hidden;
        bf16* dst = x_perm + r * hidden;
        const float w = scale_by_weight ? weights[slot] : 1.0f;
        if (hidden % 8 == 0) {
            const uint4* s4 = reinterpret_cast<const uint4*>(src);
            uint4* d4 = reinterpret_cast<uint4*>(dst);
            for (int64_t c = threadIdx.x; c < hidden / 8; c += blockDim.x) {
                if (!scale_by_weight) {
                    d4[c] = s4[c];
                } else {
                    float v[8];
                    unpack_bf16x8(s4[c], v);
                    for (int q = 0; q < 8; ++q) v[q] *= w;
                    d4[c] = pack_bf16x8(v);
                }
            }
        } else {
            for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x)
                dst[c] = scale_by_weight ? to_bf(to_f(src[c]) * w) : src[c];
        }
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

// One block per token; threads over hidden, 8 columns per thread step (16-byte loads of y_perm, the bias, the shared
// output and the residual when hidden % 8 == 0). The k-way sum runs in fp32 in slot order (j = 0..k-1), as the CPU.
template <int kVec>
__device__ void load_vec(const bf16* p, float* v) {
    if constexpr (kVec == 8) {
        unpack_bf16x8(*reinterpret_cast<const uint4*>(p), v);
    } else {
        v[0] = to_f(*p);
    }
}
template <int kVec>
__device__ void store_vec(bf16* p, const float* v) {
    if constexpr (kVec == 8) {
        *reinterpret_cast<uint4*>(p) = pack_bf16x8(v);
    } else {
        *p = to_bf(v[0]);
    }
}

template <int kVec>
__global__ void combine_kernel(const bf16* y_perm, const int32_t* slot_pos, const int32_t* ids, const float* weights,
                               bool unit_weights, const bf16* down_bias, const bf16* shared,
                               const float* shared_gate_logit, bf16* moe_out, bf16* residual, int64_t k,
                               int64_t hidden) {
    const int64_t t = blockIdx.x;
    const float sg = shared_gate_logit ? core::sigmoidf_(shared_gate_logit[t]) : 1.0f;
    for (int64_t c = threadIdx.x * int64_t(kVec); c < hidden; c += int64_t(blockDim.x) * kVec) {
        float acc[kVec], v[kVec], b[kVec];
        for (int q = 0; q < kVec; ++q) acc[q] = 0.0f;
        for (int64_t j = 0; j < k; ++j) {
            const int64_t a = t * k + j;
            const int32_t row = slot_pos[a];
            if (row < 0) continue;
            load_vec<kVec>(y_perm + static_cast<int64_t>(row) * hidden + c, v);
            if (down_bias) {
                load_vec<kVec>(down_bias + static_cast<int64_t>(ids[a]) * hidden + c, b);
                for (int q = 0; q < kVec; ++q) v[q] += b[q];
            }
            const float w = unit_weights ? 1.0f : weights[a];
            for (int q = 0; q < kVec; ++q) acc[q] += w * v[q];
        }
        if (shared) {
            load_vec<kVec>(shared + t * hidden + c, v);
            for (int q = 0; q < kVec; ++q) acc[q] += sg * v[q];
        }
        // moe_out is stored in bf16; the residual adds the stored (rounded) value, as before.
        for (int q = 0; q < kVec; ++q) acc[q] = to_f(to_bf(acc[q]));
        store_vec<kVec>(moe_out + t * hidden + c, acc);
        if (residual) {
            load_vec<kVec>(residual + t * hidden + c, v);
            for (int q = 0; q < kVec; ++q) v[q] += acc[q];
            store_vec<kVec>(residual + t * hidden + c, v);
        }
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
    return num_experts +
           core::route_scratch_floats(static_cast<int>(num_experts), static_cast<int>(num_groups < 1 ? 1 : num_groups));
}

const char* launch_topk(const float* logits, const float* bias, const float* correction, const RoutingParams& p,
                        int64_t num_tokens, int32_t* ids, float* weights, float* scratch, cudaStream_t stream) {
    const core::RouteParams& rp = p.route;
    const bool warp_ok = rp.num_experts <= kWarpTopkMaxExperts && rp.num_groups <= kWarpTopkMaxGroups &&
                         (p.soft_topn > 0 ? p.soft_topn : rp.top_k) <= kWarpTopkMaxK;
    const char* name = warp_ok ? (p.soft_topn > 0 ? "soft_topn_warp_per_token" : "topk_warp_per_token")
                               : (p.soft_topn > 0 ? "soft_topn_thread_per_token" : "topk_thread_per_token");
    if (num_tokens <= 0) return name;
    MOEBENCH_CHECK(rp.topk_groups <= 64, "topk_groups {} > 64 is not supported by moe_core", rp.topk_groups);
    if (warp_ok) {
        const unsigned grid = static_cast<unsigned>((num_tokens + kTopkWarps - 1) / kTopkWarps);
        const size_t smem = size_t(kTopkWarps) * warp_topk_floats(rp.num_experts) * sizeof(float);
        topk_warp_kernel<<<grid, kTopkWarps * kWarp, smem, stream>>>(logits, bias, correction, rp, p.soft_topn,
                                                                     num_tokens, ids, weights);
        MOEBENCH_LAUNCH_CHECK();
        return name;
    }
    // Beyond the warp kernel's limits (E > 512, k > 16): one thread per token running route_row verbatim.
    const int block = 128;
    const unsigned grid = static_cast<unsigned>((num_tokens + block - 1) / block);
    topk_thread_kernel<<<grid, block, 0, stream>>>(logits, bias, correction, rp, p.soft_topn, num_tokens, ids, weights,
                                                   scratch, topk_scratch_floats(rp.num_experts, rp.num_groups));
    MOEBENCH_LAUNCH_CHECK();
    return name;
}

int64_t permute_workspace_ints(int64_t num_assign, int64_t num_experts) {
    const int64_t tiles =
        (std::max<int64_t>(num_assign, 1) + perm_tile_size(num_assign) - 1) / perm_tile_size(num_assign);
    return tiles * std::max<int64_t>(num_experts, 1);
}

int64_t permute_max_experts() { return int64_t(kScanThreads) * kScanItems; }

void launch_permute_index(int32_t* ids, float* weights, int64_t num_tokens, int64_t k, int64_t num_experts,
                          int64_t capacity, const PermuteMaps& maps, int32_t* workspace, cudaStream_t stream) {
    const int64_t num_assign = num_tokens * k;
    if (num_experts <= 0) return;
    MOEBENCH_CHECK(num_experts <= permute_max_experts(), "permutation: {} experts > {}", num_experts,
                   permute_max_experts());
    const int E = static_cast<int>(num_experts);
    const int64_t tile = perm_tile_size(num_assign);
    const int64_t tiles = std::max<int64_t>(1, (num_assign + tile - 1) / tile);
    const unsigned blocks = static_cast<unsigned>((tiles + kPermWarps - 1) / kPermWarps);
    const size_t smem = size_t(kPermWarps) * E * sizeof(int32_t);
    if (smem > 48 * 1024) {  // E > 3072: beyond the default dynamic shared memory (H100/H200 allow 227 KiB)
        MOEBENCH_CUDA_CHECK(cudaFuncSetAttribute(tile_histogram_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 static_cast<int>(smem)));
        MOEBENCH_CUDA_CHECK(cudaFuncSetAttribute(tile_scatter_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 static_cast<int>(smem)));
    }
    if (num_assign > 0) {
        tile_histogram_kernel<<<blocks, kPermWarps * kWarp, smem, stream>>>(ids, num_assign, tile, tiles, E, workspace);
        MOEBENCH_LAUNCH_CHECK();
    } else {
        MOEBENCH_CUDA_CHECK(cudaMemsetAsync(workspace, 0, size_t(E) * sizeof(int32_t), stream));
    }
    expert_scan_kernel<<<1, kScanThreads, 0, stream>>>(workspace, tiles, E, capacity, maps.counts, maps.offsets,
                                                       maps.dropped, maps.active, maps.tile_offsets);
    MOEBENCH_LAUNCH_CHECK();
    if (num_assign > 0) {
        tile_scatter_kernel<<<blocks, kPermWarps * kWarp, smem, stream>>>(
            ids, weights, num_assign, tile, tiles, E, capacity, workspace, maps.offsets, maps.perm_slot,
            maps.perm_expert, maps.slot_pos);
        MOEBENCH_LAUNCH_CHECK();
    }
}

void launch_gather_rows(const bf16* x, const int32_t* perm_slot, const float* weights, bool scale_by_weight,
                        bf16* x_perm, const int32_t* num_rows_dev, int64_t max_rows, int64_t k, int64_t hidden,
                        cudaStream_t stream) {
    if (max_rows <= 0) return;
    const unsigned grid = static_cast<unsigned>(std::min<int64_t>(max_rows, 8192));
    gather_rows_kernel<<<grid, 128, 0, stream>>>(x, perm_slot, weights, scale_by_weight, x_perm, num_rows_dev, max_rows,
                                                 k, hidden);
    MOEBENCH_LAUNCH_CHECK();
}

void launch_activation(const bf16* h, bf16* a, int64_t rows, int64_t inter, int act, float limit, const bf16* bias,
                       const int32_t* row_expert, cudaStream_t stream) {
    if (rows * inter <= 0) return;
    activation_kernel<<<grid_for(rows * inter, 256), 256, 0, stream>>>(h, a, rows, inter, act, limit, bias, row_expert);
    MOEBENCH_LAUNCH_CHECK();
}

void launch_combine(const bf16* y_perm, const int32_t* slot_pos, const int32_t* ids, const float* weights,
                    bool unit_weights, const bf16* down_bias, const bf16* shared, const float* shared_gate_logit,
                    bf16* moe_out, bf16* residual, int64_t num_tokens, int64_t k, int64_t hidden, cudaStream_t stream) {
    if (num_tokens <= 0) return;
    const unsigned grid = static_cast<unsigned>(num_tokens);
    if (hidden % 8 == 0) {
        const int block = static_cast<int>(std::min<int64_t>(256, std::max<int64_t>(32, (hidden / 8 + 31) / 32 * 32)));
        combine_kernel<8><<<grid, block, 0, stream>>>(y_perm, slot_pos, ids, weights, unit_weights, down_bias, shared,
                                                      shared_gate_logit, moe_out, residual, k, hidden);
    } else {
        combine_kernel<1><<<grid, 256, 0, stream>>>(y_perm, slot_pos, ids, weights, unit_weights, down_bias, shared,
                                                    shared_gate_logit, moe_out, residual, k, hidden);
    }
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
