// SPDX-License-Identifier: Apache-2.0
// Random fp32 weights of the layers being run, generated from the run seed with the shared counter-based RNG
// (core/moe_core.cuh), so the CUDA backend can produce the same values. Also the memory preflight.
#pragma once
#include "backends/cpu/thread_pool.hpp"
#include "common/aligned_floats.hpp"
#include "config/model_config.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace moebench::cpu {

/// An uninitialised float buffer (no zero-fill: generation touches pages in parallel), cache-line aligned so
/// that the vector loads of the GEMM kernels do not straddle lines.
struct FBuf {
    AlignedFloats p;
    int64_t n = 0;
    bool panels = false;  // a linear weight [out, in] stored in panel layout (cpu_ops.hpp), per expert for experts
    void alloc(int64_t count) {
        p = alloc_aligned_floats(count);
        n = count;
    }
    float* data() { return p.get(); }
    const float* data() const { return p.get(); }
    bool empty() const { return n == 0; }
};

/// Every dimension the phases need, resolved once from the ModelConfig.
struct Dims {
    int64_t H = 0, V = 0;
    // attention
    bool mla = false;
    int64_t nh = 0, nkv = 0, qk_dim = 0, v_dim = 0;  // per head; MLA: nkv == nh after kv_b expansion
    int64_t rot_dim = 0, rot_offset = 0;             // RoPE part of each q/k head
    int64_t q_lora = 0, kv_lora = 0, nope = 0;       // MLA
    int64_t qkv_width = 0;                           // GQA fused q|k|v (|gate with output_gate) width
    bool out_gate = false;                           // Qwen3-Next: a per-head sigmoid gate after q|k|v
    // linear attention (hybrid layers): projections q|k|v|z|b|a (gated DeltaNet) or q|k|v|gate (lightning)
    bool la_delta = false;  // gated DeltaNet (else lightning)
    int64_t la_nk = 0, la_nv = 0, la_dk = 0, la_dv = 0, la_conv = 0;
    int64_t la_in = 0, la_channels = 0, la_v = 0;  // projection width, conv channels (q|k|v), Nv * Dv
    // FFN
    int64_t E = 0, K = 0, I = 0, shared_I = 0, dense_I = 0;  // shared_I = S * Is (shared experts concatenated)
};
Dims resolve_dims(const ModelConfig& m);

/// Weights of one decoder layer. Linear weights are [out, in] (PyTorch layout). Gate and up are fused per expert
/// as [2I, H] (rows 0..I-1 gate, I..2I-1 up) so one GEMM per expert computes both.
struct LayerWeights {
    int64_t layer = 0;  // model layer index
    bool is_moe = false;
    FBuf attn_norm_w, attn_norm_b, ffn_norm_w, ffn_norm_b, post_attn_norm_w, post_ffn_norm_w;
    // GQA: fused [qkv_width, H] = q [nh*hd] | k [nkv*hd] | v [nkv*hd], bias likewise
    FBuf w_qkv, b_qkv, q_norm, k_norm, sinks;
    // MLA
    FBuf w_q_a, q_a_norm, w_q_b, w_q, w_kv_a, kv_a_norm, w_kv_b;
    FBuf w_o, b_o;  // o_proj; on linear layers out_proj [H, Nv*Dv]
    // linear attention (is_linear): in_proj [la_in, H], conv [channels, kernel], dt_bias / A_log [Nv], norm
    // [Dv] (gated DeltaNet) or [Nv*Dv] (lightning); decode: each sequence's state [B, Nv, Dk, Dv] and conv window
    // [B, channels, kernel - 1] as after `context` earlier tokens (random)
    bool is_linear = false;
    FBuf la_in, la_conv, la_dt_bias, la_a_log, la_norm, la_state, la_conv_state;
    // MoE
    FBuf router_w, router_b, correction_b;
    FBuf w_gu, w_down, b_gu, b_down;             // [E, 2I, H], [E, H, I], [E, 2I], [E, H]
    FBuf shared_gu, shared_down, shared_gate_w;  // [2*S*Is, H], [H, S*Is], [H]
    // dense FFN
    FBuf dense_gu, dense_down;  // [2*Id, H], [H, Id]
    // decode KV cache of `context` random tokens per sequence: [B, nkv, L, qk_dim], [B, nkv, L, v_dim]
    FBuf k_cache, v_cache;
};

struct ModelWeights {
    FBuf embed;    // [V, H]
    FBuf lm_head;  // [V, H]; empty when tied (embed is used)
    FBuf final_norm_w, final_norm_b;
    std::vector<LayerWeights> layers;
};

/// The part of the model one expert-parallel rank holds: its experts (global ids, ascending; empty = all) and the
/// decode KV caches of its sequences (from `first_sequence`). The values are those of the whole model's tensors.
struct WeightSlice {
    std::vector<int32_t> experts;
    int64_t first_sequence = 0;
};

/// Floats the weights of `layers` (and the decode cache of batch x context) will take, without allocating.
int64_t weight_floats(const ModelConfig& m, const std::vector<int64_t>& layers, int64_t batch, int64_t context,
                      const WeightSlice& slice = {});
/// Which linear weights to store in panel layout (in place after generation; FBuf::panels says which were).
struct PanelPlan {
    bool experts = false;  // w_gu, w_down: each expert's matrix
    bool dense = false;    // attention projections, router, shared experts, dense MLPs (when out % 16 == 0)
    bool lm_head = false;  // an untied LM head (when vocab % 16 == 0)
};

/// Generates all weights in parallel from `seed` (the values depend on the logical [out, in] index only), then
/// packs those of `plan` into panel layout.
ModelWeights make_weights(ThreadPool& pool, const ModelConfig& m, const std::vector<int64_t>& layers, int64_t batch,
                          int64_t context, uint64_t seed, const PanelPlan& plan = {}, const WeightSlice& slice = {});
/// A linear weight [n, k] (one expert's or a dense one) as a row-major copy, whatever its layout.
std::vector<float> row_major(ThreadPool& pool, const float* w, bool panels, int64_t n, int64_t k);

}  // namespace moebench::cpu
