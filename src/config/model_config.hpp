// SPDX-License-Identifier: Apache-2.0
// ModelConfig: the resolved architecture every later stage reads. Built from moebench's own model JSON
// (configs/models/*.json, schema in docs/model-schema.md) or imported from a Hugging Face config.json.
#pragma once
#include "common/json_util.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace moebench {

/// GQA covers MHA (kv_heads == heads) and MQA (kv_heads == 1). MLA is DeepSeek-V2/V3 latent attention.
enum class AttentionKind { gqa, mla };
enum class NormKind { rmsnorm, layernorm };
/// swiglu: silu(gate) * up. geglu: gelu(gate) * up (Grok-1). swiglu_oai: gpt-oss clamped variant
/// (gate clamped to <= limit, up to [-limit, limit], gate * sigmoid(alpha * gate) * (up + 1), alpha = 1.702).
enum class Activation { swiglu, geglu, swiglu_oai };

/// How router logits become (expert ids, weights). Exactly the reference implementation of each family.
enum class RoutingKind {
    softmax_topk,          // softmax over all experts, top-k, optional renormalisation (Qwen, OLMoE, DBRX, DeepSeekMoE)
    topk_softmax,          // top-k on logits, softmax over the k selected (Mixtral, gpt-oss)
    sigmoid_group_topk,    // sigmoid + score-correction bias, top groups by sum of top-2, top-k, renorm, scale
                           // (DeepSeek-V3, Kimi-K2)
    softmax_group_greedy,  // softmax, top groups by max score, top-k within them, scale (DeepSeek-V2)
    topk_sigmoid,          // top-k on logits, sigmoid of the selected logits (Llama-4)
    sparsemixer,           // top-2 on logits, each weight a softmax over the logits near it (PhiMoE, inference)
};

/// Recurrent-state ("linear") attention of hybrid models, on the layers layer_linear marks; the other layers keep
/// softmax attention with a KV cache. gated_delta_net: Qwen3-Next's gated DeltaNet (causal conv, delta rule with a
/// per-head data-dependent decay and write strength, gated RMSNorm). lightning: MiniMax-Text-01's lightning attention
/// (a fixed per-head decay, plain outer-product update, RMSNorm and a sigmoid output gate).
enum class LinearAttentionKind { gated_delta_net, lightning };

const char* to_string(AttentionKind k);
const char* to_string(NormKind k);
const char* to_string(Activation a);
const char* to_string(RoutingKind r);
const char* to_string(LinearAttentionKind k);

struct AttentionConfig {
    AttentionKind kind = AttentionKind::gqa;
    int64_t num_heads = 0;
    int64_t num_kv_heads = 0;  // gqa only
    int64_t head_dim = 0;      // gqa only; may differ from hidden / heads
    bool qkv_bias = false;
    bool o_bias = false;
    bool qk_norm = false;       // per-head RMSNorm weights on q and k (Qwen3)
    bool qk_norm_full = false;  // RMSNorm over all q heads and all k heads jointly (OLMoE: weights nh*hd + nkv*hd)
    // MLA (kind == mla). q_lora_rank 0 means q is projected directly (DeepSeek-V2-Lite).
    int64_t q_lora_rank = 0;
    int64_t kv_lora_rank = 0;
    int64_t qk_nope_head_dim = 0;
    int64_t qk_rope_head_dim = 0;
    int64_t v_head_dim = 0;
    bool sinks = false;           // one learned sink logit per head (gpt-oss)
    int64_t sliding_window = 0;   // tokens; 0 = none
    int64_t attention_chunk = 0;  // chunked local attention (Llama-4); 0 = none
    double rope_theta = 10000.0;
    int64_t rotary_dim = 0;    // gqa: dims of each q/k head that RoPE rotates (partial RoPE); 0 = the whole head
    bool output_gate = false;  // q_proj also yields a per-head gate: out = attention * sigmoid(gate) (Qwen3-Next)
    // DeepSeek-V3.2 sparse attention: a lightning indexer per layer scores the context (indexer_heads x
    // indexer_head_dim from the q latent, one shared key); attention then reads the indexer_topk best tokens.
    int64_t indexer_heads = 0;  // 0 = dense attention
    int64_t indexer_head_dim = 0;
    int64_t indexer_topk = 0;

    int64_t q_head_dim() const { return kind == AttentionKind::mla ? qk_nope_head_dim + qk_rope_head_dim : head_dim; }
};

/// Linear attention's shapes (GQA-like: key heads shared by groups of value heads; lightning: all equal).
struct LinearAttentionConfig {
    LinearAttentionKind kind = LinearAttentionKind::gated_delta_net;
    int64_t num_key_heads = 0;
    int64_t num_value_heads = 0;
    int64_t key_head_dim = 0;
    int64_t value_head_dim = 0;
    int64_t conv_kernel = 0;  // gated_delta_net: width of the causal depthwise conv over q|k|v (0 = none)

