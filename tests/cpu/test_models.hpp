// SPDX-License-Identifier: Apache-2.0
// Tiny models and step shapes that several test files build by hand (the CPU tests, and tests/cuda through
// "../cpu/test_models.hpp"). Each test keeps its own sizes: these only spare writing the same fields again.
#pragma once
#include "config/model_config.hpp"
#include "core/step.hpp"

#include <cstdint>
#include <string>

namespace moebench::test {

/// The sizes tiny GQA MoE test models differ in (write them with designated initializers).
struct TinyGqaMoeShape {
    int64_t vocab_size = 0, hidden_size = 0, num_layers = 0;
    int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0;
    int64_t num_experts = 0, top_k = 0, expert_intermediate_size = 0;
};

/// GQA attention and routed experts on every layer; every other field keeps ModelConfig's default.
inline ModelConfig tiny_gqa_moe(const std::string& name, const TinyGqaMoeShape& s) {
    ModelConfig m;
    m.name = name;
    m.vocab_size = s.vocab_size;
    m.hidden_size = s.hidden_size;
    m.num_layers = s.num_layers;
    m.attn.kind = AttentionKind::gqa;
    m.attn.num_heads = s.num_heads;
    m.attn.num_kv_heads = s.num_kv_heads;
    m.attn.head_dim = s.head_dim;
    m.moe.num_experts = s.num_experts;
    m.moe.top_k = s.top_k;
    m.moe.expert_intermediate_size = s.expert_intermediate_size;
    m.layer_is_moe.assign(static_cast<size_t>(s.num_layers), 1);
    return m;
}

/// The sizes of MLA attention (q_lora_rank 0: q projected directly).
struct TinyMlaShape {
    int64_t num_heads = 0, q_lora_rank = 0, kv_lora_rank = 0, qk_nope_head_dim = 0, qk_rope_head_dim = 0,
            v_head_dim = 0;
};

/// MLA attention of these sizes; every other attention field keeps its default.
inline AttentionConfig tiny_mla_attention(const TinyMlaShape& s) {
    AttentionConfig a;
    a.kind = AttentionKind::mla;
    a.num_heads = s.num_heads;
    a.q_lora_rank = s.q_lora_rank;
    a.kv_lora_rank = s.kv_lora_rank;
    a.qk_nope_head_dim = s.qk_nope_head_dim;
    a.qk_rope_head_dim = s.qk_rope_head_dim;
    a.v_head_dim = s.v_head_dim;
    return a;
}

/// The GQA MoE whose FLOPs, bytes and sim times are worked out by hand in test_phase_work.cpp and
/// test_sim_backend.cpp: H 8, 2 heads of 4, 1 kv head, 4 experts top-2 of width 6, one shared expert of width 5,
/// dense FFN width 10, vocab 16, 2 MoE layers.
inline ModelConfig tiny_gqa_h8() {
    ModelConfig m = tiny_gqa_moe("tiny-gqa", {.vocab_size = 16,
                                              .hidden_size = 8,
                                              .num_layers = 2,
                                              .num_heads = 2,
                                              .num_kv_heads = 1,
                                              .head_dim = 4,
                                              .num_experts = 4,
                                              .top_k = 2,
                                              .expert_intermediate_size = 6});
    m.moe.num_shared_experts = 1;
    m.moe.shared_intermediate_size = 5;
    m.dense_intermediate_size = 10;
    return m;
}

/// One decode step: `batch` new tokens, each over `context` cached tokens.
inline StepShape decode(int64_t batch, int64_t context) {
    StepShape s;
    s.mode = Mode::decode;
    s.batch = batch;
    s.context = context;
    return s;
}

/// One prefill step: `batch` sequences of `seq_len` tokens.
inline StepShape prefill(int64_t batch, int64_t seq_len) {
    StepShape s;
    s.mode = Mode::prefill;
    s.batch = batch;
    s.seq_len = seq_len;
    return s;
}

}  // namespace moebench::test
