// SPDX-License-Identifier: Apache-2.0
// The whole CUDA backend on tiny models: a full step through the engine's plan, then the MoE block recomputed on the
// host from the dumped tensors (moe_in, weights, router logits) and compared with moe_out and the chosen experts.
#include "../cpu/test_models.hpp"
#include "backends/cuda/cuda_backend.hpp"
#include "core/moe_core.cuh"
#include "engine/engine.hpp"
#include "gpu_test_util.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <random>
#include <set>

using namespace moebench;
using namespace moebench::test;

namespace {

ModelConfig tiny_model(bool deepseek_like, bool grok_like = false) {
    ModelConfig m;
    m.name = deepseek_like ? "tiny-dsv3" : "tiny-mixtral";
    m.family = deepseek_like ? "deepseek_v3" : "mixtral";
    m.vocab_size = 96;
    m.hidden_size = 64;
    m.num_layers = 2;
    m.max_position_embeddings = 4096;
    m.norm_eps = 1e-6;
    if (deepseek_like) {
        m.attn = tiny_mla_attention({.num_heads = 4,
                                     .q_lora_rank = 32,
                                     .kv_lora_rank = 48,
                                     .qk_nope_head_dim = 16,
                                     .qk_rope_head_dim = 8,
                                     .v_head_dim = 16});
        m.moe.num_experts = 16;
        m.moe.top_k = 4;
        m.moe.expert_intermediate_size = 32;
        m.moe.num_shared_experts = 1;
        m.moe.shared_intermediate_size = 32;
        m.moe.routing = RoutingKind::sigmoid_group_topk;
        m.moe.router_correction_bias = true;
        m.moe.norm_topk_prob = true;
        m.moe.routed_scaling_factor = 2.5;
        m.moe.num_groups = 4;
        m.moe.topk_groups = 2;
        m.dense_intermediate_size = 48;
        m.layer_is_moe = {0, 1};
    } else {
        m.attn.kind = AttentionKind::gqa;
        m.attn.num_heads = 4;
        m.attn.num_kv_heads = 2;
        m.attn.head_dim = 16;
        m.moe.num_experts = 8;
        m.moe.top_k = 2;
        m.moe.expert_intermediate_size = 40;
        m.moe.routing = RoutingKind::topk_softmax;
        m.layer_is_moe = {1, 1};
        if (grok_like) {
            // Grok-1-like extras the forward path must run: post norms, LayerNorm with bias, GeGLU; plus a local
            // (chunked) attention layer and gpt-oss style sinks, biases and the clamped activation in variants.
            m.name = "tiny-grok";
            m.norms_per_layer = 4;
            m.norm = NormKind::layernorm;
            m.norm_bias = true;
            m.activation = Activation::geglu;
            m.attn.attention_chunk = 4;
            m.attn.sinks = true;
            m.attn.o_bias = true;
            m.attn.qkv_bias = true;
            m.layer_sliding = {1, 0};
        }
    }
    return m;
}

const NamedTensor& find(const std::vector<NamedTensor>& ts, const std::string& name) {
    for (const auto& t : ts)
        if (t.name == name) return t;
    FAIL("tensor " << name << " missing from moe_block_tensors");
    return ts.front();
}

// The tensors capability of a cuda backend (it offers it: traits list Capability::tensors).
const TensorAccess& tensors(const Backend& b) {
    const TensorAccess* t = b.capability<TensorAccess>();
    REQUIRE(t != nullptr);
    return *t;
}

// y[n] = x[k] . W[n, k]^T in double.
std::vector<double> linear(const float* x, const std::vector<float>& w, int64_t n, int64_t k, int64_t w_off = 0) {
    std::vector<double> y(n);
    for (int64_t i = 0; i < n; ++i) {
        double s = 0;
        for (int64_t c = 0; c < k; ++c) s += double(x[c]) * w[w_off + i * k + c];
        y[i] = s;
    }
    return y;
}

void run_and_check(bool deepseek_like, Mode mode, const std::string& expert_gemm, bool grok_like = false,
                   bool cuda_graph = false) {
    const ModelConfig m = tiny_model(deepseek_like, grok_like);
    StepShape shape;
    shape.mode = mode;
    shape.batch = mode == Mode::decode ? 12 : 2;
    shape.seq_len = mode == Mode::decode ? 1 : 9;
    shape.context = mode == Mode::decode ? 300 : 0;
    RunOptions opt;
    opt.seed = 7;
    opt.expert_gemm = expert_gemm;
    opt.cuda_graph = cuda_graph;
    const std::vector<int64_t> layers = {0, 1};
    auto backend = make_cuda_backend();
    backend->prepare(m, layers, shape, opt);
    const auto plan = step_plan(m, layers, 1, true);
    // With a CUDA graph: step 0 eager, step 1 captured (and replayed), steps 2-3 replays.
    std::vector<float> first_out;
    for (int step = 0; step < (cuda_graph ? 4 : 2); ++step) {
        const StepTimes st = run_step(*backend, plan);
        REQUIRE(st.phase_us.size() == plan.size());
        for (double us : st.phase_us) REQUIRE(us >= 0.0);
        const auto t = tensors(*backend).moe_block_tensors(1);
        const auto cur = find(t, "moe_out").as_f32();
        for (float v : cur) REQUIRE(std::isfinite(v));
        // Steps are identical: every step (eager, captured, replayed) produces the same MoE output.
        if (step == 0)
            first_out = cur;
        else
            CHECK(rel_l2(cur, first_out) < 1e-6);
    }
    const int64_t moe_slot = 1;
    const MoeLayerResult res = backend->moe_result(moe_slot);
    const auto ts = tensors(*backend).moe_block_tensors(moe_slot);
    const int64_t T = shape.num_tokens(), H = m.hidden_size, E = m.moe.num_experts, K = m.moe.top_k;
    const int64_t I = m.moe.expert_intermediate_size;
    const auto x = find(ts, "moe_in").as_f32();
    const auto router = find(ts, "router_weight").as_f32();
    const auto wg = find(ts, "w_gate").as_f32();
    const auto wu = find(ts, "w_up").as_f32();
    const auto wd = find(ts, "w_down").as_f32();
    const auto out = find(ts, "moe_out").as_f32();
    const auto ids = find(ts, "topk_ids").as_i32();
    REQUIRE(res.router_logits.size() == size_t(T * E));
    REQUIRE(res.tokens_per_expert.size() == size_t(E));
    int64_t routed = 0;
    for (auto c : res.tokens_per_expert) routed += c;
    CHECK(routed == T * K);

    const int act = static_cast<int>(m.activation);
    std::vector<float> corr;
    if (m.moe.router_correction_bias) corr = find(ts, "e_score_correction_bias").as_f32();
    core::RouteParams rp;
    rp.kind = static_cast<int>(m.moe.routing);
    rp.num_experts = int(E);
    rp.top_k = int(K);
    rp.norm_topk_prob = m.moe.norm_topk_prob;
    rp.routed_scaling_factor = float(m.moe.routed_scaling_factor);
    rp.num_groups = int(m.moe.num_groups);
    rp.topk_groups = int(m.moe.topk_groups);
    std::vector<float> scratch(core::route_scratch_floats(int(E), rp.num_groups));
    std::vector<float> ref(T * H);
    for (int64_t t = 0; t < T; ++t) {
        // The router's logits: the GPU's (fp32 from bf16 inputs) must agree with a host dot product.
        const auto lg = linear(&x[t * H], router, E, H);
        for (int64_t e = 0; e < E; ++e) CHECK(res.router_logits[t * E + e] == Approx(lg[e]).margin(1e-3));
        // Routing from the GPU's logits with moe_core on the host: exact ids.
        std::vector<int> rid(K);
        std::vector<float> rw(K);
        core::route_row(rp, &res.router_logits[t * E], corr.empty() ? nullptr : corr.data(), scratch.data(), rid.data(),
                        rw.data());
        for (int64_t j = 0; j < K; ++j) REQUIRE(ids[t * K + j] == rid[j]);
        std::vector<double> acc(H, 0.0);
        for (int64_t j = 0; j < K; ++j) {
            const int64_t e = rid[j];
            const auto g = linear(&x[t * H], wg, I, H, e * I * H);
            const auto u = linear(&x[t * H], wu, I, H, e * I * H);
            std::vector<float> a(I);
            for (int64_t i = 0; i < I; ++i)
                a[i] = round_bf(core::activate(act, round_bf(float(g[i])), round_bf(float(u[i])), 7.0f));
            const auto y = linear(a.data(), wd, H, I, e * H * I);
            for (int64_t c = 0; c < H; ++c) acc[c] += rw[j] * double(round_bf(float(y[c])));
        }
        if (m.moe.num_shared_experts > 0) {
            const int64_t SI = m.moe.num_shared_experts * m.moe.shared_intermediate_size;
            const auto sg = find(ts, "shared_w_gate").as_f32();
            const auto su = find(ts, "shared_w_up").as_f32();
            const auto sd = find(ts, "shared_w_down").as_f32();
            const auto g = linear(&x[t * H], sg, SI, H);
            const auto u = linear(&x[t * H], su, SI, H);
            std::vector<float> a(SI);
            for (int64_t i = 0; i < SI; ++i)
                a[i] = round_bf(core::activate(act, round_bf(float(g[i])), round_bf(float(u[i])), 7.0f));
            const auto y = linear(a.data(), sd, H, SI);
            for (int64_t c = 0; c < H; ++c) acc[c] += double(round_bf(float(y[c])));
        }
        for (int64_t c = 0; c < H; ++c) ref[t * H + c] = float(acc[c]);
    }
    INFO("model " << m.name << " mode " << to_string(mode) << " expert_gemm " << expert_gemm << " graph "
                  << cuda_graph);
    CHECK(rel_l2(out, ref) < 2e-2);
    const json d = backend->describe();
    CHECK(d["kernel_variant"]["expert_gemm"].get<std::string>().rfind(expert_gemm, 0) == 0);
}

}  // namespace

