// SPDX-License-Identifier: Apache-2.0
// The CPU backend's whole MoE block (ffn_norm .. unpermute_reduce) against plainly written reference loops:
// family routing re-implemented here with a sort, experts as naive dot products, for several families, plus
// capacity drops, soft top-N, a routing override and seed determinism.
#include "backends/cpu/cpu_backend_impl.hpp"
#include "common/error.hpp"
#include "test_models.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

using namespace moebench;

namespace {

using test::decode;
using test::prefill;

ModelConfig tiny_model(RoutingKind routing) {
    ModelConfig m = test::tiny_gqa_moe("tiny", {.vocab_size = 32,
                                                .hidden_size = 16,
                                                .num_layers = 2,
                                                .num_heads = 2,
                                                .num_kv_heads = 1,
                                                .head_dim = 8,
                                                .num_experts = 8,
                                                .top_k = 2,
                                                .expert_intermediate_size = 12});
    m.family = "test";
    m.moe.routing = routing;
    m.norm_eps = 1e-6;
    return m;
}

float sigm(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float act_ref(const ModelConfig& m, float g, float u) {
    if (m.activation == Activation::swiglu_oai) {
        const auto limit = static_cast<float>(m.swiglu_limit);
        g = std::min(g, limit);
        u = std::max(-limit, std::min(u, limit));
        return g * sigm(1.702f * g) * (u + 1.0f);
    }
    if (m.activation == Activation::geglu)
        return 0.5f * g * (1.0f + std::tanh(0.7978845608f * (g + 0.044715f * g * g * g))) * u;
    return g / (1.0f + std::exp(-g)) * u;
}

// Indices of the k best of v (higher first, lower index on ties), restricted to `allowed`.
std::vector<int> best_k(const std::vector<float>& v, int k, const std::vector<bool>& allowed) {
    std::vector<int> idx;
    for (int i = 0; i < static_cast<int>(v.size()); ++i)
        if (allowed.empty() || allowed[i]) idx.push_back(i);
    std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return v[a] > v[b]; });
    idx.resize(static_cast<size_t>(k));
    return idx;
}

std::vector<float> softmax(const std::vector<float>& l) {
    const float mx = *std::max_element(l.begin(), l.end());
    std::vector<float> p(l.size());
    double s = 0;
    for (size_t i = 0; i < l.size(); ++i) s += (p[i] = std::exp(l[i] - mx));
    for (auto& x : p) x = static_cast<float>(x / s);
    return p;
}

