// SPDX-License-Identifier: Apache-2.0
// Parameter, FLOP and KV-cache accounting from shapes alone. Conventions (docs/model-schema.md): gated FFNs are
// 3*H*I, the router is H*E (+E for a bias or score-correction bias), norm weights and every bias count, FLOPs are
// 2 per multiply-add of the matrix products only (element-wise work, norms and softmax are not counted).
#include "model/accounting.hpp"

#include <algorithm>

namespace moebench {
namespace {

constexpr int idx(Component c) { return static_cast<int>(c); }

// Weight-matrix elements of the attention projections of one layer (no biases, norms or sinks): each is one
// multiply-add per token.
int64_t attention_matrix_elems(const ModelConfig& m) {
    const AttentionConfig& a = m.attn;
    const int64_t H = m.hidden_size;
    if (a.kind == AttentionKind::gqa) {
        return H * a.num_heads * a.head_dim * (a.output_gate ? 2 : 1)  // q_proj (+ the per-head output gate)
               + 2 * H * a.num_kv_heads * a.head_dim                   // k_proj, v_proj
               + a.num_heads * a.head_dim * H;                         // o_proj
    }
    const int64_t qh = a.qk_nope_head_dim + a.qk_rope_head_dim;
    int64_t q = a.q_lora_rank > 0 ? H * a.q_lora_rank + a.q_lora_rank * a.num_heads * qh  // q_a_proj, q_b_proj
                                  : H * a.num_heads * qh;                                 // q_proj
    // DeepSeek-V3.2's indexer: wq_b [Ih*Id, q_lora], wk [Id, H], weights_proj [Ih, H].
    const int64_t indexer = a.indexer_heads > 0 ? a.q_lora_rank * a.indexer_heads * a.indexer_head_dim +
                                                      H * a.indexer_head_dim + H * a.indexer_heads
                                                : 0;
    return q + H * (a.kv_lora_rank + a.qk_rope_head_dim)                         // kv_a_proj_with_mqa
           + a.kv_lora_rank * a.num_heads * (a.qk_nope_head_dim + a.v_head_dim)  // kv_b_proj
           + a.num_heads * a.v_head_dim * H + indexer;                           // o_proj
}

// Multiply-adds per attended token of one layer: QK^T and PV over all heads.
int64_t attention_context_macs_per_token(const ModelConfig& m) {
    const AttentionConfig& a = m.attn;
    if (a.kind == AttentionKind::gqa) return 2 * a.num_heads * a.head_dim;
    return a.num_heads * (a.qk_nope_head_dim + a.qk_rope_head_dim + a.v_head_dim);
}

// Linear attention's projection matrices: gated DeltaNet in_proj_qkvz [2 Nk Dk + 2 Nv Dv, H], in_proj_ba [2 Nv, H],
// out_proj [H, Nv Dv]; lightning qkv_proj [3 N D, H], output_gate [N D, H], out_proj [H, N D].
int64_t linear_attention_matrix_elems(const ModelConfig& m) {
    const LinearAttentionConfig& la = m.linear_attn;
    return m.hidden_size * la.in_proj_width() + la.num_value_heads * la.value_head_dim * m.hidden_size;
}

int64_t norm_params(const ModelConfig& m) { return m.hidden_size * (m.norm_bias ? 2 : 1); }

int64_t routed_expert_matrix_elems(const ModelConfig& m) { return 3 * m.hidden_size * m.moe.expert_intermediate_size; }

}  // namespace

int64_t attention_params_per_layer(const ModelConfig& m) {
    const AttentionConfig& a = m.attn;
    const int64_t H = m.hidden_size;
    int64_t n = attention_matrix_elems(m);
    if (a.kind == AttentionKind::gqa) {
        if (a.qkv_bias) n += (a.num_heads + 2 * a.num_kv_heads) * a.head_dim;
        if (a.qk_norm) n += 2 * a.head_dim;                                    // one RMSNorm(head_dim) each for q, k
        if (a.qk_norm_full) n += (a.num_heads + a.num_kv_heads) * a.head_dim;  // OLMoE: over all heads
    } else {
        if (a.q_lora_rank > 0) n += a.q_lora_rank;             // q_a_layernorm
        if (a.indexer_heads > 0) n += 2 * a.indexer_head_dim;  // the indexer's k_norm (LayerNorm with bias)
        n += a.kv_lora_rank;                                   // kv_a_layernorm
        if (a.qkv_bias)
            n += (a.q_lora_rank > 0 ? a.q_lora_rank : a.num_heads * (a.qk_nope_head_dim + a.qk_rope_head_dim)) +
                 a.kv_lora_rank + a.qk_rope_head_dim;
    }
    if (a.o_bias) n += H;
    if (a.sinks) n += a.num_heads;
    return n;
}

// Multiply-adds per token on the recurrent state of one layer: per value head, decay + read (S^T k, delta rule
// only) + rank-1 write + read-out (S^T q), each Dk x Dv.
int64_t linear_state_macs_per_token(const ModelConfig& m) {
    const LinearAttentionConfig& la = m.linear_attn;
    const int64_t per_head = la.key_head_dim * la.value_head_dim;
    return la.num_value_heads * per_head * (la.kind == LinearAttentionKind::gated_delta_net ? 4 : 3) +
           la.conv_channels() * la.conv_kernel;  // the causal conv (kernel 0: none)
}

int64_t linear_attention_params_per_layer(const ModelConfig& m) {
    const LinearAttentionConfig& la = m.linear_attn;
    int64_t n = linear_attention_matrix_elems(m);
    if (la.kind == LinearAttentionKind::lightning) return n + la.num_value_heads * la.value_head_dim;  // RMSNorm(N D)
    // conv1d [channels, 1, kernel] without bias, dt_bias and A_log per value head, the gated RMSNorm(Dv).
    return n + la.conv_channels() * la.conv_kernel + 2 * la.num_value_heads + la.value_head_dim;
}

int64_t attention_params_of_layer(const ModelConfig& m, int64_t layer) {
    return m.is_linear_attention_layer(layer) ? linear_attention_params_per_layer(m) : attention_params_per_layer(m);
}

int64_t routed_expert_params(const ModelConfig& m) {
    if (m.moe.num_experts <= 0) return 0;
    int64_t n = routed_expert_matrix_elems(m);
    if (m.moe.expert_bias) n += 2 * m.moe.expert_intermediate_size + m.hidden_size;  // gate_up bias, down bias
    return n;
}

int64_t shared_expert_params(const ModelConfig& m) {
    const MoeConfig& e = m.moe;
    int64_t n = e.num_shared_experts * 3 * m.hidden_size * e.shared_intermediate_size;
    if (e.shared_expert_gate) n += m.hidden_size;  // Linear(H, 1) without bias
    return n;
}

int64_t router_params_per_layer(const ModelConfig& m) {
    const MoeConfig& e = m.moe;
    if (e.num_experts <= 0) return 0;
    return m.hidden_size * e.num_experts + (e.router_bias ? e.num_experts : 0) +
           (e.router_correction_bias ? e.num_experts : 0);
}

int64_t dense_mlp_params_per_layer(const ModelConfig& m) { return 3 * m.hidden_size * m.dense_intermediate_size; }

int64_t norm_params_per_layer(const ModelConfig& m) { return m.norms_per_layer * norm_params(m); }

int64_t mtp_params_per_module(const ModelConfig& m, bool active) {
    const int64_t H = m.hidden_size;
    // enorm + hnorm, eh_proj (2H -> H), shared_head.norm; then one decoder layer.
    int64_t n = 3 * norm_params(m) + 2 * H * H;
    n += attention_params_per_layer(m) + norm_params_per_layer(m);
    if (m.moe.num_experts > 0) {
        n += router_params_per_layer(m) + shared_expert_params(m) +
             (active ? m.moe.top_k : m.moe.num_experts) * routed_expert_params(m);
    } else {
        n += dense_mlp_params_per_layer(m);
    }
    return n;
}

ParamCounts count_params(const ModelConfig& m, const AccountingOptions& opt) {
    ParamCounts p;
    auto& all = p.by_component;
    auto& act = p.active_by_component;
    const int64_t H = m.hidden_size, V = m.vocab_size;
    const int64_t L = m.num_layers, moe = m.num_moe_layers(), dense = m.num_dense_layers();

    all[idx(Component::embedding)] = V * H;
    all[idx(Component::lm_head)] = (m.tie_word_embeddings ? 0 : V * H) + (m.lm_head_bias ? V : 0);
    for (int64_t l = 0; l < L; ++l) all[idx(Component::attention)] += attention_params_of_layer(m, l);
    all[idx(Component::norms)] = L * norm_params_per_layer(m) + norm_params(m);  // + final norm
    all[idx(Component::router)] = moe * router_params_per_layer(m);
    all[idx(Component::dense_mlp)] = dense * dense_mlp_params_per_layer(m);
    all[idx(Component::routed_experts)] = moe * m.moe.num_experts * routed_expert_params(m);
    all[idx(Component::shared_experts)] = moe * shared_expert_params(m);
    all[idx(Component::mtp)] = m.num_mtp_layers * mtp_params_per_module(m, false);

    act = all;
    act[idx(Component::routed_experts)] = moe * m.moe.top_k * routed_expert_params(m);
    act[idx(Component::mtp)] = m.num_mtp_layers * mtp_params_per_module(m, true);

    for (int c = 0; c < kNumComponents; ++c) {
        if (c == idx(Component::mtp) && !opt.include_mtp) continue;
        p.total += all[c];
        p.active += act[c];
    }
    p.active_excluding_embedding = p.active - act[idx(Component::embedding)];
    p.total_excluding_embedding = p.total - all[idx(Component::embedding)];
    return p;
}

int64_t attended_tokens(const ModelConfig& m, int64_t layer_idx, int64_t context_len) {
    bool sliding = layer_idx >= 0 && layer_idx < static_cast<int64_t>(m.layer_sliding.size()) &&
                   m.layer_sliding[static_cast<size_t>(layer_idx)] != 0;
    if (!sliding) return context_len;
    // A chunked layer (Llama-4) sees at most one chunk; its window bound is the chunk size.
    int64_t window = m.attn.sliding_window > 0 ? m.attn.sliding_window : m.attn.attention_chunk;
    return window > 0 ? std::min(context_len, window) : context_len;
}

FlopsPerToken flops_per_token(const ModelConfig& m, int64_t context_len, const AccountingOptions& opt) {
    FlopsPerToken f;
    auto& c = f.by_component;
    const double H = static_cast<double>(m.hidden_size), V = static_cast<double>(m.vocab_size);
    const double moe = static_cast<double>(m.num_moe_layers()), dense = static_cast<double>(m.num_dense_layers());
    const double ctx_macs = static_cast<double>(attention_context_macs_per_token(m));
    const double shared_macs = static_cast<double>(shared_expert_params(m));  // matrices only: gate is H*1
    const double routed_macs = static_cast<double>(m.moe.top_k) * static_cast<double>(routed_expert_matrix_elems(m));
    const double router_macs = H * static_cast<double>(m.moe.num_experts);

    double attended = 0, attn_matrix = 0;
    double indexed = 0;  // DeepSeek-V3.2: tokens its indexer scores (all it keeps); attention then reads top-k of them
    for (int64_t l = 0; l < m.num_layers; ++l) {
        if (m.is_linear_attention_layer(l)) {  // no context: the state is the same size at every position
            attn_matrix += static_cast<double>(linear_attention_matrix_elems(m) + linear_state_macs_per_token(m));
            continue;
        }
        const int64_t kept = attended_tokens(m, l, context_len);
        attended += static_cast<double>(m.attn.indexer_topk > 0 ? std::min(kept, m.attn.indexer_topk) : kept);
        if (m.attn.indexer_heads > 0) indexed += static_cast<double>(kept);
        attn_matrix += static_cast<double>(attention_matrix_elems(m));
    }
    f.attention_context =
        2.0 * ctx_macs * attended + 2.0 * static_cast<double>(m.attn.indexer_heads * m.attn.indexer_head_dim) * indexed;

    c[idx(Component::embedding)] = 0;  // a table lookup
    c[idx(Component::lm_head)] = 2.0 * V * H;
    c[idx(Component::attention)] = 2.0 * attn_matrix + f.attention_context;
    c[idx(Component::norms)] = 0;  // element-wise
    c[idx(Component::router)] = 2.0 * moe * router_macs;
    c[idx(Component::dense_mlp)] = 2.0 * dense * static_cast<double>(3 * m.hidden_size * m.dense_intermediate_size);
    c[idx(Component::routed_experts)] = 2.0 * moe * routed_macs;
    c[idx(Component::shared_experts)] = 2.0 * moe * shared_macs;
    if (m.num_mtp_layers > 0) {
        // eh_proj, one decoder layer attending to the same context, and the shared LM head.
        double layer = 2.0 * H * H + static_cast<double>(attention_matrix_elems(m)) +
                       ctx_macs * static_cast<double>(context_len) + V * H;
        layer += m.moe.num_experts > 0 ? router_macs + routed_macs + shared_macs
                                       : static_cast<double>(3 * m.hidden_size * m.dense_intermediate_size);
        c[idx(Component::mtp)] = 2.0 * static_cast<double>(m.num_mtp_layers) * layer;
    }
    for (int i = 0; i < kNumComponents; ++i) {
        if (i == idx(Component::mtp) && !opt.include_mtp) continue;
        f.total += c[i];
    }
    return f;
}

int64_t kv_elems_per_token_per_layer(const ModelConfig& m) {
    const AttentionConfig& a = m.attn;
    // MLA: latent + shared rope key (+ DeepSeek-V3.2's indexer key, one per token)
    if (a.kind == AttentionKind::mla)
        return a.kv_lora_rank + a.qk_rope_head_dim + (a.indexer_heads > 0 ? a.indexer_head_dim : 0);
    return 2 * a.num_kv_heads * a.head_dim;
}

double kv_bytes_per_token(const ModelConfig& m, double bytes_per_elem) {
    return static_cast<double>(m.num_layers - m.num_linear_attention_layers()) *
           static_cast<double>(kv_elems_per_token_per_layer(m)) * bytes_per_elem;
}

double kv_shard_fraction(const ModelConfig& m, int64_t tp) {
    if (m.attn.kind == AttentionKind::mla || m.attn.num_kv_heads <= 0 || tp <= 1) return 1.0;
    const int64_t heads_per_gpu = (m.attn.num_kv_heads + tp - 1) / tp;
    return static_cast<double>(heads_per_gpu) / static_cast<double>(m.attn.num_kv_heads);
}

double kv_bytes_per_sequence(const ModelConfig& m, int64_t context_len, double bytes_per_elem) {
    double tokens = 0;
    for (int64_t l = 0; l < m.num_layers; ++l)
        if (!m.is_linear_attention_layer(l)) tokens += static_cast<double>(attended_tokens(m, l, context_len));
    return tokens * static_cast<double>(kv_elems_per_token_per_layer(m)) * bytes_per_elem +
           linear_state_bytes_per_sequence(m);
}

double linear_state_bytes_per_sequence(const ModelConfig& m) {
    return static_cast<double>(m.num_linear_attention_layers()) * static_cast<double>(m.linear_attn.state_elems()) *
           kLinearStateBytesPerElem;
}

}  // namespace moebench
