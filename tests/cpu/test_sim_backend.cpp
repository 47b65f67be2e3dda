// SPDX-License-Identifier: Apache-2.0
// The sim backend: phase times equal the roofline formula on hand-computed cases, all-to-all times follow the
// per-rank traffic of the routing, and a tiny model runs a whole step through the engine interface.
#include "backends/registry.hpp"
#include "backends/sim/sim_backend.hpp"

#include "common/error.hpp"
#include "engine/engine.hpp"
#include "error_helpers.hpp"
#include "test_models.hpp"

#include <catch2/catch.hpp>

#include <numeric>

using namespace moebench;

namespace {

using test::decode;

// test::tiny_gqa_h8() (the model of test_phase_work.cpp), here without a dense FFN width: every layer is MoE.
ModelConfig tiny_gqa() {
    ModelConfig m = test::tiny_gqa_h8();
    m.dense_intermediate_size = 0;
    return m;
}

// Round numbers so the expected times can be worked out by hand: 1 GFLOP/s bf16, 1 GB/s memory, 1 GB/s links.
HardwareProfile toy_hw() {
    HardwareProfile h;
    h.name = "toy";
    h.memory_bw_bytes_per_s = 1e9;
    h.bf16_flops = 1e9;
    h.fp32_flops = 0.5e9;
    h.scaleup_bw_bytes_per_s = 1e9;
    h.network_bw_bytes_per_s = 0.25e9;
    h.gpus_per_node = 8;
    return h;
}

SimParams toy_params() {
    SimParams p;
    p.compute_efficiency = 0.5;  // 0.5 GFLOP/s effective
    p.memory_efficiency = 0.5;   // 0.5 GB/s effective
    p.link_efficiency = 0.5;     // 0.5 GB/s per direction
    p.phase_overhead_us = 1.0;
    p.a2a_latency_us = 10.0;
    p.a2a_network_latency_us = 20.0;
    return p;
}

StepRouting same_routing(size_t layers, LayerRouting r) { return StepRouting{std::vector<LayerRouting>(layers, r)}; }

double time_of(const std::vector<PhaseEntry>& plan, const StepTimes& t, Phase p, int64_t slot) {
    for (size_t i = 0; i < plan.size(); ++i)
        if (plan[i].phase == p && plan[i].slot == slot) return t.phase_us[i];
    FAIL("phase not in plan");
    return 0;
}

}  // namespace

TEST_CASE("sim: phase time is max(compute, memory) plus the overhead", "[sim]") {
    const HardwareProfile hw = toy_hw();
    const SimParams p = toy_params();
    // Compute-bound: 1000 flops / 0.5e9 = 2 us; 500 B / 0.5e9 = 1 us -> 2 + 1 = 3 us.
    const double peak = sim_peak_flops(hw, p);
    CHECK(sim_phase_us(PhaseWork{1000, 300, 200}, peak, hw, p) == Approx(3.0));
    // Memory-bound: 100 flops -> 0.2 us; 2000 B -> 4 us -> 5 us.
    CHECK(sim_phase_us(PhaseWork{100, 1500, 500}, peak, hw, p) == Approx(5.0));
    // fp32 uses the fp32 peak: 1000 flops / (0.5e9 * 0.5) = 4 us -> 5 us.
    SimParams p32 = p;
    p32.dtype = DType::fp32;
    CHECK(sim_phase_us(PhaseWork{1000, 0, 0}, sim_peak_flops(hw, p32), hw, p32) == Approx(5.0));
    // The floor used by the reports has no efficiencies and no overhead.
    CHECK(phase_floor_us(PhaseWork{1000, 300, 200}, hw.bf16_flops, hw.memory_bw_bytes_per_s) == Approx(1.0));
}