TEST_CASE("cuda backend step: Mixtral-like (GQA, top-k then softmax) MoE block equals the host recomputation",
          "[gpu][backend][sanitize]") {
    run_and_check(false, Mode::decode, "loop");
    run_and_check(false, Mode::decode, "grouped");
    run_and_check(false, Mode::decode, "gemv");
    run_and_check(false, Mode::prefill, "loop");
    run_and_check(false, Mode::prefill, "gemv");  // 18 tokens x 2 over 8 experts: several passes of 8 rows
    run_and_check(false, Mode::decode, "tiled");
    run_and_check(false, Mode::prefill, "tiled");
}

TEST_CASE("cuda backend step: DeepSeek-V3-like (MLA, sigmoid group top-k, shared expert, dense first layer)",
          "[gpu][backend][sanitize]") {
    run_and_check(true, Mode::decode, "grouped");
    run_and_check(true, Mode::decode, "gemv");
    run_and_check(true, Mode::prefill, "loop");
    run_and_check(true, Mode::prefill, "tiled");
}

TEST_CASE("cuda backend step: Grok-like extras (post norms, LayerNorm bias, GeGLU, chunked local attention, sinks)",
          "[gpu][backend][sanitize]") {
    run_and_check(false, Mode::decode, "loop", true);
    run_and_check(false, Mode::decode, "gemv", true);
    run_and_check(false, Mode::prefill, "grouped", true);
}

