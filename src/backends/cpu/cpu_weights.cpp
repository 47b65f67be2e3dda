// SPDX-License-Identifier: Apache-2.0
// Weight generation and sizing. Every tensor is one or more segments of the shared RNG's streams
// (core::weight_stream(layer, id)), indexed exactly as the unfused tensor would be (w_gate [E,I,H] etc.).
#include "backends/cpu/cpu_weights.hpp"

#include "backends/cpu/cpu_ops.hpp"
#include "core/moe_core.cuh"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace moebench::cpu {

Dims resolve_dims(const ModelConfig& m) {
    Dims d;
    d.H = m.hidden_size;
    d.V = m.vocab_size;
    const auto& a = m.attn;
    d.nh = a.num_heads;
    if (a.kind == AttentionKind::mla) {
        d.mla = true;
        d.nkv = a.num_heads;
        d.nope = a.qk_nope_head_dim;
        d.qk_dim = a.qk_nope_head_dim + a.qk_rope_head_dim;
        d.v_dim = a.v_head_dim;
        d.rot_dim = a.qk_rope_head_dim;
        d.rot_offset = a.qk_nope_head_dim;
        d.q_lora = a.q_lora_rank;
        d.kv_lora = a.kv_lora_rank;
    } else {
        d.nkv = a.num_kv_heads > 0 ? a.num_kv_heads : a.num_heads;
        d.qk_dim = a.head_dim > 0 ? a.head_dim : m.hidden_size / a.num_heads;
        d.v_dim = d.qk_dim;
        d.rot_dim = a.rotary_dim > 0 ? a.rotary_dim : d.qk_dim;  // partial RoPE: the first rotary_dim dims
        d.rot_offset = 0;
        d.out_gate = a.output_gate;
        d.qkv_width = (d.nh * (d.out_gate ? 2 : 1) + 2 * d.nkv) * d.qk_dim;
    }
    const LinearAttentionConfig& la = m.linear_attn;
    if (m.num_linear_attention_layers() > 0) {
        d.la_delta = la.kind == LinearAttentionKind::gated_delta_net;
        d.la_nk = la.num_key_heads;
        d.la_nv = la.num_value_heads;
        d.la_dk = la.key_head_dim;
        d.la_dv = la.value_head_dim;
        d.la_conv = la.conv_kernel;
        d.la_v = d.la_nv * d.la_dv;
        d.la_channels = la.conv_channels();
        d.la_in = la.in_proj_width();
    }
    d.E = m.moe.num_experts;
    d.K = m.moe.top_k;
    d.I = m.moe.expert_intermediate_size;
    d.shared_I = m.moe.num_shared_experts * m.moe.shared_intermediate_size;
    d.dense_I = m.dense_intermediate_size;
    return d;
}

namespace {

enum class Init { linear, norm, bias, unit };

struct Segment {
    int64_t count;
    uint32_t id;
    uint64_t first_index;
    float scale;
    float offset;
};

// Counts (dry) or allocates and fills tensors.
class Gen {
public:
    Gen(ThreadPool* pool, uint64_t seed) : pool_(pool), seed_(seed) {}
    int64_t floats = 0;

    static Segment seg(int64_t count, uint32_t id, Init init, int64_t fan_in = 1, uint64_t first_index = 0) {
        switch (init) {
            case Init::linear: return {count, id, first_index, core::linear_init_scale(fan_in), 0.0f};
            case Init::norm: return {count, id, first_index, 0.1f, 1.0f};  // 1 +- 0.1: exercises the weight
            case Init::bias: return {count, id, first_index, 0.1f, 0.0f};
            case Init::unit: return {count, id, first_index, std::sqrt(3.0f), 0.0f};  // variance 1
        }
        return {count, id, first_index, 1.0f, 0.0f};
    }

    bool floats_only() const { return pool_ == nullptr; }

    void fill(float* dst, int64_t layer, const Segment& s) {
        const uint64_t base = core::rng_base(seed_, core::weight_stream(layer, s.id));
        fill_uniform(*pool_, dst, s.count, base, s.first_index, s.scale, s.offset);
    }