// Reference routing of one row, written from each family's reference code.
void route_ref(const ModelConfig& m, const std::vector<float>& l, const float* corr, std::vector<int>& ids,
               std::vector<float>& w) {
    const int E = static_cast<int>(m.moe.num_experts), K = static_cast<int>(m.moe.top_k);
    const float scale = static_cast<float>(m.moe.routed_scaling_factor);
    w.assign(static_cast<size_t>(K), 0.0f);
    switch (m.moe.routing) {
        case RoutingKind::softmax_topk: {
            auto p = softmax(l);
            ids = best_k(p, K, {});
            float s = 0;
            for (int j = 0; j < K; ++j) s += (w[j] = p[ids[j]]);
            for (auto& x : w) x = (m.moe.norm_topk_prob ? x / s : x) * scale;
            break;
        }
        case RoutingKind::topk_softmax: {
            ids = best_k(l, K, {});
            std::vector<float> sel;
            for (int id : ids) sel.push_back(l[id]);
            w = softmax(sel);
            break;
        }
        case RoutingKind::topk_sigmoid:
            ids = best_k(l, K, {});
            for (int j = 0; j < K; ++j) w[j] = sigm(l[ids[j]]);
            break;
        case RoutingKind::sparsemixer: {  // modeling_phimoe.py sparsemixer, training=False
            ids = best_k(l, 2, {});
            const double eps2 = 2.0 * m.moe.router_jitter_noise;
            for (int j = 0; j < 2; ++j) {
                const double mx = l[ids[j]];
                double sum = 0;
                for (int i = 0; i < E; ++i)
                    if (!(j == 1 && i == ids[0]) && !((mx - l[i]) / std::max<double>(std::fabs(l[i]), mx) > eps2))
                        sum += std::exp(l[i] - mx);
                w[j] = static_cast<float>(1.0 / sum);
            }
            break;
        }
        case RoutingKind::sigmoid_group_topk:
        case RoutingKind::softmax_group_greedy: {
            const bool v3 = m.moe.routing == RoutingKind::sigmoid_group_topk;
            std::vector<float> s(static_cast<size_t>(E)), c(static_cast<size_t>(E));
            if (v3)
                for (int i = 0; i < E; ++i) s[i] = sigm(l[i]);
            else
                s = softmax(l);
            for (int i = 0; i < E; ++i) c[i] = s[i] + (corr ? corr[i] : 0.0f);
            const int G = static_cast<int>(m.moe.num_groups), gs = E / G;
            std::vector<float> gscore(static_cast<size_t>(G));
            for (int g = 0; g < G; ++g) {
                std::vector<float> grp(c.begin() + g * gs, c.begin() + (g + 1) * gs);
                std::sort(grp.rbegin(), grp.rend());
                gscore[g] = v3 ? grp[0] + grp[1] : grp[0];
            }
            auto gsel = best_k(gscore, static_cast<int>(m.moe.topk_groups), {});
            std::vector<bool> allowed(static_cast<size_t>(E), false);
            for (int g : gsel)
                for (int i = 0; i < gs; ++i) allowed[g * gs + i] = true;
            ids = best_k(c, K, allowed);
            float sum = 0;
            for (int j = 0; j < K; ++j) sum += (w[j] = s[ids[j]]);
            for (auto& x : w) {
                if (v3)
                    x = (m.moe.norm_topk_prob ? x / sum : x) * scale;
                else
                    x = m.moe.norm_topk_prob ? x / sum : x * scale;
            }
            break;
        }
    }
}

struct BlockRun {
    std::vector<float> x_before, x_after;
    MoeLayerResult res;
    TensorFile dump;
};

BlockRun run_block(const ModelConfig& m, const StepShape& shape, const RunOptions& opt,
                   const StepRouting* override_routing = nullptr) {
    cpu::CpuBackend be;
    be.prepare(m, {0, 1}, shape, opt);
    be.set_routing_override(override_routing);
    be.begin_step();
    const int64_t T = be.num_tokens(), H = m.hidden_size;
    for (Phase p : {Phase::embed, Phase::attn_norm, Phase::qkv_proj, Phase::attention, Phase::o_proj})
        be.run_phase(p, p == Phase::embed ? -1 : 1);
    BlockRun r;
    r.x_before.assign(be.hidden(), be.hidden() + T * H);
    for (Phase p : {Phase::ffn_norm, Phase::router_gemm, Phase::topk, Phase::permute, Phase::expert_up,
                    Phase::activation, Phase::expert_down, Phase::shared_expert, Phase::unpermute_reduce})
        be.run_phase(p, 1);
    r.x_after.assign(be.hidden(), be.hidden() + T * H);
    r.res = be.moe_result(1);
    r.dump.tensors = be.moe_block_tensors(1);
    return r;
}

std::vector<float> f32(const TensorFile& f, const std::string& name) {
    const NamedTensor* t = f.find(name);
    REQUIRE(t != nullptr);
    return t->as_f32();
}

