// SPDX-License-Identifier: Apache-2.0
// Pure accounting of a ModelConfig: parameters, FLOPs and KV bytes. No I/O, no timing.
// Every count here is "counted" (derived from shapes), never measured.
#pragma once
#include "config/model_config.hpp"

#include <array>
#include <cstdint>
#include <string_view>

namespace moebench {

enum class Component : int {
    embedding,
    lm_head,
    attention,
    norms,
    router,
    dense_mlp,
    routed_experts,
    shared_experts,
    mtp,
    count_
};
inline constexpr int kNumComponents = static_cast<int>(Component::count_);
inline constexpr std::array<std::string_view, kNumComponents> kComponentNames = {
    "embedding", "lm_head", "attention", "norms", "router", "dense_mlp", "routed_experts", "shared_experts", "mtp"};

struct AccountingOptions {
    bool include_mtp = false;  // count the multi-token-prediction modules (DeepSeek-V3) in total/active
};

/// Parameter counts of the whole model. by_component[mtp] is always filled; it enters total/active only with
/// include_mtp. active = everything a token touches: all non-expert weights + top_k routed experts + shared experts per
/// MoE layer.
struct ParamCounts {
    std::array<int64_t, kNumComponents> by_component{};
    std::array<int64_t, kNumComponents> active_by_component{};
    int64_t total = 0;
    int64_t active = 0;
    int64_t active_excluding_embedding = 0;  // active minus the input embedding
    int64_t total_excluding_embedding = 0;   // total minus the input embedding only (the LM head stays in)
};
ParamCounts count_params(const ModelConfig& m, const AccountingOptions& opt = {});

/// Per-layer pieces (one layer, one expert) for the engine, memory plan and floors.
int64_t attention_params_per_layer(const ModelConfig& m);                // softmax attention (gqa / mla)
int64_t linear_attention_params_per_layer(const ModelConfig& m);         // linear attention (model.linear_attn)
int64_t attention_params_of_layer(const ModelConfig& m, int64_t layer);  // whichever layer `layer` runs
/// Multiply-adds per token of linear attention's state update and read-out (and its conv) in one layer.
int64_t linear_state_macs_per_token(const ModelConfig& m);
int64_t routed_expert_params(const ModelConfig& m);  // one routed expert (gate, up, down [+ biases])
int64_t shared_expert_params(const ModelConfig& m);  // all shared experts of one layer (+ gate)
int64_t router_params_per_layer(const ModelConfig& m);
int64_t dense_mlp_params_per_layer(const ModelConfig& m);
int64_t norm_params_per_layer(const ModelConfig& m);

/// Forward FLOPs of one token (2 per multiply-add), by component, attending to `context_len` earlier tokens
/// (score and value products over the context count in "attention").
struct FlopsPerToken {
    std::array<double, kNumComponents> by_component{};
    double total = 0;
    double attention_context = 0;  // the context-dependent part of the attention FLOPs
};
FlopsPerToken flops_per_token(const ModelConfig& m, int64_t context_len, const AccountingOptions& opt = {});

/// KV-cache elements stored per token per layer (MLA: kv_lora_rank + qk_rope_head_dim; GQA: 2 * kv_heads * head_dim).
int64_t kv_elems_per_token_per_layer(const ModelConfig& m);
/// The recurrent state of linear attention is kept in fp32 (as the reference kernels accumulate it), whatever the
/// KV-cache dtype: a bf16 state would round the decayed sum at every token.
inline constexpr double kLinearStateBytesPerElem = 4.0;
/// Recurrent-state bytes of ONE sequence over all linear-attention layers (fixed: independent of the context).
double linear_state_bytes_per_sequence(const ModelConfig& m);
/// KV-cache bytes per token for the whole model at `bytes_per_elem` (every softmax-attention layer keeps every
/// token; linear-attention layers keep none; MTP layers excluded).
double kv_bytes_per_token(const ModelConfig& m, double bytes_per_elem);
/// KV-cache bytes of ONE sequence of `context_len` tokens: sliding-window / chunked layers keep at most
/// sliding_window (attention_chunk) tokens, every other softmax layer keeps all of them; plus the linear-attention
/// layers' fixed recurrent state (linear_state_bytes_per_sequence).
double kv_bytes_per_sequence(const ModelConfig& m, int64_t context_len, double bytes_per_elem);

/// Fraction of the per-token KV cache one GPU of an attention tensor-parallel group of `tp` stores: GQA splits the KV
/// heads over tp (a GPU keeps at least one head, so tp > kv_heads replicates them); MLA's latent is shared by every
/// head and kept whole on every tp rank. The memory plan's KV per GPU and the KV each TP rank's attention reads.
double kv_shard_fraction(const ModelConfig& m, int64_t tp);

/// Parameters of one MTP module (its decoder layer, enorm/hnorm, eh_proj, head norm), excluding the embedding and
/// head it shares with the main model; `active` counts top_k routed experts instead of all.
int64_t mtp_params_per_module(const ModelConfig& m, bool active);
/// Tokens one layer attends to at `context_len` (the window on sliding / chunked layers).
int64_t attended_tokens(const ModelConfig& m, int64_t layer_idx, int64_t context_len);

}  // namespace moebench
