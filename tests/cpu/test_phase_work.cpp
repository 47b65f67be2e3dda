// SPDX-License-Identifier: Apache-2.0
// phase_work on tiny models against hand-computed FLOPs and bytes (the arithmetic is written out beside each
// check), its consistency with accounting.hpp, and the all-to-all traffic under expert parallelism.
#include "common/paths.hpp"
#include "config/model_config.hpp"
#include "model/phase_work.hpp"

#include "model/accounting.hpp"
#include "test_models.hpp"

#include <catch2/catch.hpp>

#include <map>

using namespace moebench;

namespace {

using test::decode;
using test::prefill;

// MLA variant of test::tiny_gqa_h8(): H 8, 2 heads, no q_lora, kv_lora 4, nope 2, rope 2, v 3.
ModelConfig tiny_mla() {
    ModelConfig m = test::tiny_gqa_h8();
    m.name = "tiny-mla";
    m.attn = test::tiny_mla_attention({.num_heads = 2,
                                       .q_lora_rank = 0,
                                       .kv_lora_rank = 4,
                                       .qk_nope_head_dim = 2,
                                       .qk_rope_head_dim = 2,
                                       .v_head_dim = 3});
    m.attn.num_kv_heads = 2;
    return m;
}

PhaseWork pw(const ModelConfig& m, Phase p, const StepShape& s, const std::vector<int64_t>& tpe = {}, int64_t layer = 0,
             int64_t ep = 1, PhaseWorkOptions opt = {}) {
    return phase_work(m, p, layer, s, tpe, uniform_precision(DType::bf16), ep, opt);  // bf16 weights and activations
}

}  // namespace

TEST_CASE("phase_work: attention-side phases of a GQA decode step by hand", "[phase_work]") {
    const ModelConfig m = test::tiny_gqa_h8();
    const StepShape s = decode(2, 3);  // T = 2 tokens, each over 3 cached tokens

    // attn_norm: weights H = 8 -> 16 B; x read + xn written = 2 * T * H = 32 elems -> 64 B.
    PhaseWork n = pw(m, Phase::attn_norm, s);
    CHECK(n.flops == 0);
    CHECK(n.weight_bytes == 16);
    CHECK(n.activation_bytes == 64);
    CHECK(n.bytes() == 80);

    // qkv_proj: matrices H*nh*hd + 2*H*nkv*hd = 64 + 64 = 128 -> flops 2*T*128 = 512, weights 256 B;
    // x in (T*H = 16) + q,k,v out (T*(2+2*1)*4 = 32) = 48 elems -> 96 B.
    PhaseWork q = pw(m, Phase::qkv_proj, s);
    CHECK(q.flops == 512);
    CHECK(q.weight_bytes == 256);
    CHECK(q.activation_bytes == 96);

    // attention: each query sees 3 cached keys + itself = 4 pairs; per pair nh*(hd + hd) = 16 MACs
    // -> flops 2 * B(2) * 4 * 16 = 256. Bytes: q T*nh*hd = 16, new k,v T*2*nkv*hd = 16, cache B*3*8 = 48,
    // out T*nh*hd = 16 -> 96 elems -> 192 B. No weights (no sinks).
    PhaseWork a = pw(m, Phase::attention, s);
    CHECK(a.flops == 256);
    CHECK(a.weight_bytes == 0);
    CHECK(a.activation_bytes == 192);

    // o_proj: nh*hd*H = 64 -> flops 2*2*64 = 256, weights 128 B; in T*8 = 16, residual read + write 2*T*H = 32
    // -> 48 elems -> 96 B.
    PhaseWork o = pw(m, Phase::o_proj, s);
    CHECK(o.flops == 256);
    CHECK(o.weight_bytes == 128);
    CHECK(o.activation_bytes == 96);

    // embed: T rows of H -> 2*8*2 = 32 B weights; ids T*4 = 8 B + rows written T*H*2 = 32 B.
    PhaseWork e = pw(m, Phase::embed, s, {}, -1);
    CHECK(e.weight_bytes == 32);
    CHECK(e.activation_bytes == 40);

    // lm_head, decode: T rows -> flops 2*2*V(16)*H(8) = 512, weights 16*8*2 = 256 B, in 2*8*2 = 32 B, logits
    // 2*16*2 = 64 B.
    PhaseWork h = pw(m, Phase::lm_head, s, {}, -1);
    CHECK(h.flops == 512);
    CHECK(h.weight_bytes == 256);
    CHECK(h.activation_bytes == 96);
}