// Checks the whole block from the dumped tensors only (as an outside reference would).
void check_block(const ModelConfig& m, const BlockRun& r, bool check_routing = true) {
    const int64_t H = m.hidden_size, E = m.moe.num_experts, I = m.moe.expert_intermediate_size;
    const auto moe_in = f32(r.dump, "moe_in");
    const int64_t T = static_cast<int64_t>(moe_in.size()) / H;
    const auto router = f32(r.dump, "router_weight"), wg = f32(r.dump, "w_gate"), wu = f32(r.dump, "w_up"),
               wd = f32(r.dump, "w_down"), moe_out = f32(r.dump, "moe_out"), tw = f32(r.dump, "topk_weights");
    const auto tids = r.dump.find("topk_ids")->as_i32();
    const int64_t k = r.res.routing.k;
    std::vector<float> rb, corr, bg, bu, bd;
    if (r.dump.find("router_bias")) rb = f32(r.dump, "router_bias");
    if (r.dump.find("e_score_correction_bias")) corr = f32(r.dump, "e_score_correction_bias");
    if (r.dump.find("b_gate")) {
        bg = f32(r.dump, "b_gate");
        bu = f32(r.dump, "b_up");
        bd = f32(r.dump, "b_down");
    }
    const bool scale_in = m.moe.routing == RoutingKind::topk_sigmoid;

    // moe_in is the ffn norm of the residual (norm weights ~1 +- 0.1: check the RMS is ~1 per row).
    for (int64_t t = 0; t < T; ++t) {
        double ss = 0;
        for (int64_t i = 0; i < H; ++i) ss += moe_in[t * H + i] * moe_in[t * H + i];
        CHECK(std::sqrt(ss / H) == Approx(1.0).epsilon(0.15));
    }
    double err2 = 0, ref2 = 0;
    for (int64_t t = 0; t < T; ++t) {
        const float* x = moe_in.data() + t * H;
        std::vector<float> logits(static_cast<size_t>(E));
        for (int64_t e = 0; e < E; ++e) {
            double z = rb.empty() ? 0.0 : rb[e];
            for (int64_t i = 0; i < H; ++i) z += static_cast<double>(x[i]) * router[e * H + i];
            logits[e] = static_cast<float>(z);
            CHECK(r.res.router_logits[t * E + e] == Approx(logits[e]).margin(1e-4));
        }
        if (check_routing) {
            std::vector<int> ids;
            std::vector<float> w;
            route_ref(m, logits, corr.empty() ? nullptr : corr.data(), ids, w);
            for (int64_t j = 0; j < k; ++j) {
                CHECK(tids[t * k + j] == ids[j]);
                CHECK(tw[t * k + j] == Approx(w[j]).margin(1e-5));
            }
        }
        // Routed experts + shared experts, naive.
        std::vector<double> out(static_cast<size_t>(H), 0.0);
        for (int64_t j = 0; j < k; ++j) {
            const int e = tids[t * k + j];
            if (e < 0) continue;
            const float s = tw[t * k + j];
            std::vector<float> a(static_cast<size_t>(I));
            for (int64_t n = 0; n < I; ++n) {
                double g = bg.empty() ? 0.0 : bg[e * I + n], u = bu.empty() ? 0.0 : bu[e * I + n];
                for (int64_t i = 0; i < H; ++i) {
                    const double xi = scale_in ? x[i] * s : x[i];
                    g += xi * wg[(e * I + n) * H + i];
                    u += xi * wu[(e * I + n) * H + i];
                }
                a[n] = act_ref(m, static_cast<float>(g), static_cast<float>(u));
            }
            for (int64_t h = 0; h < H; ++h) {
                double y = bd.empty() ? 0.0 : bd[e * H + h];
                for (int64_t n = 0; n < I; ++n) y += static_cast<double>(a[n]) * wd[(e * H + h) * I + n];
                out[h] += (scale_in ? 1.0 : s) * y;
            }
        }
        if (r.dump.find("shared_w_gate")) {
            const auto sg = f32(r.dump, "shared_w_gate"), su = f32(r.dump, "shared_w_up"),
                       sd = f32(r.dump, "shared_w_down");
            const int64_t SI = static_cast<int64_t>(sg.size()) / H;
            double gate = 1.0;
            if (r.dump.find("shared_gate_weight")) {
                const auto gw = f32(r.dump, "shared_gate_weight");
                double z = 0;
                for (int64_t i = 0; i < H; ++i) z += x[i] * gw[i];
                gate = 1.0 / (1.0 + std::exp(-z));
            }
            std::vector<float> a(static_cast<size_t>(SI));
            for (int64_t n = 0; n < SI; ++n) {
                double g = 0, u = 0;
                for (int64_t i = 0; i < H; ++i) {
                    g += x[i] * sg[n * H + i];
                    u += x[i] * su[n * H + i];
                }
                a[n] = act_ref(m, static_cast<float>(g), static_cast<float>(u));
            }
            for (int64_t h = 0; h < H; ++h) {
                double y = 0;
                for (int64_t n = 0; n < SI; ++n) y += a[n] * sd[h * SI + n];
                out[h] += gate * y;
            }
        }
        for (int64_t h = 0; h < H; ++h) {
            const double d = moe_out[t * H + h] - out[h];
            err2 += d * d;
            ref2 += out[h] * out[h];
            // Residual: x_after = x_before + moe_out.
            CHECK(r.x_after[t * H + h] == Approx(r.x_before[t * H + h] + moe_out[t * H + h]).margin(1e-5));
        }
    }
    REQUIRE(ref2 > 0);
    CHECK(std::sqrt(err2 / ref2) < 1e-5);
}

}  // namespace