TEST_CASE("sim: a tiny decode step through the engine equals the hand-computed roofline", "[sim]") {
    const ModelConfig m = tiny_gqa();
    auto be = make_sim_backend(toy_hw(), toy_params());
    CHECK(be->name() == "sim");
    CHECK(be->timing_source() == "modeled");
    const std::vector<int64_t> layers = {0, 1};
    RunOptions opt;
    opt.seed = 7;
    be->prepare(m, layers, decode(2, 3), opt);
    // token 0 -> {0, 1}, token 1 -> {1, 3} in both layers.
    StepRouting r = same_routing(2, LayerRouting{2, 2, {0, 1, 1, 3}, {0.5f, 0.5f, 0.5f, 0.5f}});
    be->set_routing_override(&r);

    const auto plan = step_plan(m, layers, 1, true);
    const StepTimes t = run_step(*be, plan);
    REQUIRE(t.phase_us.size() == plan.size());

    // Work from test_phase_work.cpp (bf16): qkv_proj 512 flops, 352 B -> max(1.024, 0.704) + 1 = 2.024 us.
    CHECK(time_of(plan, t, Phase::qkv_proj, 0) == Approx(2.024));
    // attention: 256 flops, 192 B -> max(0.512, 0.384) + 1 = 1.512 us.
    CHECK(time_of(plan, t, Phase::attention, 1) == Approx(1.512));
    // attn_norm: 0 flops, 80 B -> 0.16 + 1 = 1.16 us.
    CHECK(time_of(plan, t, Phase::attn_norm, 0) == Approx(1.16));
    // expert_up: 768 flops, 576 + 160 = 736 B -> max(1.536, 1.472) + 1 = 2.536 us.
    CHECK(time_of(plan, t, Phase::expert_up, 0) == Approx(2.536));
    // expert_down: 384 flops, 288 + 112 = 400 B -> max(0.768, 0.8) + 1 = 1.8 us.
    CHECK(time_of(plan, t, Phase::expert_down, 1) == Approx(1.8));
    // lm_head: 512 flops, 256 + 96 = 352 B -> 1.024 + 1 = 2.024 us.
    CHECK(time_of(plan, t, Phase::lm_head, -1) == Approx(2.024));
    // Every phase pays at least the overhead.
    for (double us : t.phase_us) CHECK(us >= 1.0);

    MoeLayerResult res = be->moe_result(1);
    CHECK(res.tokens_per_expert == std::vector<int64_t>{1, 2, 0, 1});
    CHECK(res.dropped == 0);
    CHECK(res.routing.ids == std::vector<int32_t>{0, 1, 1, 3});
    // No weights, no data: the sim offers no tensors, no ceilings and no device counters.
    CHECK(be->capability<TensorAccess>() == nullptr);
    CHECK(be->capability<CeilingProbe>() == nullptr);
    CHECK(be->capability<DeviceCounters>() == nullptr);
    CHECK(be->describe().at("timing_source") == "modeled");

    // The same step again gives the same modeled times.
    CHECK(run_step(*be, plan).phase_us == t.phase_us);
}

TEST_CASE("sim: each phase's FLOPs at the rate of its operands' format (fp8 weights)", "[sim]") {
    // fp8 dense and expert weights on a profile whose fp8 peak is 4x bf16; memory so fast that every phase is
    // compute-bound. The dense linear layers and the routed experts run at fp8 (4 GFLOP/s x 0.5); the router and the
    // LM head keep high-precision (bf16) weights and attention multiplies bf16 activations (1 GFLOP/s x 0.5).
    const ModelConfig m = tiny_gqa();
    HardwareProfile hw = toy_hw();
    hw.fp8_flops = 4e9;
    hw.memory_bw_bytes_per_s = 1e18;
    auto be = make_sim_backend(hw, toy_params());
    RunOptions opt;
    opt.precision.dense_weights = DType::fp8;
    opt.precision.expert_weights = DType::fp8;
    be->prepare(m, {0}, decode(2, 3), opt);
    StepRouting r = same_routing(1, LayerRouting{2, 2, {0, 1, 1, 3}, {0.5f, 0.5f, 0.5f, 0.5f}});
    be->set_routing_override(&r);
    const auto plan = step_plan(m, {0}, 1, true);
    const StepTimes t = run_step(*be, plan);
    // qkv_proj 512 flops / 2e9 = 0.256 us; expert_up 768 / 2e9 = 0.384 us (FLOPs of test_phase_work.cpp).
    CHECK(time_of(plan, t, Phase::qkv_proj, 0) == Approx(1.256));
    CHECK(time_of(plan, t, Phase::expert_up, 0) == Approx(1.384));
    // router_gemm 2 T H E = 128 flops / 0.5e9 = 0.256 us; lm_head 512 / 0.5e9 = 1.024 us; attention 256 / 0.5e9.
    CHECK(time_of(plan, t, Phase::router_gemm, 0) == Approx(1.256));
    CHECK(time_of(plan, t, Phase::lm_head, -1) == Approx(2.024));
    CHECK(time_of(plan, t, Phase::attention, 0) == Approx(1.512));
}