TEST_CASE("phase_work: MoE phases by hand, experts without tokens read nothing", "[phase_work]") {
    const ModelConfig m = test::tiny_gqa_h8();
    const StepShape s = decode(2, 3);
    // token 0 -> {0, 1}, token 1 -> {1, 3}: tokens per expert [1, 2, 0, 1], A = 4 assignments.
    const std::vector<int64_t> tpe = {1, 2, 0, 1};

    // router_gemm: 2*T*H*E = 2*2*8*4 = 128 flops; weights H*E = 32 -> 64 B; x in 32 B + fp32 logits T*E*4 = 32 B.
    PhaseWork r = pw(m, Phase::router_gemm, s, tpe);
    CHECK(r.flops == 128);
    CHECK(r.weight_bytes == 64);
    CHECK(r.activation_bytes == 64);

    // topk: fp32 logits in T*E*4 = 32 B; ids + weights out T*k*(4+4) = 32 B.
    CHECK(pw(m, Phase::topk, s, tpe).activation_bytes == 64);

    // permute: x in T*H*2 = 32 B, ids T*k*4 = 16 B, A rows out 4*8*2 = 64 B.
    CHECK(pw(m, Phase::permute, s, tpe).activation_bytes == 112);

    // expert_up: 3 experts with tokens, each gate+up 2*I*H = 96 elems -> 192 B -> 576 B; flops per row 2*2*6*8 = 192,
    // 4 rows -> 768; rows in 4*8 + out 4*12 = 80 elems -> 160 B.
    PhaseWork up = pw(m, Phase::expert_up, s, tpe);
    CHECK(up.weight_bytes == 576);
    CHECK(up.flops == 768);
    CHECK(up.activation_bytes == 160);

    // activation: A*(2I in + I out) = 4*18 = 72 elems -> 144 B.
    PhaseWork act = pw(m, Phase::activation, s, tpe);
    CHECK(act.flops == 0);
    CHECK(act.activation_bytes == 144);

    // expert_down: I*H = 48 elems -> 96 B per expert, 3 experts -> 288 B; flops 2*4*6*8 = 384; 4*(6+8) = 56 -> 112 B.
    PhaseWork down = pw(m, Phase::expert_down, s, tpe);
    CHECK(down.weight_bytes == 288);
    CHECK(down.flops == 384);
    CHECK(down.activation_bytes == 112);

    // shared_expert: 3*H*SI = 120 params -> 240 B; flops 2*T*120 = 480;
    // up T*(H + 2SI) = 36, act T*3SI = 30, down T*(SI + H) = 26 -> 92 elems -> 184 B.
    PhaseWork sh = pw(m, Phase::shared_expert, s, tpe);
    CHECK(sh.weight_bytes == 240);
    CHECK(sh.flops == 480);
    CHECK(sh.activation_bytes == 184);

    // unpermute_reduce: A rows 64 B + fp32 weights A*4 = 16 B + shared output T*H*2 = 32 B + residual read/write 64 B.
    CHECK(pw(m, Phase::unpermute_reduce, s, tpe).activation_bytes == 176);

    // dense_mlp (width 10): 3*8*10 = 240 params -> 480 B, flops 2*2*240 = 960;
    // up T*(8+20) = 56, act T*30 = 60, down T*(10+8) = 36, residual T*8 = 16 -> 168 elems -> 336 B.
    PhaseWork dm = pw(m, Phase::dense_mlp, s);
    CHECK(dm.weight_bytes == 480);
    CHECK(dm.flops == 960);
    CHECK(dm.activation_bytes == 336);

    // The a2a phases move nothing without expert parallelism.
    CHECK(pw(m, Phase::dispatch_a2a, s, tpe).bytes() == 0);

    // An all-zero routing reads no expert weights at all.
    CHECK(pw(m, Phase::expert_up, s, {0, 0, 0, 0}).bytes() == 0);
}