TEST_CASE("MoE block, Mixtral-style top-k softmax", "[cpu_moe]") {
    auto m = tiny_model(RoutingKind::topk_softmax);
    RunOptions opt;
    opt.seed = 11;
    opt.num_threads = 2;
    check_block(m, run_block(m, decode(7, 5), opt));
}

TEST_CASE("MoE block, Qwen2-MoE style: softmax top-k, gated shared expert", "[cpu_moe]") {
    auto m = tiny_model(RoutingKind::softmax_topk);
    m.moe.num_shared_experts = 1;
    m.moe.shared_intermediate_size = 20;
    m.moe.shared_expert_gate = true;
    m.attn.qkv_bias = true;
    RunOptions opt;
    opt.seed = 3;
    const auto r = run_block(m, decode(9, 4), opt);
    CHECK(r.dump.find("shared_gate_weight") != nullptr);
    check_block(m, r);
}

TEST_CASE("MoE block, DeepSeek-V3 style: sigmoid groups, correction bias, scale, shared experts", "[cpu_moe]") {
    auto m = tiny_model(RoutingKind::sigmoid_group_topk);
    m.moe.num_experts = 16;
    m.moe.top_k = 3;
    m.moe.num_groups = 4;
    m.moe.topk_groups = 2;
    m.moe.norm_topk_prob = true;
    m.moe.routed_scaling_factor = 2.5;
    m.moe.router_correction_bias = true;
    m.moe.num_shared_experts = 2;
    m.moe.shared_intermediate_size = 12;
    RunOptions opt;
    opt.seed = 5;
    const auto r = run_block(m, decode(12, 3), opt);
    CHECK(r.dump.find("e_score_correction_bias") != nullptr);
    CHECK(r.dump.find("shared_w_gate")->shape == std::vector<int64_t>{24, 16});
    check_block(m, r);
}

TEST_CASE("MoE block, DeepSeek-V2 style greedy groups; gpt-oss style biases and clamped SwiGLU", "[cpu_moe]") {
    auto m = tiny_model(RoutingKind::softmax_group_greedy);
    m.moe.num_groups = 4;
    m.moe.topk_groups = 2;
    m.moe.routed_scaling_factor = 16.0;
    RunOptions opt;
    opt.seed = 8;
    check_block(m, run_block(m, decode(6, 2), opt));

    auto g = tiny_model(RoutingKind::topk_softmax);
    g.moe.router_bias = true;
    g.moe.expert_bias = true;
    g.activation = Activation::swiglu_oai;
    g.swiglu_limit = 7.0;
    g.attn.sinks = true;
    g.attn.o_bias = true;
    g.attn.qkv_bias = true;
    const auto r = run_block(g, decode(6, 2), opt);
    CHECK(r.dump.find("router_bias") != nullptr);
    CHECK(r.dump.find("b_down") != nullptr);
    check_block(g, r);
    // Random weights keep gate and up within about +-5, so the clamp at 7 rarely acts; at 0.5 it acts on most
    // elements, and the block must still equal the reference (and differ from the run clamped at 7).
    g.swiglu_limit = 0.5;
    const auto low = run_block(g, decode(6, 2), opt);
    check_block(g, low);
    CHECK(f32(low.dump, "moe_out") != f32(r.dump, "moe_out"));
}