    /// One buffer made of consecutive segments.
    void tensor(FBuf& buf, int64_t layer, const std::vector<Segment>& segs) {
        int64_t n = 0;
        for (const auto& s : segs) n += s.count;
        floats += n;
        if (floats_only()) return;
        buf.alloc(n);
        int64_t at = 0;
        for (const auto& s : segs) {
            fill(buf.data() + at, layer, s);
            at += s.count;
        }
    }
    void one(FBuf& buf, int64_t layer, int64_t count, uint32_t id, Init init, int64_t fan_in = 1) {
        tensor(buf, layer, {seg(count, id, init, fan_in)});
    }

private:
    ThreadPool* pool_;
    uint64_t seed_;
};

// The experts a slice holds: its list, or every expert.
std::vector<int32_t> held_experts(const WeightSlice& slice, int64_t num_experts) {
    if (!slice.experts.empty()) return slice.experts;
    std::vector<int32_t> all(static_cast<size_t>(num_experts));
    for (int64_t e = 0; e < num_experts; ++e) all[static_cast<size_t>(e)] = static_cast<int32_t>(e);
    return all;
}

// Linear attention's weights; at decode each sequence's state and conv window as after `context` earlier tokens
// (random, small: a decayed sum of rank-1 writes).
void gen_linear_attention(Gen& g, const Dims& d, LayerWeights& w, int64_t batch, int64_t context,
                          const WeightSlice& slice) {
    const int64_t L = w.layer, H = d.H;
    g.one(w.la_in, L, d.la_in * H, core::kWLinIn, Init::linear, H);
    if (d.la_delta) {
        if (d.la_conv > 0) g.one(w.la_conv, L, d.la_channels * d.la_conv, core::kWLinConv, Init::linear, d.la_conv);
        g.one(w.la_dt_bias, L, d.la_nv, core::kWLinDtBias, Init::bias);
        g.one(w.la_a_log, L, d.la_nv, core::kWLinALog, Init::bias);
        g.one(w.la_norm, L, d.la_dv, core::kWLinNorm, Init::norm);
    } else {
        g.one(w.la_norm, L, d.la_v, core::kWLinNorm, Init::norm);
    }
    if (context <= 0) return;
    const int64_t state = d.la_nv * d.la_dk * d.la_dv, window = d.la_conv > 1 ? d.la_channels * (d.la_conv - 1) : 0;
    const auto first = [&](int64_t per_seq) { return static_cast<uint64_t>(slice.first_sequence * per_seq); };
    g.tensor(w.la_state, L, {Gen::seg(batch * state, core::kWLinState, Init::bias, 1, first(state))});
    if (window > 0)
        g.tensor(w.la_conv_state, L, {Gen::seg(batch * window, core::kWLinConvState, Init::unit, 1, first(window))});
}

void gen_layer(Gen& g, const ModelConfig& m, const Dims& d, LayerWeights& w, int64_t batch, int64_t context,
               const WeightSlice& slice) {
    const int64_t L = w.layer, H = d.H;
    const bool ln = m.norm == NormKind::layernorm;
    g.one(w.attn_norm_w, L, H, core::kWAttnNorm, Init::norm);
    g.one(w.ffn_norm_w, L, H, core::kWFfnNorm, Init::norm);
    if (ln && m.norm_bias) {
        g.one(w.attn_norm_b, L, H, core::kWAttnNormBias, Init::bias);
        g.one(w.ffn_norm_b, L, H, core::kWFfnNormBias, Init::bias);
    }
    if (m.norms_per_layer >= 4) {
        g.one(w.post_attn_norm_w, L, H, core::kWPostAttnNorm, Init::norm);
        g.one(w.post_ffn_norm_w, L, H, core::kWPostFfnNorm, Init::norm);
    }
    const auto& a = m.attn;
    if (w.is_linear) {
        gen_linear_attention(g, d, w, batch, context, slice);
    } else if (!d.mla) {
        const int64_t qn = d.nh * d.qk_dim, kn = d.nkv * d.qk_dim;
        std::vector<Segment> qkv = {Gen::seg(qn * H, core::kWQ, Init::linear, H),
                                    Gen::seg(kn * H, core::kWK, Init::linear, H),
                                    Gen::seg(kn * H, core::kWV, Init::linear, H)};
        if (d.out_gate) qkv.push_back(Gen::seg(qn * H, core::kWQGate, Init::linear, H));
        g.tensor(w.w_qkv, L, qkv);
        if (a.qkv_bias)
            g.tensor(w.b_qkv, L,
                     {Gen::seg(qn, core::kWQBias, Init::bias), Gen::seg(kn, core::kWKBias, Init::bias),
                      Gen::seg(kn, core::kWVBias, Init::bias)});
        if (a.qk_norm) {
            g.one(w.q_norm, L, d.qk_dim, core::kWQNorm, Init::norm);
            g.one(w.k_norm, L, d.qk_dim, core::kWKNorm, Init::norm);
        }
    } else {
        const int64_t qn = d.nh * d.qk_dim;
        if (d.q_lora > 0) {
            g.one(w.w_q_a, L, d.q_lora * H, core::kWQA, Init::linear, H);
            g.one(w.q_a_norm, L, d.q_lora, core::kWQANorm, Init::norm);
            g.one(w.w_q_b, L, qn * d.q_lora, core::kWQB, Init::linear, d.q_lora);
        } else {
            g.one(w.w_q, L, qn * H, core::kWQ, Init::linear, H);
        }
        g.one(w.w_kv_a, L, (d.kv_lora + d.rot_dim) * H, core::kWKVA, Init::linear, H);
        g.one(w.kv_a_norm, L, d.kv_lora, core::kWKVANorm, Init::norm);
        g.one(w.w_kv_b, L, d.nh * (d.nope + d.v_dim) * d.kv_lora, core::kWKVB, Init::linear, d.kv_lora);
    }
    if (a.sinks && !w.is_linear) g.one(w.sinks, L, d.nh, core::kWSinks, Init::unit);
    const int64_t o_in = w.is_linear ? d.la_v : d.nh * d.v_dim;
    g.one(w.w_o, L, H * o_in, core::kWO, Init::linear, o_in);
    if (a.o_bias && !w.is_linear) g.one(w.b_o, L, H, core::kWOBias, Init::bias);
    if (context > 0 && !w.is_linear) {  // the caches of sequences first_sequence .. first_sequence + batch - 1
        const auto first = [&](int64_t dim) {
            return static_cast<uint64_t>(slice.first_sequence * d.nkv * context * dim);
        };
        g.tensor(w.k_cache, L,
                 {Gen::seg(batch * d.nkv * context * d.qk_dim, core::kWKCache, Init::unit, 1, first(d.qk_dim))});
        g.tensor(w.v_cache, L,
                 {Gen::seg(batch * d.nkv * context * d.v_dim, core::kWVCache, Init::unit, 1, first(d.v_dim))});
    }

    if (w.is_moe) {
        const auto& mo = m.moe;
        const int64_t E = d.E, I = d.I;
        g.one(w.router_w, L, E * H, core::kWRouter, Init::linear, H);
        const std::vector<int32_t> held = held_experts(slice, E);
        if (mo.router_bias) g.one(w.router_b, L, E, core::kWRouterBias, Init::bias);
        if (mo.router_correction_bias) g.one(w.correction_b, L, E, core::kWCorrectionBias, Init::bias);
        // Fused per expert: [gate_e (I x H) | up_e (I x H)], indexed as the unfused w_gate / w_up [E, I, H].
        // The held experts only, each with its values in the whole [E, ...] tensor.
        std::vector<Segment> gu, bgu, down, bdown;
        for (const int32_t e : held) {
            gu.push_back(Gen::seg(I * H, core::kWGate, Init::linear, H, static_cast<uint64_t>(e * I * H)));
            gu.push_back(Gen::seg(I * H, core::kWUp, Init::linear, H, static_cast<uint64_t>(e * I * H)));
            bgu.push_back(Gen::seg(I, core::kWBGate, Init::bias, 1, static_cast<uint64_t>(e * I)));
            bgu.push_back(Gen::seg(I, core::kWBUp, Init::bias, 1, static_cast<uint64_t>(e * I)));
            down.push_back(Gen::seg(H * I, core::kWDown, Init::linear, I, static_cast<uint64_t>(e * H * I)));
            bdown.push_back(Gen::seg(H, core::kWBDown, Init::bias, 1, static_cast<uint64_t>(e * H)));
        }
        g.tensor(w.w_gu, L, gu);
        g.tensor(w.w_down, L, down);
        if (mo.expert_bias) {
            g.tensor(w.b_gu, L, bgu);
            g.tensor(w.b_down, L, bdown);
        }
        if (d.shared_I > 0) {
            const int64_t SI = d.shared_I;
            g.tensor(w.shared_gu, L,
                     {Gen::seg(SI * H, core::kWSharedGate, Init::linear, H),
                      Gen::seg(SI * H, core::kWSharedUp, Init::linear, H)});
            g.one(w.shared_down, L, H * SI, core::kWSharedDown, Init::linear, SI);
            if (mo.shared_expert_gate) g.one(w.shared_gate_w, L, H, core::kWSharedGateWeight, Init::linear, H);
        }
    } else {
        const int64_t Id = d.dense_I;
        g.tensor(
            w.dense_gu, L,
            {Gen::seg(Id * H, core::kWDenseGate, Init::linear, H), Gen::seg(Id * H, core::kWDenseUp, Init::linear, H)});
        g.one(w.dense_down, L, H * Id, core::kWDenseDown, Init::linear, Id);
    }
}

void gen_model(Gen& g, const ModelConfig& m, const std::vector<int64_t>& layers, int64_t batch, int64_t context,
               const WeightSlice& slice, ModelWeights& w) {
    const Dims d = resolve_dims(m);
    g.one(w.embed, -1, d.V * d.H, core::kWEmbed, Init::unit);
    if (!m.tie_word_embeddings) g.one(w.lm_head, -1, d.V * d.H, core::kWLmHead, Init::linear, d.H);
    g.one(w.final_norm_w, -1, d.H, core::kWFinalNorm, Init::norm);
    if (m.norm == NormKind::layernorm && m.norm_bias) g.one(w.final_norm_b, -1, d.H, core::kWFinalNormBias, Init::bias);
    w.layers.resize(layers.size());
    for (size_t i = 0; i < layers.size(); ++i) {
        LayerWeights& lw = w.layers[i];
        lw.layer = layers[i];
        lw.is_moe = m.is_moe_layer(layers[i]);
        lw.is_linear = m.is_linear_attention_layer(layers[i]);
        gen_layer(g, m, d, lw, batch, context, slice);
    }
}

}  // namespace