TEST_CASE("phase_work: causal prefill, sliding windows and chunks", "[phase_work]") {
    ModelConfig m = test::tiny_gqa_h8();
    // One sequence of 4 tokens: pairs 1+2+3+4 = 10, 16 MACs each -> 2*10*16 = 320 flops.
    // q 4*8 + k,v 4*8 + out 4*8 = 96 elems -> 192 B (no cache).
    PhaseWork full = pw(m, Phase::attention, prefill(1, 4));
    CHECK(full.flops == 320);
    CHECK(full.activation_bytes == 192);
    // Prefill starts from an empty cache whatever `context` says (as the cpu and cuda backends do).
    StepShape with_ctx = prefill(1, 4);
    with_ctx.context = 7;
    CHECK(pw(m, Phase::attention, with_ctx).flops == 320);
    CHECK(pw(m, Phase::attention, with_ctx).activation_bytes == 192);

    // Sliding window 2 on layer 0: pairs 1+2+2+2 = 7 -> 224 flops; layer 1 stays full.
    m.layer_sliding = {1, 0};
    m.attn.sliding_window = 2;
    CHECK(pw(m, Phase::attention, prefill(1, 4), {}, 0).flops == 224);
    CHECK(pw(m, Phase::attention, prefill(1, 4), {}, 1).flops == 320);
    // Decode at context 3 with window 2: the query sees position 2 and itself: 2 pairs -> 2*2*2*16 = 128 flops;
    // 1 cached token per sequence -> cache B*1*8 = 16 elems; q 16 + new kv 16 + out 16 -> 64 elems -> 128 B.
    PhaseWork win = pw(m, Phase::attention, decode(2, 3), {}, 0);
    CHECK(win.flops == 128);
    CHECK(win.activation_bytes == 128);

    // Chunked attention (chunk 2): positions 0..3 see 1, 2, 1, 2 keys = 6 pairs -> 192 flops.
    m.attn.sliding_window = 0;
    m.attn.attention_chunk = 2;
    CHECK(pw(m, Phase::attention, prefill(1, 4), {}, 0).flops == 192);

    // Prefill LM head: only the last token of each of the 3 sequences -> 2*3*16*8 = 768 flops.
    CHECK(pw(m, Phase::lm_head, prefill(3, 4), {}, -1).flops == 768);
}

TEST_CASE("phase_work: MLA in its three forms by hand", "[phase_work]") {
    const ModelConfig m = tiny_mla();
    // q: H*nh*(nope+rope) = 8*2*4 = 64; kv_a: H*(C+R) = 8*6 = 48; kv_b: C*nh*(nope+v) = 4*2*5 = 40.
    CHECK(qkv_matrix_elems(m, MlaForm::latent_expand) == 152);
    CHECK(qkv_matrix_elems(m, MlaForm::absorbed) == 112);
    CHECK(o_proj_matrix_elems(m) == 48);                              // nh*v*H = 2*3*8
    CHECK(attention_macs_per_pair(m, MlaForm::latent_expand) == 14);  // nh*(4 + 3)
    CHECK(attention_macs_per_pair(m, MlaForm::absorbed) == 20);       // nh*(2C + R) = 2*(8 + 2)
    CHECK(cache_elems_per_token(m, MlaForm::latent_expand) == 6);     // C + R
    CHECK(cache_elems_per_token(m, MlaForm::expanded_cache) == 14);   // nh*(qk + v)

    // qkv_proj weights: matrices + kv_a_layernorm (C = 4) -> (152 + 4) * 2 B.
    CHECK(pw(m, Phase::qkv_proj, decode(1, 3)).weight_bytes == 312);

    const StepShape s = decode(1, 3);  // one token, 3 cached: 4 pairs
    PhaseWorkOptions o;
    // latent_expand: 2*4*14 = 112 + re-expansion of 3 latents 2*3*40 = 240 -> 352 flops; kv_b read again 80 B;
    // q 8 + new k,v 14 + latent cache 3*6 = 18 + out 6 + expanded k_nope,v written and read 2*3*2*5 = 60 -> 106 elems.
    o.mla_form = MlaForm::latent_expand;
    PhaseWork le = pw(m, Phase::attention, s, {}, 0, 1, o);
    CHECK(le.flops == 352);
    CHECK(le.weight_bytes == 80);
    CHECK(le.activation_bytes == 212);
    // expanded_cache: 112 flops; q 8 + new 14 + cache 3*14 = 42 + out 6 = 70 elems -> 140 B.
    o.mla_form = MlaForm::expanded_cache;
    PhaseWork ec = pw(m, Phase::attention, s, {}, 0, 1, o);
    CHECK(ec.flops == 112);
    CHECK(ec.weight_bytes == 0);
    CHECK(ec.activation_bytes == 140);
    // absorbed: 2*4*20 = 160 + W_UK/W_UV on the one token 2*1*40 = 80 -> 240; kv_b 80 B;
    // q 8 + new latent 6 + cache 18 + out 6 = 38 elems -> 76 B.
    o.mla_form = MlaForm::absorbed;
    PhaseWork ab = pw(m, Phase::attention, s, {}, 0, 1, o);
    CHECK(ab.flops == 240);
    CHECK(ab.weight_bytes == 80);
    CHECK(ab.activation_bytes == 76);
}