TEST_CASE("cuda backend step under a CUDA graph: captured and replayed steps equal the eager one",
          "[gpu][backend][graph][sanitize]") {
    run_and_check(false, Mode::decode, "loop", false, true);
    run_and_check(true, Mode::decode, "grouped", false, true);
    run_and_check(true, Mode::decode, "gemv", false, true);
    run_and_check(false, Mode::prefill, "tiled", false, true);
}

TEST_CASE("cuda graph with the own expert kernels replays a routing that changes every step; timing is consistent",
          "[gpu][backend][graph]") {
    for (const char* variant : {"gemv", "tiled"}) {
        INFO(variant);
        // The gemv path keeps the expert list and offsets on the device, so a captured step must follow any routing:
        // each step imposes a different one, and the replayed graph's output must equal an eager backend's.
        const ModelConfig m = tiny_model(false);
        StepShape shape;
        shape.mode = Mode::decode;
        shape.batch = 80;  // even steps send every token to expert 0: 80 rows, two 64-row tiles of the tiled kernel
        shape.context = 300;
        const int64_t T = shape.num_tokens(), K = m.moe.top_k, E = m.moe.num_experts;
        RunOptions opt;
        opt.seed = 11;
        opt.expert_gemm = variant;
        opt.cuda_graph = true;
        RunOptions eager_opt = opt;
        eager_opt.cuda_graph = false;
        const std::vector<int64_t> layers = {0, 1};
        auto graphed = make_cuda_backend();
        auto eager = make_cuda_backend();
        graphed->prepare(m, layers, shape, opt);
        eager->prepare(m, layers, shape, eager_opt);
        const auto plan = step_plan(m, layers, 1, true);
        std::mt19937 g(5);
        for (int step = 0; step < 6; ++step) {
            StepRouting r;
            for (size_t s = 0; s < layers.size(); ++s) {
                LayerRouting lr;
                lr.num_tokens = T;
                lr.k = K;
                for (int64_t t = 0; t < T; ++t) {
                    // Different at every step: all tokens to expert 0 first (even steps) or spread (odd), then another.
                    const int32_t a = step % 2 == 0 ? 0 : int32_t((t * (step + 1) + step) % E);
                    int32_t b = int32_t(g() % E);
                    if (b == a) b = (a + 1) % E;
                    lr.ids.push_back(a);
                    lr.ids.push_back(b);
                    lr.weights.push_back(0.7f);
                    lr.weights.push_back(0.3f);
                }
                r.per_layer.push_back(lr);
            }
            graphed->set_routing_override(&r);
            eager->set_routing_override(&r);
            run_step(*graphed, plan);
            run_step(*eager, plan);
            INFO("step " << step);
            const MoeLayerResult res = graphed->moe_result(1);
            CHECK(std::vector<int32_t>(res.routing.ids.begin(), res.routing.ids.end()) == r.per_layer[1].ids);
            const auto got = find(tensors(*graphed).moe_block_tensors(1), "moe_out").as_f32();
            const auto want = find(tensors(*eager).moe_block_tensors(1), "moe_out").as_f32();
            CHECK(rel_l2(got, want) < 1e-6);  // the same kernels on the same data
            // --check's form: only the routed experts' weights come back, listed in routed_experts.
            const auto ct = tensors(*graphed).moe_check_tensors(1);
            const auto routed = find(ct, "routed_experts").as_i32();
            std::set<int32_t> used(r.per_layer[1].ids.begin(), r.per_layer[1].ids.end());
            CHECK(std::vector<int32_t>(used.begin(), used.end()) == routed);
            CHECK(find(ct, "w_gate").shape[0] == static_cast<int64_t>(routed.size()));
        }
        const json d = graphed->describe();
        const json gj = d["cuda_graph"];
        CHECK(gj["replays"].get<int64_t>() >= 4);
        // Phase events inside the replayed graph cannot add up to more than the replay measured around it.
        CHECK(gj["phase_sum_us_mean"].get<double>() <= 1.05 * gj["replay_us_mean"].get<double>() + 20.0);
        CHECK(gj["phase_event_overhead"]["runs"].get<int64_t>() >= 1);
        CHECK(d["expert_gemm_sync"].get<std::string>().rfind("none", 0) == 0);
    }
}