int64_t weight_floats(const ModelConfig& m, const std::vector<int64_t>& layers, int64_t batch, int64_t context,
                      const WeightSlice& slice) {
    Gen g(nullptr, 0);
    ModelWeights w;
    gen_model(g, m, layers, batch, context, slice, w);
    return g.floats;
}

ModelWeights make_weights(ThreadPool& pool, const ModelConfig& m, const std::vector<int64_t>& layers, int64_t batch,
                          int64_t context, uint64_t seed, const PanelPlan& plan, const WeightSlice& slice) {
    Gen g(&pool, seed);
    ModelWeights w;
    gen_model(g, m, layers, batch, context, slice, w);
    const Dims d = resolve_dims(m);
    const int64_t num_held = slice.experts.empty() ? d.E : static_cast<int64_t>(slice.experts.size());
    // A weight of `count` experts x [n, k]; dense ones only with whole panels (a narrower last panel would run the
    // kernel's plain loop, slower than the row-major kernels for the few-output router or odd test shapes).
    const auto pack = [&](FBuf& buf, int64_t count, int64_t n, int64_t k, bool want) {
        if (!want || buf.empty() || (count == 1 && n % kPanelCols != 0)) return;
        for (int64_t e = 0; e < count; ++e) pack_panels(pool, buf.data() + e * n * k, n, k, buf.data() + e * n * k);
        buf.panels = true;
    };
    for (LayerWeights& lw : w.layers) {
        pack(lw.w_gu, num_held, 2 * d.I, d.H, plan.experts);
        pack(lw.w_down, num_held, d.H, d.I, plan.experts);
        pack(lw.w_qkv, 1, d.qkv_width, d.H, plan.dense);
        pack(lw.w_q_a, 1, d.q_lora, d.H, plan.dense);
        pack(lw.w_q_b, 1, d.nh * d.qk_dim, d.q_lora, plan.dense);
        pack(lw.w_q, 1, d.nh * d.qk_dim, d.H, plan.dense);
        pack(lw.w_kv_a, 1, d.kv_lora + d.rot_dim, d.H, plan.dense);
        pack(lw.w_kv_b, 1, d.nh * (d.nope + d.v_dim), d.kv_lora, plan.dense);
        pack(lw.w_o, 1, d.H, lw.is_linear ? d.la_v : d.nh * d.v_dim, plan.dense);
        pack(lw.la_in, 1, d.la_in, d.H, plan.dense);
        pack(lw.router_w, 1, d.E, d.H, plan.dense);
        pack(lw.shared_gu, 1, 2 * d.shared_I, d.H, plan.dense);
        pack(lw.shared_down, 1, d.H, d.shared_I, plan.dense);
        pack(lw.dense_gu, 1, 2 * d.dense_I, d.H, plan.dense);
        pack(lw.dense_down, 1, d.H, d.dense_I, plan.dense);
    }
    pack(w.lm_head, 1, d.V, d.H, plan.lm_head);
    return w;
}

std::vector<float> row_major(ThreadPool& pool, const float* w, bool panels, int64_t n, int64_t k) {
    std::vector<float> out(static_cast<size_t>(n * k));
    if (panels)
        unpack_panels(pool, w, n, k, out.data());
    else
        std::copy(w, w + n * k, out.begin());
    return out;
}

}  // namespace moebench::cpu