TEST_CASE("phase_work agrees with accounting.hpp on the whole step", "[phase_work]") {
    for (const ModelConfig& m : {test::tiny_gqa_h8(), tiny_mla()}) {
        // The attention matrices of one layer are qkv + o; flops_per_token(context 0) counts 2 per element per layer.
        const double attn0 = flops_per_token(m, 0).by_component[static_cast<int>(Component::attention)];
        CHECK(2.0 * m.num_layers * (qkv_matrix_elems(m, MlaForm::latent_expand) + o_proj_matrix_elems(m)) == attn0);
        // Context MACs per attended token.
        CHECK(flops_per_token(m, 1).attention_context ==
              2.0 * m.num_layers * attention_macs_per_pair(m, MlaForm::latent_expand));

        // One decode token: the summed phase flops of a layer == the accounting's per-token flops of that layer
        // (top_k experts, shared, router, attention over `ctx` cached + itself). The accounting counts MLA with its
        // per-head k/v at hand, which is the expanded_cache form (latent_expand would add the re-expansion).
        PhaseWorkOptions o;
        o.mla_form = MlaForm::expanded_cache;
        const int64_t ctx = 5;
        const StepShape s = decode(1, ctx);
        std::vector<int64_t> tpe = {1, 1, 0, 0};  // top-2
        double layer_flops = 0;
        for (Phase p : {Phase::qkv_proj, Phase::attention, Phase::o_proj, Phase::router_gemm, Phase::expert_up,
                        Phase::expert_down, Phase::shared_expert})
            layer_flops += pw(m, p, s, tpe, 0, 1, o).flops;
        const FlopsPerToken f = flops_per_token(m, ctx + 1);  // accounting: ctx+1 attended tokens (incl. itself)
        const double per_layer = (f.total - f.by_component[static_cast<int>(Component::lm_head)]) / m.num_layers;
        CHECK(layer_flops == Approx(per_layer).epsilon(1e-12));
        // Weights touched by that token equal the accounting's active parameters of one layer minus norms.
        double wbytes = 0;
        for (Phase p : {Phase::qkv_proj, Phase::attention, Phase::o_proj, Phase::router_gemm, Phase::expert_up,
                        Phase::expert_down, Phase::shared_expert})
            wbytes += pw(m, p, s, tpe, 0, 1, o).weight_bytes;
        const double active = attention_params_per_layer(m) + router_params_per_layer(m) + shared_expert_params(m) +
                              m.moe.top_k * routed_expert_params(m);
        CHECK(wbytes == 2.0 * active);
    }
}

TEST_CASE("phase_work: a router's selection bias is read once per layer (by topk)", "[phase_work]") {
    // DeepSeek-V3's e_score_correction_bias: E values the top-k selection adds, not the gate GEMM. The router's
    // weights over its two phases are its parameters, once: H*E gate + E bias = 8*4 + 4 = 36 values, 72 bytes.
    ModelConfig m = test::tiny_gqa_h8();
    m.moe.router_correction_bias = true;
    const StepShape s = decode(1, 5);
    const double router = pw(m, Phase::router_gemm, s).weight_bytes + pw(m, Phase::topk, s).weight_bytes;
    CHECK(router_params_per_layer(m) == 36);
    CHECK(router == 72);
}

TEST_CASE("phase_floor_us is the larger of the compute and memory times", "[phase_work]") {
    PhaseWork w{2e12, 1e9, 1e9};                             // 2 TFLOP, 2 GB
    CHECK(phase_floor_us(w, 1e15, 2e12) == Approx(2000.0));  // compute 2 ms > memory 1 ms
    CHECK(phase_floor_us(w, 4e15, 1e12) == Approx(2000.0));  // memory 2 ms > compute 0.5 ms
    CHECK(phase_floor_us(w, 0, 1e12) == Approx(2000.0));     // no peak: memory only
}