TEST_CASE("sim: nvfp4 experts at the fp4 peak; a profile without one refuses them by name", "[sim][precision]") {
    // As above, with the experts in nvfp4 on a profile whose fp4 peak is 8x bf16: expert_up 768 / (8e9 x 0.5) =
    // 0.192 us; the fp8 dense layers stay at fp8 (qkv_proj 0.256 us).
    const ModelConfig m = tiny_gqa();
    HardwareProfile hw = toy_hw();
    hw.fp8_flops = 4e9;
    hw.fp4_flops = 8e9;
    hw.memory_bw_bytes_per_s = 1e18;
    RunOptions opt;
    opt.precision.dense_weights = DType::fp8;
    opt.precision.expert_weights = DType::nvfp4;
    auto be = make_sim_backend(hw, toy_params());
    be->prepare(m, {0}, decode(2, 3), opt);
    StepRouting r = same_routing(1, LayerRouting{2, 2, {0, 1, 1, 3}, {0.5f, 0.5f, 0.5f, 0.5f}});
    be->set_routing_override(&r);
    const auto plan = step_plan(m, {0}, 1, true);
    const StepTimes t = run_step(*be, plan);
    CHECK(time_of(plan, t, Phase::expert_up, 0) == Approx(1.192));
    CHECK(time_of(plan, t, Phase::qkv_proj, 0) == Approx(1.256));
    const json info = be->describe();
    CHECK(info.at("peak_flops") == 4e9);  // the dense weights' format (fp8)
    CHECK(info.at("peak_flops_by_format").at("nvfp4") == 8e9);
    CHECK(info.at("peak_flops_by_format").at("bf16") == 1e9);

    // No fp4 units: refused before anything is modeled, naming the flag, the format and the profile's field.
    hw.fp4_flops = 0;
    auto no_fp4 = make_sim_backend(hw, toy_params());
    CHECK_THAT(
        test::config_error_of([&] { no_fp4->prepare(m, {0}, decode(2, 3), opt); }),
        Catch::Contains("expert_dtype (--expert-dtype)") && Catch::Contains("nvfp4") && Catch::Contains("fp4_tflops"));
}

TEST_CASE("sim: the uniform router is seeded and the capacity factor drops tokens", "[sim]") {
    ModelConfig m = tiny_gqa();
    m.moe.num_experts = 8;
    m.moe.top_k = 2;
    const std::vector<int64_t> layers = {0, 1};
    RunOptions opt;
    opt.seed = 3;
    auto a = make_sim_backend(toy_hw(), toy_params());
    auto b = make_sim_backend(toy_hw(), toy_params());
    a->prepare(m, layers, decode(64, 0), opt);
    b->prepare(m, layers, decode(64, 0), opt);
    for (int64_t s = 0; s < 2; ++s) {
        auto tpe = a->moe_result(s).tokens_per_expert;
        CHECK(std::accumulate(tpe.begin(), tpe.end(), int64_t{0}) == 64 * 2);
        CHECK(tpe == b->moe_result(s).tokens_per_expert);
        for (int64_t t = 0; t < 64; ++t)  // k distinct experts per token
            CHECK(a->moe_result(s).routing.ids[2 * t] != a->moe_result(s).routing.ids[2 * t + 1]);
    }
    // Capacity factor 1: capacity ceil(1 * 4 * 2 / 8) = 1 per expert. All 4 tokens -> {0, 1}: 3 drops at each.
    opt.capacity_factor = 1.0;
    auto c = make_sim_backend(toy_hw(), toy_params());
    c->prepare(m, {0}, decode(4, 0), opt);
    StepRouting r = same_routing(1, LayerRouting{4, 2, {0, 1, 0, 1, 0, 1, 0, 1}, {}});
    c->set_routing_override(&r);
    MoeLayerResult res = c->moe_result(0);
    CHECK(res.dropped == 6);
    CHECK(res.tokens_per_expert[0] == 1);
    CHECK(res.tokens_per_expert[1] == 1);
    CHECK(res.routing.ids[2] == -1);
}