TEST_CASE("MoE block, Llama-4 style: sigmoid top-1 scales the expert input; Grok-style GeGLU", "[cpu_moe]") {
    auto m = tiny_model(RoutingKind::topk_sigmoid);
    m.moe.top_k = 1;
    m.moe.num_shared_experts = 1;
    m.moe.shared_intermediate_size = 12;
    RunOptions opt;
    opt.seed = 21;
    check_block(m, run_block(m, decode(6, 2), opt));

    auto g = tiny_model(RoutingKind::topk_softmax);
    g.activation = Activation::geglu;
    check_block(g, run_block(g, decode(6, 2), opt));
}

TEST_CASE("MoE block, PhiMoE style sparsemixer: the weights are not Mixtral's renormalised pair", "[cpu_moe]") {
    auto m = tiny_model(RoutingKind::sparsemixer);
    m.moe.top_k = 2;
    m.moe.router_jitter_noise = 0.2;  // a wide band, so that several logits fall inside it on these small shapes
    RunOptions opt;
    opt.seed = 17;
    const auto r = run_block(m, decode(16, 2), opt);
    check_block(m, r);
    // Some token's two weights must differ from a pair that sums to 1 (else the test could not tell the two apart).
    const auto& w = r.res.routing.weights;
    bool not_a_pair = false;
    for (size_t t = 0; t + 1 < w.size(); t += 2) not_a_pair |= std::fabs(w[t] + w[t + 1] - 1.0f) > 0.05f;
    CHECK(not_a_pair);
}

TEST_CASE("MoE block with prefill tokens and LayerNorm", "[cpu_moe]") {
    auto m = tiny_model(RoutingKind::softmax_topk);
    m.norm = NormKind::layernorm;
    m.norm_bias = true;
    StepShape s;
    s.mode = Mode::prefill;
    s.batch = 2;
    s.seq_len = 5;
    RunOptions opt;
    opt.seed = 2;
    const auto r = run_block(m, s, opt);
    CHECK(r.res.routing.num_tokens == 10);
    check_block(m, r);
}

TEST_CASE("capacity factor drops in arrival order and the block skips dropped assignments", "[cpu_moe]") {
    auto m = tiny_model(RoutingKind::softmax_topk);
    RunOptions opt;
    opt.seed = 4;
    opt.capacity_factor = 1.0;  // capacity = ceil(1 * 32 * 2 / 8) = 8 per expert
    const auto r = run_block(m, decode(32, 1), opt);
    // Recount from the router logits: family routing, then arrival-order drops.
    std::vector<int64_t> load(8, 0), kept(8, 0);
    int64_t dropped = 0;
    for (int64_t t = 0; t < 32; ++t) {
        std::vector<float> l(r.res.router_logits.begin() + t * 8, r.res.router_logits.begin() + (t + 1) * 8);
        std::vector<int> ids;
        std::vector<float> w;
        route_ref(m, l, nullptr, ids, w);
        for (int j = 0; j < 2; ++j) {
            const int32_t got = r.res.routing.ids[t * 2 + j];
            if (kept[ids[j]] < 8) {
                ++kept[ids[j]];
                CHECK(got == ids[j]);
            } else {
                ++dropped;
                CHECK(got == -1);
            }
        }
    }
    CHECK(r.res.dropped == dropped);
    CHECK(r.res.tokens_per_expert == kept);
    for (auto c : r.res.tokens_per_expert) CHECK(c <= 8);
    check_block(m, r, /*check_routing=*/false);
}

TEST_CASE("soft top-N mixes the N most probable experts", "[cpu_moe]") {
    auto m = tiny_model(RoutingKind::topk_softmax);
    RunOptions opt;
    opt.seed = 6;
    opt.soft_topn = 4;
    const auto r = run_block(m, decode(5, 2), opt);
    REQUIRE(r.res.routing.k == 4);
    for (int64_t t = 0; t < 5; ++t) {
        std::vector<float> l(r.res.router_logits.begin() + t * 8, r.res.router_logits.begin() + (t + 1) * 8);
        const auto p = softmax(l);
        const auto ids = best_k(p, 4, {});
        float s = 0;
        for (int id : ids) s += p[id];
        for (int j = 0; j < 4; ++j) {
            CHECK(r.res.routing.ids[t * 4 + j] == ids[j]);
            CHECK(r.res.routing.weights[t * 4 + j] == Approx(p[ids[j]] / s).margin(1e-5));
        }
    }
    check_block(m, r, false);
}