TEST_CASE("a2a traffic: placement, home ranks and a hand-counted case", "[phase_work]") {
    const ModelConfig m = test::tiny_gqa_h8();  // 4 experts, H 8
    CHECK(expert_rank(3, 4, 2) == 1);
    CHECK(expert_rank(1, 4, 2) == 0);
    CHECK(token_home_rank(decode(2, 3), 1, 2) == 1);
    CHECK(token_home_rank(prefill(2, 4), 5, 2) == 1);  // token 5 is in sequence 1
    CHECK(sequences_on_rank(decode(10, 0), 0, 8) == 2);
    CHECK(sequences_on_rank(decode(3, 0), 7, 8) == 0);
    int64_t total = 0;
    for (int64_t r = 0; r < 8; ++r) total += sequences_on_rank(decode(10, 0), r, 8);
    CHECK(total == 10);

    // token 0 (rank 0) -> {0, 1}: both on rank 0; token 1 (rank 1) -> {1, 3}: expert 1 is remote -> one row of
    // H * 2 B = 16 B from rank 1 to rank 0.
    LayerRouting r{2, 2, {0, 1, 1, 3}, {0.5f, 0.5f, 0.5f, 0.5f}};
    A2aTraffic t = a2a_traffic(m, decode(2, 3), r, 2.0, 2);
    CHECK(t.at(1, 0) == 16);
    CHECK(t.at(0, 1) == 0);
    CHECK(t.sent(1) == 16);
    CHECK(t.received(0) == 16);
    CHECK(t.total() == 16);
    PhaseWorkOptions o;
    o.routing = &r;
    CHECK(pw(m, Phase::dispatch_a2a, decode(2, 3), {1, 2, 0, 1}, 0, 2, o).activation_bytes == 16);
    // Without ids: each rank holds half the tokens, so half of the 4 assignments are expected remote -> 32 B.
    CHECK(pw(m, Phase::dispatch_a2a, decode(2, 3), {1, 2, 0, 1}, 0, 2).activation_bytes == 32);
    // A dropped assignment (-1) moves nothing.
    LayerRouting dropped{2, 2, {0, 1, -1, 3}, {0.5f, 0.5f, 0.0f, 0.5f}};
    CHECK(a2a_traffic(m, decode(2, 3), dropped, 2.0, 2).total() == 0);
}

TEST_CASE("layers of one work class have the same work in every phase, for every shipped model", "[phase_work]") {
    // The sim prices a token-side phase and the roofline counts a phase once per layer_work_class; a layer whose work
    // differed from its class's (a new per-layer attribute phase_work reads) would take another layer's figures.
    for (const std::string& name : list_configs("models")) {
        const ModelConfig m = load_model(name);
        INFO(name);
        std::vector<int64_t> tpe(static_cast<size_t>(std::max<int64_t>(m.moe.num_experts, 0)));
        for (size_t e = 0; e < tpe.size(); ++e) tpe[e] = static_cast<int64_t>((e * 7) % 5);
        StepShape decode;
        decode.batch = 8;
        decode.context = 9000;  // beyond every sliding window and attention chunk shipped
        StepShape prefill;
        prefill.mode = Mode::prefill;
        prefill.batch = 2;
        prefill.seq_len = 5000;
        std::map<int64_t, int64_t> first_of_class;
        for (int64_t l = 0; l < m.num_layers; ++l) first_of_class.emplace(layer_work_class(m, l), l);
        for (int64_t l = 0; l < m.num_layers; ++l) {
            const int64_t ref = first_of_class.at(layer_work_class(m, l));
            if (ref == l) continue;
            for (int p = 0; p < kNumPhases; ++p)
                for (const StepShape& s : {decode, prefill}) {
                    const Phase ph = static_cast<Phase>(p);
                    const std::vector<int64_t> counts = m.is_moe_layer(l) ? tpe : std::vector<int64_t>{};
                    const PhaseWork a = phase_work(m, ph, l, s, counts, uniform_precision(DType::bf16), 4);
                    const PhaseWork b = phase_work(m, ph, ref, s, counts, uniform_precision(DType::bf16), 4);
                    INFO("layer " << l << " vs " << ref << ", phase " << phase_name(ph));
                    CHECK(a.flops == b.flops);
                    CHECK(a.weight_bytes == b.weight_bytes);
                    CHECK(a.activation_bytes == b.activation_bytes);
                }
        }
    }
    // The once-per-step phases' layer -1 is a class of its own.
    CHECK(layer_work_class(load_model("deepseek-v3"), -1) == -1);
}