TEST_CASE("sim: EP=8 all-to-all on a balanced routing", "[sim]") {
    // 64 experts, 8 per rank; H 16 (bf16 row = 32 B); decode batch 64 -> 8 tokens per rank.
    ModelConfig m = tiny_gqa();
    m.hidden_size = 16;
    m.moe.num_experts = 64;
    m.moe.top_k = 8;
    const int64_t T = 64, k = 8;
    // Token t picks expert j*8 + t%8 for j = 0..7: one expert on every rank, each expert gets 8 tokens.
    LayerRouting lr{T, k, {}, {}};
    for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < k; ++j) lr.ids.push_back(static_cast<int32_t>(j * 8 + t % 8));
    lr.weights.assign(lr.ids.size(), 1.0f / k);

    // Each token keeps 1 row local and sends 7: per rank 8 tokens * 7 rows * 32 B = 1792 B, 8 rows = 256 B per pair.
    A2aTraffic tr = a2a_traffic(m, decode(T, 0), lr, 2.0, 8);
    for (int64_t src = 0; src < 8; ++src) {
        CHECK(tr.sent(src) == 1792);
        CHECK(tr.received(src) == 1792);
        for (int64_t dst = 0; dst < 8; ++dst) CHECK(tr.at(src, dst) == (src == dst ? 0 : 256));
    }
    CHECK(tr.total() == 8 * 1792);

    // Through the backend: 1792 B / (1 GB/s * 0.5) = 3.584 us + 10 us intra-node latency, both directions.
    auto be = make_sim_backend(toy_hw(), toy_params());
    RunOptions opt;
    opt.layout = ep_layout(8);
    be->prepare(m, {0}, decode(T, 0), opt);
    StepRouting r = same_routing(1, lr);
    be->set_routing_override(&r);
    const auto plan = step_plan(m, {0}, 8, false);
    const StepTimes t = run_step(*be, plan);
    CHECK(time_of(plan, t, Phase::dispatch_a2a, 0) == Approx(13.584));
    CHECK(time_of(plan, t, Phase::combine_a2a, 0) == Approx(13.584));
    // Each rank runs its 8 experts on 8 tokens each: per rank 64 rows through 8 experts.
    // expert_down per rank: flops 2*64*6*16 = 12288 -> 24.576 us; weights 8*6*16*2 = 1536 B + rows 64*(6+16)*2 =
    // 2816 B -> 8.704 us; -> 25.576 us with the overhead.
    CHECK(time_of(plan, t, Phase::expert_down, 0) == Approx(25.576));
    // Attention side: each rank holds 8 of the 64 sequences. attn_norm per rank: 16*2 B + 2*8*16*2 B = 544 B
    // -> 1.088 us + 1 us.
    CHECK(time_of(plan, t, Phase::attn_norm, 0) == Approx(2.088));

    // fp8 dispatch: rows of H + 4 = 20 B (one fp32 scale per 128 channels): 56 rows x 20 B = 1120 B per rank ->
    // 2.24 us + 10 us. The combine still returns rows in the activation dtype (bf16, 32 B): 13.584 us as before.
    RunOptions fp8 = opt;
    fp8.precision.dispatch = DType::fp8;
    auto be8 = make_sim_backend(toy_hw(), toy_params());
    be8->prepare(m, {0}, decode(T, 0), fp8);
    be8->set_routing_override(&r);
    const StepTimes t8 = run_step(*be8, plan);
    CHECK(time_of(plan, t8, Phase::dispatch_a2a, 0) == Approx(12.24));
    CHECK(time_of(plan, t8, Phase::combine_a2a, 0) == Approx(13.584));
}

TEST_CASE("sim: all-to-all across nodes uses the network and its latency", "[sim]") {
    HardwareProfile hw = toy_hw();
    hw.gpus_per_node = 2;
    // 4 ranks on 2 nodes. Rank 0 sends 100 B to rank 1 (same node) and 300 B to rank 2 (other node).
    A2aTraffic t{4, std::vector<double>(16, 0.0)};
    t.bytes[0 * 4 + 1] = 100;
    t.bytes[0 * 4 + 2] = 300;
    // intra 100 / 0.5e9 = 0.2 us; inter 300 / (0.25e9 * 0.5) = 2.4 us; + 20 us network latency.
    CHECK(sim_a2a_us(t, hw, toy_params()) == Approx(22.4));
    CHECK(sim_a2a_us(t, hw, toy_params(), true) == Approx(22.4));
    // The collective spans nodes, so it pays the network latency even when only local rows move: 0.2 + 20 us.
    A2aTraffic local{4, std::vector<double>(16, 0.0)};
    local.bytes[0 * 4 + 1] = 100;
    CHECK(sim_a2a_us(local, hw, toy_params()) == Approx(20.2));
    // All 4 ranks in one node: 0.2 us + 10 us.
    hw.gpus_per_node = 4;
    CHECK(sim_a2a_us(local, hw, toy_params()) == Approx(10.2));
}