    /// Recurrent state of one sequence in one layer, in elements: one [key_head_dim x value_head_dim] matrix per
    /// value head, plus the conv's last (conv_kernel - 1) inputs.
    int64_t state_elems() const;
    int64_t conv_channels() const { return 2 * num_key_heads * key_head_dim + num_value_heads * value_head_dim; }
    /// Width of the fused input projection: gated DeltaNet q|k|v|z|b|a, lightning q|k|v|gate.
    int64_t in_proj_width() const {
        const int64_t v = num_value_heads * value_head_dim;
        return kind == LinearAttentionKind::lightning ? 4 * v : conv_channels() + v + 2 * num_value_heads;
    }
};

struct MoeConfig {
    int64_t num_experts = 0;  // routed experts
    int64_t top_k = 0;
    int64_t expert_intermediate_size = 0;  // width of one routed expert
    int64_t num_shared_experts = 0;
    int64_t shared_intermediate_size = 0;  // width of ONE shared expert
    bool shared_expert_gate = false;       // sigmoid(Linear(H, 1)) scaling the shared output (Qwen2-MoE)
    bool expert_bias = false;              // biases on expert projections (gpt-oss)
    bool router_bias = false;              // bias on the router logits (gpt-oss)
    bool router_correction_bias = false;   // e_score_correction_bias (DeepSeek-V3), selection only
    RoutingKind routing = RoutingKind::softmax_topk;
    bool norm_topk_prob = false;  // renormalise the selected weights to sum to 1
    double routed_scaling_factor = 1.0;
    int64_t num_groups = 1;  // expert groups for group-limited routing
    int64_t topk_groups = 1;
    double router_jitter_noise = 0.01;  // sparsemixer's relative band (PhiMoE's router_jitter_noise)
};

struct ModelConfig {
    std::string name;    // short name (e.g. "mixtral-8x7b")
    std::string family;  // hf model_type or own family label (mixtral, deepseek_v3, ...)
    std::string source;  // file it came from
    std::string notes;   // provenance, e.g. "unconfirmed: rumoured shape"
    bool unconfirmed = false;

    int64_t vocab_size = 0;
    int64_t hidden_size = 0;
    int64_t num_layers = 0;
    int64_t max_position_embeddings = 0;

    AttentionConfig attn;
    MoeConfig moe;
    int64_t dense_intermediate_size = 0;  // FFN width of dense (non-MoE) layers; 0 if the model has none
    std::vector<uint8_t> layer_is_moe;    // size num_layers; 1 = MoE FFN, 0 = dense FFN
    std::vector<uint8_t> layer_sliding;   // size num_layers; 1 = sliding-window attention (empty = none)
    LinearAttentionConfig linear_attn;    // used by the layers layer_linear marks
    std::vector<uint8_t> layer_linear;    // size num_layers; 1 = linear attention (empty = none)

    Activation activation = Activation::swiglu;
    double swiglu_limit = 0.0;  // swiglu_oai clamp
    NormKind norm = NormKind::rmsnorm;
    bool norm_bias = false;       // LayerNorm with bias
    int64_t norms_per_layer = 2;  // pre-attention + pre-FFN; Grok-1 has 4 (pre/post each)
    double norm_eps = 1e-6;
    bool tie_word_embeddings = false;
    bool lm_head_bias = false;
    int64_t num_mtp_layers = 0;  // DeepSeek-V3 multi-token prediction modules (excluded by default)

    /// The one definition of "is layer `layer` a MoE layer" (every count and phase list uses it): the layer's entry
    /// of layer_is_moe, and never without experts; an empty list (a model built in code) means every layer.
    bool is_moe_layer(int64_t layer) const;
    int64_t num_moe_layers() const;
    int64_t num_dense_layers() const;
    /// True when layer `layer` runs linear attention (a recurrent state, no KV cache) instead of softmax attention.
    bool is_linear_attention_layer(int64_t layer) const;
    int64_t num_linear_attention_layers() const;
    bool is_moe_model() const { return moe.num_experts > 0 && num_moe_layers() > 0; }
};

/// Loads a model from a short name, a moebench model file, or a Hugging Face config.json (auto-detected).
/// Validates; every problem is a ConfigError naming the field.
ModelConfig load_model(const std::string& name_or_path);

/// Parses moebench's own model schema (see docs/model-schema.md). `path` prefixes field names in errors.
ModelConfig model_from_json(const json& j, const std::string& path);
/// Serialises to moebench's own schema; model_from_json(model_to_json(m)) == m.
json model_to_json(const ModelConfig& m);

/// True when `j` looks like a Hugging Face config.json (model_type or architectures present, no "moebench" key).
bool is_hf_config(const json& j);
/// Imports a Hugging Face config.json. Unknown model_type -> ConfigError listing the supported ones.
ModelConfig model_from_hf(const json& j, const std::string& path);
/// The model_type values (and architecture names) the importer understands.
std::vector<std::string> supported_hf_model_types();

/// Throws ConfigError for inconsistent values (top-k > experts, zero sizes, groups not dividing experts, ...).
void validate(const ModelConfig& m, const std::string& path);

}  // namespace moebench