TEST_CASE("MLA: the expanded form (flash kernel) equals the absorbed form (split-context and latent kernels)",
          "[gpu][backend][attention]") {
    // Two different algebras of the same attention: absorbed (q_nope W_UK against the latent cache, W_UV after) and
    // expanded (the latents through kv_b into per-head k and v, then multi-head attention). Dims multiples of 16 so
    // the flash kernel takes the expanded form.
    ModelConfig m = tiny_model(true);
    m.attn = tiny_mla_attention({.num_heads = 4,
                                 .q_lora_rank = 32,
                                 .kv_lora_rank = 48,
                                 .qk_nope_head_dim = 16,
                                 .qk_rope_head_dim = 16,
                                 .v_head_dim = 32});
    const std::vector<int64_t> layers = {0, 1};
    const auto plan = step_plan(m, layers, 1, true);
    for (Mode mode : {Mode::prefill, Mode::decode}) {
        StepShape shape;
        shape.mode = mode;
        shape.batch = mode == Mode::prefill ? 2 : 5;
        shape.seq_len = mode == Mode::prefill ? 40 : 1;
        shape.context = mode == Mode::prefill ? 0 : 70;
        std::map<std::string, std::vector<float>> moe_in;
        for (const char* kernel : {"split", "latent", "auto", "flash"}) {
            RunOptions opt;
            opt.seed = 7;
            opt.attention_kernel = kernel;
            auto b = make_cuda_backend();
            const PreparedStep step = b->prepare(m, layers, shape, opt);
            run_step(*b, plan);
            moe_in[kernel] = find(tensors(*b).moe_block_tensors(1), "moe_in").as_f32();
            // auto: expanded for prefill (16+ tokens per sequence), absorbed for decode.
            const bool expanded =
                std::string(kernel) == "flash" || (std::string(kernel) == "auto" && mode == Mode::prefill);
            INFO("mode " << to_string(mode) << " kernel " << kernel);
            // The prepared step says the form it runs (counted work); the traits stay as they were.
            CHECK((step.mla_form == MlaForm::latent_expand) == expanded);
            CHECK(step.kernel("mla") == (expanded ? "expanded" : "absorbed"));
            CHECK(b->traits().capabilities == cuda_backend_traits().capabilities);
            const json d = b->describe();
            CHECK(d["kernel_variant"]["mla"].get<std::string>().rfind(expanded ? "expanded" : "weight-absorbed", 0) ==
                  0);
            // auto in decode: split (4 heads are fewer than the latent kernel's 16).
            const char* ran = expanded ? "flash" : std::string(kernel) == "latent" ? "latent" : "split";
            CHECK(d["kernel_variant"]["attention"].get<std::string>().rfind(ran, 0) == 0);
        }
        INFO("mode " << to_string(mode));
        // Attention feeds ~a third of the MoE input here: a wrong head, stride or rope copy moves it by far more.
        CHECK(rel_l2(moe_in["flash"], moe_in["split"]) < 2e-2);
        CHECK(rel_l2(moe_in["latent"], moe_in["split"]) < 2e-2);  // the same absorbed form, tensor cores
        CHECK(rel_l2(moe_in["auto"], moe_in[mode == Mode::prefill ? "flash" : "split"]) < 1e-6);
    }
}