TEST_CASE("sim: parameters from a profile's sim block, and bad input", "[sim]") {
    SimParams p = sim_params_from_json(
        json{{"compute_efficiency", 0.6}, {"a2a_latency_us", 4}, {"dtype", "fp32"}, {"mla_form", "latent_expand"}},
        "h.json: sim");
    CHECK(p.compute_efficiency == 0.6);
    CHECK(p.memory_efficiency == SimParams{}.memory_efficiency);
    CHECK(p.a2a_latency_us == 4);
    CHECK(p.dtype == DType::fp32);
    CHECK(p.mla_form == MlaForm::latent_expand);
    CHECK_THROWS_AS(sim_params_from_json(json{{"memory_efficiency", 1.5}}, "sim"), ConfigError);
    CHECK_THROWS_WITH(sim_params_from_json(json{{"compute_eff", 0.5}}, "sim"), Catch::Contains("compute_eff"));
    CHECK_THROWS_AS(sim_params_from_json(json{{"dtype", "fp8"}}, "sim"), ConfigError);

    const ModelConfig m = tiny_gqa();
    auto be = make_sim_backend(toy_hw(), toy_params());
    RunOptions opt;
    opt.layout = ep_layout(3);  // does not divide 4 experts
    CHECK_THROWS_WITH(be->prepare(m, {0}, decode(2, 0), opt), Catch::Contains("ep") && Catch::Contains("divide"));
    opt.layout = ep_layout(16);  // spans nodes on a profile without a network
    HardwareProfile no_net = toy_hw();
    no_net.network_bw_bytes_per_s = 0;
    ModelConfig big = m;
    big.moe.num_experts = 16;
    CHECK_THROWS_AS(make_sim_backend(no_net, toy_params())->prepare(big, {0}, decode(2, 0), opt), ConfigError);
    opt.layout = ep_layout(1);
    opt.soft_topn = 2;
    CHECK_THROWS_AS(be->prepare(m, {0}, decode(2, 0), opt), UnsupportedError);
}

TEST_CASE("sim: registered as a backend with a hardware profile", "[sim]") {
    std::string why;
    auto be = make_backend("sim", &why, "");
    CHECK(be->name() == "sim");
    CHECK(be->timing_source() == "modeled");
    CHECK(why.find("h200-sxm") != std::string::npos);
    CHECK(be->describe().at("hardware").at("name") == "h200-sxm");
    auto a100 = make_backend("sim", &why, "a100-sxm-80gb");
    CHECK(a100->describe().at("hardware").at("name") == "a100-sxm-80gb");
    CHECK_THROWS_AS(make_backend("sim", &why, "no-such-gpu"), ConfigError);
    CHECK_THROWS_WITH(make_backend("simulator", &why), Catch::Contains("sim"));

    // A real shape: one Mixtral-like layer on the H200 profile is memory-bound at decode batch 1: expert_up reads
    // two experts' gate+up weights, 2 * 2*14336*4096 * 2 B = 470 MB -> at 4.8 TB/s x the profile's memory efficiency
    // (0.85 by default: about 115 us) plus its per-phase overhead (compute: 470 MFLOP at 0.75 * 989 TFLOP/s is under
    // 1 us). The efficiency and overhead are the profile's `sim` object's (calibrated by scripts/deploy_validation.py).
    ModelConfig mx = tiny_gqa();
    mx.hidden_size = 4096;
    mx.moe.num_experts = 8;
    mx.moe.expert_intermediate_size = 14336;
    mx.moe.num_shared_experts = 0;
    be->prepare(mx, {0}, decode(1, 0), RunOptions{});
    const auto plan = step_plan(mx, {0}, 1, false);
    const StepTimes t = run_step(*be, plan);
    const double bytes = 2.0 * 2 * 14336.0 * 4096 * 2 + 2.0 * (4096 + 2 * 14336) * 2.0;  // + 2 rows in and out
    const SimParams h200 = sim_params_for(load_hardware("h200-sxm"));
    CHECK(time_of(plan, t, Phase::expert_up, 0) ==
          Approx(bytes / (4800e9 * h200.memory_efficiency) * 1e6 + h200.phase_overhead_us));
}