TEST_CASE("a routing override replaces the selection; router logits are still computed", "[cpu_moe]") {
    auto m = tiny_model(RoutingKind::topk_softmax);
    StepRouting sr;
    sr.per_layer.resize(2);
    for (auto& lr : sr.per_layer) {
        lr.num_tokens = 4;
        lr.k = 2;
        lr.ids = {7, 6, 0, 1, 3, 3, 5, 2};
        lr.weights = {0.9f, 0.1f, 0.5f, 0.5f, 0.3f, 0.7f, 1.0f, 0.0f};
    }
    RunOptions opt;
    opt.seed = 9;
    const auto r = run_block(m, decode(4, 2), opt, &sr);
    CHECK(r.res.routing.ids == sr.per_layer[1].ids);
    CHECK(r.res.routing.weights == sr.per_layer[1].weights);
    CHECK(r.res.tokens_per_expert == std::vector<int64_t>{1, 1, 1, 2, 0, 1, 1, 1});
    CHECK(r.res.router_logits.size() == 32);
    CHECK(std::any_of(r.res.router_logits.begin(), r.res.router_logits.end(), [](float v) { return v != 0.0f; }));
    CHECK(r.res.expert_gemm_us.size() == 8);
    CHECK(r.res.expert_gemm_us[4] == 0.0);  // idle expert: no GEMM
    CHECK(r.res.expert_gemm_us[3] > 0.0);
    check_block(m, r, false);
}

TEST_CASE("identical seeds give identical blocks; different seeds differ", "[cpu_moe]") {
    auto m = tiny_model(RoutingKind::softmax_topk);
    RunOptions a;
    a.seed = 77;
    RunOptions b = a;
    b.num_threads = 1;
    const auto r1 = run_block(m, decode(5, 3), a), r2 = run_block(m, decode(5, 3), b);
    CHECK(f32(r1.dump, "moe_out") == f32(r2.dump, "moe_out"));
    CHECK(r1.res.routing.ids == r2.res.routing.ids);
    RunOptions c = a;
    c.seed = 78;
    CHECK(f32(run_block(m, decode(5, 3), c).dump, "moe_out") != f32(r1.dump, "moe_out"));
}

TEST_CASE("expert GEMM kernels: panel and blas layouts give the same block and dump the same weights", "[cpu_moe]") {
    auto m = tiny_model(RoutingKind::topk_softmax);
    RunOptions p;
    p.seed = 21;
    p.num_threads = 2;
    p.expert_gemm = "panel";
    RunOptions b = p;
    b.expert_gemm = "blas";
    // 40 tokens x top-2 over 8 experts: ~10 rows per expert, both kernels' small-row paths.
    const auto rp = run_block(m, decode(40, 3), p), rb = run_block(m, decode(40, 3), b);
    check_block(m, rp);
    check_block(m, rb);
    CHECK(rp.res.routing.ids == rb.res.routing.ids);
    for (const char* name : {"w_gate", "w_up", "w_down", "moe_in"}) {
        INFO(name);
        CHECK(f32(rp.dump, name) == f32(rb.dump, name));  // the panel layout is unpacked for the dump
    }
    const auto op = f32(rp.dump, "moe_out"), ob = f32(rb.dump, "moe_out");
    double d2 = 0, r2 = 0;
    for (size_t i = 0; i < op.size(); ++i) {
        d2 += (op[i] - ob[i]) * (op[i] - ob[i]);
        r2 += ob[i] * ob[i];
    }
    CHECK(std::sqrt(d2 / r2) < 1e-5);

    cpu::CpuBackend be;
    be.prepare(m, {0, 1}, decode(40, 3), p);
    CHECK(be.describe().at("expert_gemm") == "panel");
    RunOptions a = p;
    a.expert_gemm = "auto";
    be.prepare(m, {0, 1}, prefill(4, 256), a);  // 1024 tokens x 2 / 8 experts = 256 rows each: OpenBLAS
    CHECK(be.describe().at("expert_gemm") == "blas");
    RunOptions bad = p;
    bad.expert_gemm = "grouped";
    CHECK_THROWS_AS(be.prepare(m, {0, 1}, decode(4, 3), bad), ConfigError);
}