TEST_CASE("cuda backend refuses expert parallelism and unknown expert GEMM variants before allocating",
          "[gpu][backend]") {
    const ModelConfig m = tiny_model(false);
    StepShape shape;
    RunOptions opt;
    opt.layout = ep_layout(2);
    auto b = make_cuda_backend();
    CHECK_THROWS_AS(b->prepare(m, {0}, shape, opt), UnsupportedError);
    opt.layout = ep_layout(1);
    opt.expert_gemm = "fastest";
    CHECK_THROWS_AS(b->prepare(m, {0}, shape, opt), ConfigError);
    opt.expert_gemm = "gemv";
    opt.expert_times = true;  // per-expert times need the per-expert loop
    CHECK_THROWS_AS(b->prepare(m, {0}, shape, opt), ConfigError);
    opt.expert_times = false;
    opt.expert_gemm = "auto";
    opt.attention_kernel = "flash";  // head_dim 16 fits the flash kernel; an MLA with qk dim 24 does not
    CHECK_NOTHROW(b->prepare(m, {0}, shape, opt));
    CHECK_THROWS_AS(make_cuda_backend()->prepare(tiny_model(true), {0}, shape, opt), ConfigError);
    opt.attention_kernel = "latent";  // MLA's latent cache only: a GQA model is refused
    CHECK_THROWS_AS(make_cuda_backend()->prepare(m, {0}, shape, opt), ConfigError);
    opt.attention_kernel = "fastest";
    CHECK_THROWS_AS(make_cuda_backend()->prepare(m, {0}, shape, opt), ConfigError);
}
