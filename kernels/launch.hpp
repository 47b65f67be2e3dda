// SPDX-License-Identifier: Apache-2.0
// Host-callable launchers of moebench's own CUDA kernels (kernels/*.cu). Plain C++ header: g++ includes it.
// All pointers are device pointers; all launches are asynchronous on `stream` and check the launch status.
// Layouts are row-major; "bf16" is __nv_bfloat16; accumulation is fp32 everywhere.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "core/moe_core.cuh"

#include <cstdint>

namespace moebench::kernels {

using bf16 = __nv_bfloat16;

// ---- rng.cu: weights and inputs from the seed, with moe_core.cuh's counter-based RNG --------------------------------
/// dst[i] = bf16(offset + scale * core::uniform_pm1(base, first_index + i)), i < n
/// (base = core::rng_base(seed, core::weight_stream(layer, id)), exactly as the CPU backend fills its fp32 copy).
void launch_fill_bf16(bf16* dst, int64_t n, uint64_t base, uint64_t first_index, float scale, float offset,
                      cudaStream_t stream);
/// Same, fp32 destination (biases, router correction bias, sinks).
void launch_fill_f32(float* dst, int64_t n, uint64_t base, uint64_t first_index, float scale, float offset,
                     cudaStream_t stream);
/// dst[i] = core::mix64(base + i) mod vocab (token ids).
void launch_fill_token_ids(int32_t* dst, int64_t n, int64_t vocab, uint64_t base, cudaStream_t stream);
/// fp32 -> bf16 and bf16 -> fp32 element-wise conversions.
void launch_f32_to_bf16(const float* src, bf16* dst, int64_t n, cudaStream_t stream);
void launch_bf16_to_f32(const bf16* src, float* dst, int64_t n, cudaStream_t stream);

// ---- basic.cu: embedding, norms, bias, residual --------------------------------------------------------------------
/// out[t, :] = table[ids[t], :]  (table [vocab, hidden]).
void launch_embed(const int32_t* ids, const bf16* table, bf16* out, int64_t num_tokens, int64_t hidden,
                  cudaStream_t stream);
/// RMSNorm (or LayerNorm when `layernorm`) over `cols` of each of `rows` rows. Row r lives at
/// base + (r / heads_per_row) * row_stride + (r % heads_per_row) * cols (heads_per_row = 1: plain rows), in x and y
/// alike. y = x_hat * w (+ b when b != nullptr). y may alias x.
void launch_norm(const bf16* x, int64_t x_row_stride, const bf16* w, const bf16* b, bf16* y, int64_t y_row_stride,
                 int64_t rows, int64_t cols, int64_t heads_per_row, float eps, bool layernorm, cudaStream_t stream);
/// x[t, c] += bias[c] for a [rows, cols] block with row stride `ld`.
void launch_add_bias(bf16* x, int64_t ld, const bf16* bias, int64_t rows, int64_t cols, cudaStream_t stream);
/// The same for fp32 rows (router logits + router bias, gpt-oss), contiguous [rows, cols].
void launch_add_bias_f32(float* x, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream);
/// y[i] += x[i] (bf16, fp32 add).
void launch_add_inplace(bf16* y, const bf16* x, int64_t n, cudaStream_t stream);
/// Copies a [rows, cols] block between strided buffers (bf16); with copies > 1, each source row goes to `copies`
/// places copy_stride apart in its destination row (a row shared by all heads, e.g. MLA's rope key).
void launch_copy_2d(const bf16* src, int64_t src_ld, bf16* dst, int64_t dst_ld, int64_t rows, int64_t cols,
                    cudaStream_t stream, int64_t copies = 1, int64_t copy_stride = 0);

// ---- attention.cu: RoPE, KV cache append, split-context attention ---------------------------------------------------
/// RoPE's cos/sin of positions first_pos .. first_pos + num_pos - 1, as the CPU backend's table: row p holds
/// cos(p f_i) for i < rot_dim / 2, then sin(p f_i), f_i = theta^(-2i / rot_dim), computed in double once (prepare).
void launch_rope_table(float* cos_sin, int64_t first_pos, int64_t num_pos, int64_t rot_dim, double theta,
                       cudaStream_t stream);
/// Rotate-half (NeoX) RoPE in fp32 on `rot_dim` dims starting at `dim_offset` of each head. Head h of token t lives at
/// x + t * token_stride + h * head_stride. Token t is at position pos_base + (t % tokens_per_seq), whose row of
/// cos_sin (from launch_rope_table with first_pos = pos_base) is t % tokens_per_seq.
void launch_rope(bf16* x, int64_t num_tokens, int64_t num_heads, int64_t token_stride, int64_t head_stride,
                 int64_t dim_offset, int64_t rot_dim, int64_t tokens_per_seq, const float* cos_sin,
                 cudaStream_t stream);
/// Writes the new tokens' rows into the cache. Token t (sequence t / tokens_per_seq, step s = t % tokens_per_seq)
/// goes to cache row (seq * cache_len + pos_base + s); each row is `row_elems` wide, read from src + t * src_ld.
void launch_kv_append(const bf16* src, int64_t src_ld, bf16* cache, int64_t row_elems, int64_t num_tokens,
                      int64_t tokens_per_seq, int64_t cache_len, int64_t pos_base, cudaStream_t stream);

/// Attention of `num_tokens` query tokens (token t: sequence t / tokens_per_seq, causal position
/// pos_base + t % tokens_per_seq; it sees keys [lo, pos] with lo = max(0, pos - window + 1) under a sliding window,
/// and lo = (pos / local_chunk) * local_chunk under Llama-4's chunked local attention; both as the CPU backend).
/// q: head h of token t at q + t * q_token_stride + h * q_head_stride, dk wide. Keys of sequence b, position j, kv head
/// g: k + (b * cache_len + j) * kv_row_stride + g * kv_head_stride (dk wide); values likewise from v (dv wide). GQA:
/// query head h uses kv head h / (num_heads / num_kv_heads). sinks (may be null): one logit per head added to the
/// softmax denominator (gpt-oss). out: [num_tokens, num_heads, dv] contiguous (bf16). Split over the context in chunks
/// of `chunk` keys; partials go to workspace (attention_workspace_bytes(), at most kAttnWorkspaceBudgetBytes plus one
/// token's worth: queries run in tiles that fit). Which attention kernel runs: split-context (attention.cu: decode, any
/// shape; CUDA cores), flash (attention_flash.cu: prefill on tensor cores, dk and dv <= 256 and multiples of 16) or
/// latent (attention_latent.cu: split-context over MLA's latent cache on tensor cores, all heads of a token as the rows
/// of a tile; one kv head whose values are the first dv columns of its keys). automatic: flash for 16+ queries per
/// sequence when it fits, else latent for 16+ heads on one shared latent row when it fits, else split.
enum class AttentionKernel { automatic, split, flash, latent };
struct AttentionArgs {
    const bf16* q = nullptr;
    int64_t q_token_stride = 0, q_head_stride = 0;
    const bf16* k = nullptr;
    const bf16* v = nullptr;
    int64_t kv_row_stride = 0, kv_head_stride = 0;
    bf16* out = nullptr;
    const float* sinks = nullptr;
    int64_t num_tokens = 0, tokens_per_seq = 1, cache_len = 0, pos_base = 0;
    int64_t num_heads = 0, num_kv_heads = 0, dk = 0, dv = 0;
    int64_t window = 0;       // sliding window in keys; 0 = unlimited
    int64_t local_chunk = 0;  // chunked local attention (Llama-4 attention_chunk); 0 = none
    float scale = 1.0f;
    int64_t chunk = 256;           // keys per split of the context (the kernel's work decomposition, not semantics)
    int64_t token_begin = 0;       // set by launch_attention for each query tile (callers leave it 0)
    int64_t workspace_bytes = -1;  // the workspace's size; -1 = attention_workspace_bytes(*this). Bounds the tile
    AttentionKernel kernel = AttentionKernel::automatic;
    bool values_in_keys = false;  // v = the first dv columns of the key rows (absorbed MLA's latent cache)
};
/// The split workspace is bounded by this many bytes: longer prefills run in query tiles.
constexpr int64_t kAttnWorkspaceBudgetBytes = int64_t(1) << 30;
int64_t attention_max_dv();  // largest value width (dv: head_dim, MLA kv_lora_rank) the kernel supports
/// 0 when the flash kernel runs (it keeps its state in shared memory).
size_t attention_workspace_bytes(const AttentionArgs& a);
/// Keys per split for decode: the largest of 256, 128, 64, 32 whose launch fills num_sms SMs twice (else 32).
int64_t attention_decode_chunk(const AttentionArgs& a, int num_sms);
AttentionKernel attention_kernel_of(const AttentionArgs& a);  // the kernel launch_attention runs for these args
bool flash_attention_fits(const AttentionArgs& a);            // shapes, strides, alignment, shared memory
bool latent_attention_fits(const AttentionArgs& a);           // the same for the latent kernel
constexpr int64_t kLatentMinHeads = 16;                       // automatic: fewer heads stay on the split kernel
void launch_attention(const AttentionArgs& a, void* workspace, cudaStream_t stream);
void launch_attention_flash(const AttentionArgs& a, cudaStream_t stream);  // launch_attention's flash branch

// ---- moe.cu: router top-k, permutation, activation, combine -------------------------------------------------------
/// Routing semantics, copied from the model config (one struct so the kernel sees every family's knobs).
struct RoutingParams {
    core::RouteParams route;  // the family's routing (moebench::route_params)
    int soft_topn = 0;        // > 0: soft top-N instead
};
/// logits [T, E] fp32 (+ bias [E] fp32 added before scoring when non-null; correction [E] fp32 for selection only).
/// Writes ids [T, k_out] int32 and weights [T, k_out] fp32 (k_out = soft_topn when > 0, else top_k).
/// scratch: T * topk_scratch_floats(E, groups) floats. Returns the kernel variant name.
int64_t topk_scratch_floats(int64_t num_experts, int64_t num_groups);
const char* launch_topk(const float* logits, const float* bias, const float* correction, const RoutingParams& p,
                        int64_t num_tokens, int32_t* ids, float* weights, float* scratch, cudaStream_t stream);

/// Permutation by expert, deterministic (moe_core permutation_map semantics): rows grouped by expert, assignments
/// a = t*k + j ascending within an expert; with capacity >= 0 (moe_core::expert_capacity; -1 = dropless), an expert's
/// assignments past `capacity` (arrival order) are dropped: ids[a] = -1 and weights[a] = 0. O(T k): a tile histogram,
/// one scan, a stable scatter; nothing comes back to the host. N = offsets[E] <= T*k.
struct PermuteMaps {
    int32_t* counts = nullptr;        // [E] kept rows per expert
    int32_t* offsets = nullptr;       // [E+1]
    int32_t* perm_slot = nullptr;     // [T*k]: assignment of each permuted row (token = slot / k)
    int32_t* perm_expert = nullptr;   // [T*k]: expert of each permuted row
    int32_t* slot_pos = nullptr;      // [T*k]: row of each assignment, -1 if none
    int32_t* dropped = nullptr;       // [1]
    int32_t* active = nullptr;        // [E+1]: active[0] = experts with rows, active[1..] their ids ascending
    int32_t* tile_offsets = nullptr;  // [E+1] optional: exclusive sum of ceil(counts / kExpertTileRows) (the tile map)
};
/// Rows per tile of the tiled expert GEMM (the unit of PermuteMaps::tile_offsets).
constexpr int64_t kExpertTileRows = 64;
/// Scratch ints launch_permute_index needs; the largest expert count it takes.
int64_t permute_workspace_ints(int64_t num_assign, int64_t num_experts);
int64_t permute_max_experts();
void launch_permute_index(int32_t* ids, float* weights, int64_t num_tokens, int64_t k, int64_t num_experts,
                          int64_t capacity, const PermuteMaps& maps, int32_t* workspace, cudaStream_t stream);
/// x_perm[r, :] = x[perm_slot[r] / k, :] (times weights[perm_slot[r]] when scale_by_weight: Llama-4 scales the
/// expert input) for r < *num_rows_dev (read on the device; max_rows bounds the launch).
void launch_gather_rows(const bf16* x, const int32_t* perm_slot, const float* weights, bool scale_by_weight,
                        bf16* x_perm, const int32_t* num_rows_dev, int64_t max_rows, int64_t k, int64_t hidden,
                        cudaStream_t stream);

/// Activation: a[r, c] = act(h[r, c] + bg, h[r, inter + c] + bu) for c < inter (h = [gate | up], 2*inter wide).
/// act: moebench::Activation as int. bias (optional, [E, 2*inter]) indexed by row_expert[r] (or expert 0 when null).
void launch_activation(const bf16* h, bf16* a, int64_t rows, int64_t inter, int act, float limit, const bf16* bias,
                       const int32_t* row_expert, cudaStream_t stream);

/// moe_out[t] = sum_j w(t,j) * (y_perm[slot_pos[t*k+j]] + down_bias[id]) + shared_scale(t) * shared[t], with
/// w = weights[t*k+j] (1 when unit_weights: the weight was applied to the input); shared_scale(t) =
/// sigmoid(shared_gate_logit[t]) when non-null, else 1; shared may be null. Then residual[t] += moe_out[t]
/// (residual may be null). moe_out is bf16 [T, H].
void launch_combine(const bf16* y_perm, const int32_t* slot_pos, const int32_t* ids, const float* weights,
                    bool unit_weights, const bf16* down_bias, const bf16* shared, const float* shared_gate_logit,
                    bf16* moe_out, bf16* residual, int64_t num_tokens, int64_t k, int64_t hidden, cudaStream_t stream);
/// logit[t] = dot(x[t, :], w) in fp32 (shared expert gate, Qwen2-MoE).
void launch_row_dot(const bf16* x, const bf16* w, float* logit, int64_t num_tokens, int64_t hidden,
                    cudaStream_t stream);

// ---- expert_gemv.cu / expert_tiled.cu: moebench's own expert GEMMs (sizes read on the device) ---------------------
/// The products both kernels compute, over the device-side maps of launch_permute_index (no host count, so a CUDA
/// graph replays any routing):
/// fused_up: a[r, c] = act(x_r . Wg_c + bg, x_r . Wu_c + bu) for c < n_cols, W_e = w + e * 2 n_cols * k = [gate; up]
///           (the family's activation fused; bias [E, 2 n_cols] optional).
/// down:     y[r, c] = s_r * (x_r . Wd_c) for c < n_cols, W_e = w + e * n_cols * k; s_r = slot_weights[perm_slot[r]]
///           when slot_weights is non-null (the combine weight applied here; gemv only), else 1.
/// Rows of x and y are contiguous (ld = k and n_cols); k must be a multiple of 8 (gemv_supported).
struct ExpertKernelArgs {
    const bf16* x = nullptr;
    const bf16* w = nullptr;
    bf16* y = nullptr;
    const int32_t* offsets = nullptr;       // [E+1], device
    const int32_t* active = nullptr;        // [E+1], device: what the gemv kernel walks
    const int32_t* tile_offsets = nullptr;  // [E+1], device: what the tiled kernel walks
    int64_t num_experts = 0, n_cols = 0, k = 0;
    bool fused_up = false;
    int act = 0;
    float limit = 0.0f;
    const bf16* bias = nullptr;           // fused_up only
    const float* slot_weights = nullptr;  // down only, gemv only
    const int32_t* perm_slot = nullptr;   // down only, with slot_weights
    int grid_blocks = 0;                  // persistent grid (gemv_grid_blocks / tiled_grid_blocks)
};
bool gemv_supported(int64_t k);
/// The decode kernel, for few rows per expert (bandwidth-bound): every row of an expert against each weight row it
/// streams (16-byte loads, several in flight), two weight rows per warp (gate and up of a column, or two down
/// columns), a persistent grid over (active expert, column block).
void launch_expert_gemv(const ExpertKernelArgs& a, cudaStream_t stream);
/// The tiled kernel, for any rows per expert: tensor cores over the tile map (kExpertTileRows rows of one expert per
/// tile). No slot weights.
void launch_expert_tiled(const ExpertKernelArgs& a, cudaStream_t stream);
/// Blocks each kernel's persistent grid should have on a GPU with `num_sms` SMs (the resident blocks per SM, asked of
/// the current device).
int gemv_grid_blocks(int num_sms);
int tiled_grid_blocks(int num_sms);

// ---- measure.cu: device ceilings for `moebench devices --measure` --------------------------------------------------
/// Reads `bytes` (multiple of 16) from src with 16-byte loads; writes one checksum word to sink so nothing is elided.
void launch_read_bytes(const void* src, size_t bytes, unsigned long long* sink, int num_sms, cudaStream_t stream);
/// The same read with loads that allocate in L2 (evicting what the last step left there): the cold-L2 flush.
void launch_l2_flush(const void* src, size_t bytes, unsigned long long* sink, int num_sms, cudaStream_t stream);

}  // namespace moebench::kernels
