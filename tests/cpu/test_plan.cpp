// SPDX-License-Identifier: Apache-2.0
// Memory plan, decode floor and `moebench plan` output: hand-computed toy cases (arithmetic written out), the
// unique-experts formula against exact enumeration and Monte Carlo, the EP refusal, and the stable JSON keys.
#include "cli_helpers.hpp"
#include "common/error.hpp"
#include "config/precision_request.hpp"
#include "error_helpers.hpp"
#include "model/accounting.hpp"
#include "model/decode_floor.hpp"
#include "model/memory_plan.hpp"
#include "report/formats.hpp"
#include "test_models.hpp"
#include "test_paths.hpp"

#include <catch2/catch.hpp>

#include <functional>
#include <random>
#include <set>

using namespace moebench;

namespace {

// 2 layers, hidden 64, GQA 4 heads / 2 KV heads of 16, 4 experts top-2 of width 32, vocab 1000, untied, no biases.
ModelConfig toy_gqa() {
    ModelConfig m = test::tiny_gqa_moe("toy-gqa", {.vocab_size = 1000,
                                                   .hidden_size = 64,
                                                   .num_layers = 2,
                                                   .num_heads = 4,
                                                   .num_kv_heads = 2,
                                                   .head_dim = 16,
                                                   .num_experts = 4,
                                                   .top_k = 2,
                                                   .expert_intermediate_size = 32});
    m.family = "toy";
    m.max_position_embeddings = 4096;
    m.moe.routing = RoutingKind::topk_softmax;
    return m;
}

// Same, with MLA attention: latent 32, rope 8, nope 16, v 16, q projected directly.
ModelConfig toy_mla() {
    ModelConfig m = toy_gqa();
    m.name = "toy-mla";
    m.attn = test::tiny_mla_attention({.num_heads = 4,
                                       .q_lora_rank = 0,
                                       .kv_lora_rank = 32,
                                       .qk_nope_head_dim = 16,
                                       .qk_rope_head_dim = 8,
                                       .v_head_dim = 16});
    return m;
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

HardwareProfile toy_hw(double memory_bytes) {
    HardwareProfile h;
    h.name = "toy-gpu";
    h.memory_bytes = memory_bytes;
    h.memory_bw_bytes_per_s = 1e9;
    h.bf16_flops = 1e12;
    h.fp8_flops = 2e12;
    h.fp32_flops = 1e11;
    return h;
}

// The layout --ep ep --tp tp asks for.
Layout ep_tp(int64_t ep, int64_t tp) {
    LayoutRequest r;
    r.ep = ep;
    r.tp = tp;
    return resolve_layout(r);
}

PlanInput toy_input(int64_t ep, int64_t tp) {
    PlanInput in;
    in.layout = ep_tp(ep, tp);
    in.batch = 3;
    in.context = 100;
    return in;
}

}  // namespace

TEST_CASE("toy parameter components are what the memory plan builds on", "[plan]") {
    ParamCounts pc = count_params(toy_gqa());
    auto c = [&](Component k) { return pc.by_component[int(k)]; };
    CHECK(c(Component::embedding) == 1000 * 64);                              // 64000
    CHECK(c(Component::lm_head) == 1000 * 64);                                // 64000
    CHECK(c(Component::attention) == 2 * (64 * 64 + 2 * 64 * 32 + 64 * 64));  // q, k, v, o = 12288 per layer
    CHECK(c(Component::norms) == 2 * 2 * 64 + 64);                            // 2 per layer + final = 320
    CHECK(c(Component::router) == 2 * 64 * 4);                                // 512
    CHECK(c(Component::routed_experts) == 2 * 4 * 3 * 64 * 32);               // 49152
    CHECK(pc.total == 202560);
}

TEST_CASE("memory plan: toy GQA weights by dtype and sharding", "[plan]") {
    ModelConfig m = toy_gqa();
    HardwareProfile hw = toy_hw(4 * kGiB);

    // bf16, 1 GPU: everything at 2 bytes: 202560 * 2.
    CHECK(plan_memory(m, hw, toy_input(1, 1)).weights_bytes == Approx(405120));

    // fp8, 1 GPU: linear layers 1 byte (attention 24576 + experts 49152), embedding/head/norms/router stay bf16:
    // 2 * (64000 + 64000 + 320 + 512) = 257664; + 73728 = 331392.
    PlanInput fp8 = toy_input(1, 1);
    fp8.precision = uniform_precision(DType::fp8);
    CHECK(plan_memory(m, hw, fp8).weights_bytes == Approx(331392));

    // int4: 0.5 byte + one bf16 scale per 128 weights = 0.515625 B/weight: (24576 + 49152) * 0.515625 = 38016; +
    // 257664.
    PlanInput int4 = toy_input(1, 1);
    int4.precision.dense_weights = int4.precision.expert_weights = DType::int4;
    CHECK(plan_memory(m, hw, int4).weights_bytes == Approx(295680));

    // Block-scaled formats, their scales counted (attention 24576 + experts 49152 = 73728 linear weights; the rest
    // 257664 B in bf16): fp8-block 1 + 4/(128*128) B -> 73728 + 18 = 73746; nvfp4 0.5 + 1/16 = 0.5625 B -> 41472;
    // mxfp4 0.5 + 1/32 = 0.53125 B -> 39168.
    for (const auto& [d, linear_bytes] :
         {std::pair{DType::fp8_block, 73746.0}, std::pair{DType::nvfp4, 41472.0}, std::pair{DType::mxfp4, 39168.0}}) {
        INFO(to_string(d));
        PlanInput q = toy_input(1, 1);
        q.precision.dense_weights = q.precision.expert_weights = d;
        CHECK(plan_memory(m, hw, q).weights_bytes == Approx(257664 + linear_bytes));
    }
    // nvfp4 experts beside fp8 dense weights (DeepSeek-R1's FP4 checkpoints): 24576 * 1 + 49152 * 0.5625 = 52224.
    PlanInput mixed = fp8;
    mixed.precision.expert_weights = DType::nvfp4;
    CHECK(plan_memory(m, hw, mixed).weights_bytes == Approx(257664 + 52224));

    // fp32: everything 4 bytes.
    PlanInput fp32 = toy_input(1, 1);
    fp32.precision = uniform_precision(DType::fp32);
    CHECK(plan_memory(m, hw, fp32).weights_bytes == Approx(810240));

    // bf16, EP 2 (2 GPUs, tp 1): experts halved, the rest replicated: 2*(64000+64000+24576+320+512) + 2*49152/2 =
    // 355968.
    MemoryPlan ep2 = plan_memory(m, hw, toy_input(2, 1));
    CHECK(ep2.weights_bytes == Approx(355968));
    CHECK(ep2.weights_by_component_bytes[int(Component::routed_experts)] == Approx(49152));

    // bf16, TP 2 (2 GPUs): embedding, head, attention halved; experts over both GPUs; norms and router replicated:
    // (128000 + 128000 + 49152)/2 + 98304/2 + 640 + 1024 = 152576 + 49152 + 1664 = 203392.
    CHECK(plan_memory(m, hw, toy_input(1, 2)).weights_bytes == Approx(203392));
}

TEST_CASE("memory plan: toy KV cache, activations, headroom and max sequences", "[plan]") {
    ModelConfig m = toy_gqa();
    HardwareProfile hw = toy_hw(2 * kGiB);

    // KV per token: 2 layers * (K + V) * 2 KV heads * 16 * 2 bytes = 256 B. Batch 3 x context 100 on one GPU: 76800 B.
    MemoryPlan p = plan_memory(m, hw, toy_input(1, 1));
    CHECK(p.kv_bytes_per_token == Approx(256));
    CHECK(p.kv_bytes_per_token_per_gpu == Approx(256));
    CHECK(p.kv_cache_bytes == Approx(76800));
    // Activation: T = max(3 rows, min(100, 2048)) = 100 tokens; per token 4H + (q 64 + kv 64 + o 64) +
    // top2 * (H + 3 * 32) = 256 + 192 + 320 = 768 elements * 2 B + fp32 router logits 4 * 4 = 1552 B;
    // 100 * 1552 = 155200, + fp32 LM-head logits 3 rows * 1000 * 4 = 12000 -> 167200, + 1 GiB workspace.
    CHECK(p.activation_tokens == 100);
    CHECK(p.activation_only_bytes == Approx(167200));
    CHECK(p.activation_bytes == Approx(167200 + kWorkspaceBytes));
    // Free = 2 GiB - 405120 - 76800 - (167200 + 1 GiB).
    CHECK(p.free_bytes == Approx(2 * kGiB - 405120 - 76800 - 167200 - kWorkspaceBytes));
    CHECK(p.fits);
    // Max sequences: floor((2 GiB - 405120 - 1 GiB - 167200) / (100 * 256)).
    CHECK(p.max_concurrent_sequences == int64_t((2 * kGiB - 405120 - kWorkspaceBytes - 167200) / 25600));

    // TP 2 splits the 2 KV heads: 128 B/token per GPU; batch stays 3 sequences per GPU (dp = 1).
    MemoryPlan tp2 = plan_memory(m, hw, toy_input(1, 2));
    CHECK(tp2.kv_bytes_per_token_per_gpu == Approx(128));
    CHECK(tp2.kv_cache_bytes == Approx(3 * 100 * 128));
    // TP 4 > 2 KV heads: each GPU keeps one head (replication), still 128 B/token.
    CHECK(plan_memory(m, hw, toy_input(1, 4)).kv_bytes_per_token_per_gpu == Approx(128));
    // EP 2, TP 1: two attention replicas, ceil(3 / 2) = 2 sequences per GPU: 2 * 100 * 256.
    MemoryPlan ep2 = plan_memory(m, hw, toy_input(2, 1));
    CHECK(ep2.sequences_per_gpu == 2);
    CHECK(ep2.kv_cache_bytes == Approx(51200));

    // fp8 KV halves it.
    PlanInput fp8kv = toy_input(1, 1);
    fp8kv.precision.kv_cache = DType::fp8;
    CHECK(plan_memory(m, hw, fp8kv).kv_cache_bytes == Approx(38400));
}

TEST_CASE("memory plan: toy MLA stores latent + rope key, replicated over TP", "[plan]") {
    ModelConfig m = toy_mla();
    HardwareProfile hw = toy_hw(2 * kGiB);
    // Per token per layer: kv_lora_rank 32 + rope 8 = 40 elements; 2 layers * 40 * 2 B = 160 B.
    MemoryPlan p = plan_memory(m, hw, toy_input(1, 1));
    CHECK(p.kv_bytes_per_token == Approx(160));
    CHECK(p.kv_cache_bytes == Approx(3 * 100 * 160));
    // TP 2 does not split the latent.
    CHECK(plan_memory(m, hw, toy_input(1, 2)).kv_bytes_per_token_per_gpu == Approx(160));
}

TEST_CASE("unique experts formula matches exact enumeration", "[plan]") {
    // Enumerate every way B tokens can each pick a k-subset of E experts; average the number of distinct experts.
    auto exact = [](int E, int k, int B) {
        std::vector<std::vector<int>> subsets;
        for (int mask = 0; mask < (1 << E); ++mask)
            if (__builtin_popcount(mask) == k) subsets.push_back({mask});
        double sum = 0, count = 0;
        std::function<void(int, int)> rec = [&](int token, int used) {
            if (token == B) {
                sum += __builtin_popcount(used);
                count += 1;
                return;
            }
            for (const auto& s : subsets) rec(token + 1, used | s[0]);
        };
        rec(0, 0);
        return sum / count;
    };
    for (auto [E, k, B] :
         std::vector<std::tuple<int, int, int>>{{4, 2, 3}, {6, 3, 2}, {8, 2, 4}, {5, 1, 5}, {4, 4, 2}}) {
        INFO("E=" << E << " k=" << k << " B=" << B);
        CHECK(expected_unique_experts(E, k, B) == Approx(exact(E, k, B)).epsilon(1e-12));
    }
    // Hand value: E=4, k=2, B=3: 4 * (1 - (1/2)^3) = 3.5.
    CHECK(expected_unique_experts(4, 2, 3) == Approx(3.5));
    CHECK(expected_unique_experts(8, 2, 1) == Approx(2.0));  // one token touches exactly k
}

TEST_CASE("unique experts formula matches Monte Carlo at DeepSeek-V3 scale", "[plan]") {
    const int E = 256, k = 8, B = 32, trials = 4000;
    std::mt19937 rng(1234);
    std::vector<int> ids(E);
    double sum = 0;
    for (int t = 0; t < trials; ++t) {
        std::set<int> used;
        for (int b = 0; b < B; ++b) {
            for (int i = 0; i < E; ++i) ids[i] = i;
            for (int i = 0; i < k; ++i) {  // partial Fisher-Yates: k distinct experts
                std::uniform_int_distribution<int> pick(i, E - 1);
                std::swap(ids[i], ids[pick(rng)]);
                used.insert(ids[i]);
            }
        }
        sum += double(used.size());
    }
    // Formula: 256 * (1 - (248/256)^32) = 161.6; the Monte Carlo standard error here is about 0.07.
    CHECK(expected_unique_experts(E, k, B) == Approx(sum / trials).margin(0.5));
}

TEST_CASE("decode floor: toy bytes, FLOPs and the dominating bound", "[plan]") {
    ModelConfig m = toy_gqa();
    HardwareProfile hw = toy_hw(2 * kGiB);  // 1 GB/s, 1 TFLOP/s bf16
    DecodeFloor f = decode_floor(m, hw, toy_input(1, 1));
    // Unique experts: 4 * (1 - (1 - 2/4)^3) = 3.5 per layer.
    CHECK(f.unique_experts_per_layer == Approx(3.5));
    // Non-expert bytes: lm_head 128000 + attention 49152 + norms 640 + router 1024 + 3 embedding rows * 64 * 2 = 384
    //                   = 179200.
    CHECK(f.weight_bytes_per_gpu == Approx(179200));
    // Touched experts: 2 layers * 3.5 * 6144 params * 2 B = 86016.
    CHECK(f.expert_bytes_per_gpu == Approx(86016));
    // KV: 3 sequences * 100 tokens * 256 B = 76800.
    CHECK(f.kv_bytes_per_gpu == Approx(76800));
    CHECK(f.bytes_per_step == Approx(179200 + 86016 + 76800));
    // FLOPs: 3 tokens, each at the accounting's per-token figure for context 100.
    double fpt = flops_per_token(m, 100).total;
    CHECK(f.flops_per_step == Approx(3 * fpt));
    // 342016 B at 1 GB/s = 342.016 us; compute ~1 us at 1 TFLOP/s -> memory-bound.
    CHECK(f.memory_time_us == Approx(342.016));
    CHECK(f.compute_time_us == Approx(3 * fpt / 1e12 * 1e6));
    CHECK(f.time_us == Approx(342.016));
    CHECK(f.bound == "memory");

    // A GPU with 1 MFLOP/s is compute-bound.
    HardwareProfile slow = hw;
    slow.bf16_flops = 1e6;
    DecodeFloor fs = decode_floor(m, slow, toy_input(1, 1));
    CHECK(fs.bound == "compute");
    CHECK(fs.time_us == Approx(3 * fpt / 1e6 * 1e6));

    // EP 2: each GPU holds 2 experts/layer and expects half the touched ones: 86016 / 2; FLOPs split over 2 GPUs.
    DecodeFloor f2 = decode_floor(m, hw, toy_input(2, 1));
    CHECK(f2.expert_bytes_per_gpu == Approx(43008));
    CHECK(f2.flops_per_gpu == Approx(3 * fpt / 2));

    // fp8 and fp8-block use the fp8 peak; int4 (weight-only) computes at the bf16 peak; nvfp4 and mxfp4 at the fp4
    // peak.
    CHECK(peak_flops_for(hw, DType::fp8) == 2e12);
    CHECK(peak_flops_for(hw, DType::fp8_block) == 2e12);
    CHECK(peak_flops_for(hw, DType::int4) == 1e12);
    HardwareProfile fp4 = hw;
    fp4.fp4_flops = 4e12;
    CHECK(peak_flops_for(fp4, DType::nvfp4) == 4e12);
    CHECK(peak_flops_for(fp4, DType::mxfp4) == 4e12);
    // A profile without a format's rate refuses it by name (no silent bf16 fallback): the field, the format, the rate
    // field, and what the profile does compute.
    HardwareProfile no_fp8 = hw;
    no_fp8.fp8_flops = 0;
    CHECK_THAT(test::config_error_of([&] { (void)peak_flops_for(no_fp8, DType::fp8); }),
               Catch::Contains("dtype (--dtype)") && Catch::Contains("fp8_tflops") &&
                   Catch::Contains("use --dtype fp32, bf16 or int4"));
    CHECK_THAT(test::config_error_of([&] { (void)peak_flops_for(hw, DType::nvfp4, "expert_dtype"); }),
               Catch::Contains("expert_dtype (--expert-dtype)") && Catch::Contains("nvfp4") &&
                   Catch::Contains("a profile with fp4_tflops"));
}

TEST_CASE("decode floor: each part's FLOPs at its format's peak; a missing rate refuses the plan",
          "[plan][precision]") {
    ModelConfig m = toy_gqa();
    HardwareProfile hw = toy_hw(2 * kGiB);  // bf16 1 TFLOP/s, fp8 2
    hw.fp4_flops = 4e12;
    PlanInput in = toy_input(1, 1);
    in.precision = uniform_precision(DType::bf16);
    in.precision.dense_weights = DType::fp8;
    in.precision.expert_weights = DType::nvfp4;
    // Per token at context 100 (3 tokens): experts 2 layers * top-2 * 3*64*32 MACs * 2 = 49152 FLOPs at 4 TFLOP/s;
    // attention's projections 2 layers * 12288 MACs * 2 = 49152 at 2 (fp8); LM head 2*64000 = 128000 and router
    // 2 layers * 2*256 = 1024 at 1 (bf16); the products over the context, 2 layers * 2 * 100 tokens * 4 heads *
    // (16 + 16) MACs = 51200 FLOPs, at 1 (bf16 activations).
    const double per_token_s = 49152 / 4e12 + 49152 / 2e12 + (128000 + 1024) / 1e12 + 51200 / 1e12;
    const DecodeFloor f = decode_floor(m, hw, in);
    CHECK(f.flops_per_step == Approx(3 * (49152 + 49152 + 128000 + 1024 + 51200)));
    CHECK(f.compute_time_us == Approx(3 * per_token_s * 1e6));
    CHECK(f.peak_flops_by_format.at("nvfp4") == 4e12);
    CHECK(f.peak_flops_by_format.at("fp8") == 2e12);
    CHECK(f.peak_flops_by_format.at("bf16") == 1e12);
    // Without fp4 units the nvfp4 experts are refused, naming --expert-dtype.
    hw.fp4_flops = 0;
    CHECK_THAT(test::config_error_of([&] { (void)decode_floor(m, hw, in); }),
               Catch::Contains("expert_dtype (--expert-dtype)") && Catch::Contains("fp4_tflops"));
}

TEST_CASE("weights that do not fit are refused naming the minimum number of GPUs", "[plan]") {
    ModelConfig m = toy_gqa();
    // Capacity = 1 GiB workspace + 330000 B. Weights + activations per GPU (see the cases above):
    //   ep1 tp1: 405120 + 167200 = 572320      (1 GPU)   no
    //   ep2 tp1: 355968 + (155200 + 2 rows * 4000 = 163200) = 519168   (2 GPUs)  no
    //   ep1 tp2: 203392 + 122800 = 326192      (2 GPUs)  yes  [act: (256 + 96 + 2*(64+48)) * 2 + 16 = 1168 per token
    //                                                          * 100 + 3 * 500 * 4 = 122800]
    //   ep2 tp2: 203392 + 142000 = 345392      (2 GPUs)  no   [act: (256 + 96 + 320) * 2 + 16 = 1360 * 100 + 6000]
    // so the smallest layout is 2 GPUs with --ep 1 --tp 2.
    HardwareProfile hw = toy_hw(kWorkspaceBytes + 330000);
    PlanInput in = toy_input(1, 1);
    MemoryPlan p = plan_memory(m, hw, in);
    CHECK_FALSE(p.weights_fit);
    CHECK(plan_memory(m, hw, toy_input(1, 2)).weights_fit);
    CHECK_FALSE(plan_memory(m, hw, toy_input(2, 2)).weights_fit);
    MinLayout ml = min_layout_for_weights(m, hw, in);
    REQUIRE(ml.found);
    CHECK(ml.layout.num_gpus() == 2);
    CHECK(ml.layout.moe_ep == 1);
    CHECK(ml.layout.attn_tp == 2);
    try {
        require_weights_fit(m, hw, in, p);
        FAIL("expected ConfigError");
    } catch (const ConfigError& e) {
        CHECK_THAT(std::string(e.what()), Catch::Contains("--ep/--tp") && Catch::Contains("at least 2 GPUs") &&
                                              Catch::Contains("--ep 1 --tp 2"));
    }
    // Nothing fits in 1 GiB + 1000 B: the message says so instead of naming a layout.
    HardwareProfile tiny = toy_hw(kWorkspaceBytes + 1000);
    CHECK_FALSE(min_layout_for_weights(m, tiny, in).found);
    CHECK_THROWS_WITH(require_weights_fit(m, tiny, in, plan_memory(m, tiny, in)), Catch::Contains("smaller --dtype"));
}

TEST_CASE("layouts are validated", "[plan][bad_input]") {
    ModelConfig m = toy_gqa();
    CHECK_THROWS_WITH(check_layout_for_model(m, ep_tp(3, 1)), Catch::Contains("--ep") && Catch::Contains("1, 2, 4"));
    LayoutRequest zero;
    zero.ep = 0;
    CHECK_THROWS_WITH(resolve_layout(zero), Catch::Contains("--ep"));
    CHECK_THROWS_WITH(check_layout_for_model(m, ep_tp(1, 3)), Catch::Contains("--tp"));
    CHECK_NOTHROW(check_layout_for_model(m, ep_tp(4, 2)));
    CHECK_NOTHROW(check_layout_for_model(m, ep_tp(2, 4)));
    PrecisionRequest bad;
    bad.dtype = "fp16x";
    CHECK_THROWS_WITH(check_precision_request(bad), Catch::Contains("--dtype") && Catch::Contains("fp16x"));
}

// ---- the CLI ------------------------------------------------------------------------------------------------------

namespace {
const std::string kMixtral = std::string(MOEBENCH_TEST_DATA) + "/hf-configs/mixtral-8x7b-v0.1.json";
const std::string kDeepseek = std::string(MOEBENCH_TEST_DATA) + "/hf-configs/deepseek-v3.json";
}  // namespace

TEST_CASE("plan --format json has the stable keys, typed", "[plan][cli]") {
    auto r = test::run_cli("plan --model " + kMixtral + " --format json");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    json j = json::parse(r.out);
    CHECK(j.at("schema") == "moebench.plan/1");
    CHECK(j.at("model").at("name").is_string());
    for (const char* k : {"total", "active", "active_excluding_embedding"})
        CHECK(j.at("params").at(k).is_number_integer());
    CHECK(j.at("params").at("source") == "counted");
    CHECK(j.at("flops_per_token").at("source") == "counted");
    CHECK(j.at("memory").at("source") == "modeled");
    CHECK(j.at("decode_floor").at("source") == "modeled");
    int64_t sum = 0;
    for (const char* c : {"embedding", "lm_head", "attention", "norms", "router", "dense_mlp", "routed_experts",
                          "shared_experts", "mtp"}) {
        INFO(c);
        REQUIRE(j.at("params").at("by_component").at(c).is_number_integer());
        REQUIRE(j.at("flops_per_token").at("by_component").at(c).is_number());
        if (std::string(c) != "mtp") sum += j["params"]["by_component"][c].get<int64_t>();
    }
    CHECK(sum == j["params"]["total"].get<int64_t>());  // mtp excluded by default
    CHECK(j.at("flops_per_token").at("total").is_number());
    for (const char* k : {"weights_bytes", "kv_cache_bytes", "activation_bytes", "free_bytes"})
        CHECK(j.at("memory").at("per_gpu").at(k).is_number_integer());
    for (const char* k : {"bytes_per_step", "flops_per_step", "time_us"}) CHECK(j.at("decode_floor").at(k).is_number());
    const json& f = j.at("decode_floor");
    CHECK((f.at("bound") == "memory" || f.at("bound") == "compute"));
    CHECK(f.at("time_us").get<double>() ==
          Approx(std::max(f.at("memory_time_us").get<double>(), f.at("compute_time_us").get<double>())));
    // Defaults: h200-sxm, batch 1, context 4096, bf16.
    CHECK(j.at("hardware").at("name") == "h200-sxm");
    CHECK(j.at("inputs").at("batch") == 1);
    CHECK(j.at("inputs").at("context") == 4096);
    // Mixtral bf16 on one H200: weights are 2 bytes per parameter.
    CHECK(j["memory"]["per_gpu"]["weights_bytes"].get<double>() == Approx(2.0 * j["params"]["total"].get<double>()));
    // Batch 1 touches exactly top-2 experts per layer.
    CHECK(f.at("unique_experts_per_layer").get<double>() == Approx(2.0));
    CHECK(j.at("sparsity").at("explanation").get<std::string>().find("embedding") != std::string::npos);
}

TEST_CASE("plan text output is a readable table and --out writes the file", "[plan][cli]") {
    auto r = test::run_cli("plan --model " + kMixtral + " --batch 8 --context 2048");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    for (const char* s : {"Parameters (counted)", "routed_experts", "active per token", "Why % of parameters",
                          "Memory per GPU (modeled)", "GiB", "Decode-step floor (modeled", "µs", "bound"})
        CHECK_THAT(r.out, Catch::Contains(s));
    std::string dir = test::temp_dir("plan-out");
    auto w = test::run_cli("plan --model " + kMixtral + " --format json --out " + dir + "/plan.json");
    CHECK(w.exit_code == 0);
    CHECK(json::parse(test::read_text(dir + "/plan.json")).at("schema") == "moebench.plan/1");
    std::filesystem::remove_all(dir);
    auto h = test::run_cli("plan --help");
    CHECK_THAT(h.out, Catch::Contains("mixtral-8x7b") && Catch::Contains("h200-sxm") && Catch::Contains("4096"));
}

TEST_CASE("plan: the terminal view is a view of the document", "[plan][cli]") {
    // A hybrid model (the recurrent-state line reads the count of linear-attention layers from the document), one
    // with an automatic layout (its note), and the default.
    const std::string qwen_next = std::string(MOEBENCH_SOURCE_DIR) + "/configs/models/qwen3-next-80b-a3b.json";
    const std::string deepseek = std::string(MOEBENCH_SOURCE_DIR) + "/configs/models/deepseek-v3.json";
    for (const std::string& args : {"--model " + qwen_next + " --batch 4 --context 8192", "--model " + deepseek,
                                    std::string("--dtype fp8 --kv-dtype fp8")}) {
        INFO(args);
        const auto text = test::run_cli("plan " + args);
        const auto doc = test::run_cli("plan " + args + " --format json");
        REQUIRE(text.exit_code == 0);
        REQUIRE(doc.exit_code == 0);
        CHECK(text.out == render_view(json::parse(doc.out), DocKind::plan, "text"));
    }
    const json next = json::parse(test::run_cli("plan --model " + qwen_next + " --format json").out);
    CHECK(next["model"]["num_linear_attention_layers"] == 36);  // 48 layers, every fourth full attention
    const std::string view = render_view(next, DocKind::plan, "text");
    CHECK_THAT(view, Catch::Contains("of which recurrent state") && Catch::Contains("(36 linear-attention layers"));
}

TEST_CASE("plan refuses an explicit layout that does not fit and names the minimum GPUs", "[plan][cli]") {
    // DeepSeek-V3 in bf16 is ~1250 GiB of weights: EP 8 leaves ~157 GiB per H200 (140.4 GiB) -> refused; 256 experts
    // and 128 heads make 16 the next layout.
    auto r = test::run_cli("plan --model " + kDeepseek + " --ep 8");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::StartsWith("moebench: error: --ep/--tp") && Catch::Contains("use at least 16 GPUs"));
    // And with the layout it names, it runs.
    auto pos = r.err.find("--ep ", r.err.find("use at least"));
    REQUIRE(pos != std::string::npos);
    std::string layout = r.err.substr(pos, r.err.find(" (or") - pos);
    auto ok = test::run_cli("plan --model " + kDeepseek + " " + layout + " --format json");
    INFO(layout << "\n" << ok.err);
    CHECK(ok.exit_code == 0);
    // Without --ep/--tp the plan picks that smallest layout itself and says so.
    auto autolayout = test::run_cli("plan --model " + kDeepseek + " --format json");
    REQUIRE(autolayout.exit_code == 0);
    json j = json::parse(autolayout.out);
    CHECK(j["inputs"]["layout_auto"] == true);
    CHECK(j["inputs"]["num_gpus"] == 16);
    CHECK(j["memory"]["per_gpu"]["weights_bytes"].get<double>() <= j["memory"]["capacity_bytes"].get<double>());
}
