// SPDX-License-Identifier: Apache-2.0
// Tensor parallelism and the layouts built from it: the ring bytes of each collective and their modeled times by
// hand, the phases each layout runs, one GPU's share of each phase, the sim on hand-worked layouts, plan and the sim
// agreeing on the weights per GPU, DeepSeek-V3 on 8 H200s (fp8 at EP 8 and TP 8 x EP 8 run, bf16 is refused), and a
// sweep that never picks a point that does not fit.
#include "backends/sim/sim_backend.hpp"
#include "cli_helpers.hpp"
#include "config/layout_request.hpp"
#include "engine/engine.hpp"
#include "model/phase_work.hpp"
#include "sweep/golden.hpp"
#include "test_models.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

using namespace moebench;
using namespace moebench::test;

namespace {

// Round numbers for hand-worked times (test_sim_backend.cpp's toy): 1 GB/s memory and links, 0.25 GB/s network, all
// at efficiency 0.5; 1 us per phase, 10 us per collective in a node, 20 us across nodes.
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
    p.compute_efficiency = 0.5;
    p.memory_efficiency = 0.5;
    p.link_efficiency = 0.5;
    p.phase_overhead_us = 1.0;
    p.a2a_latency_us = 10.0;
    p.a2a_network_latency_us = 20.0;
    return p;
}

Layout layout_of(int64_t tp, int64_t attention_dp, int64_t moe_tp, int64_t moe_ep) {
    LayoutRequest r;
    r.tp = tp;
    r.attention_dp = attention_dp;
    r.moe_tp = moe_tp;
    r.moe_ep = moe_ep;
    return resolve_layout(r);
}

std::vector<std::string> names(const std::vector<Phase>& phases) {
    std::vector<std::string> out;
    for (Phase p : phases) out.emplace_back(phase_name(p));
    return out;
}

double time_of(const std::vector<PhaseEntry>& plan, const StepTimes& t, Phase p, int64_t slot) {
    for (size_t i = 0; i < plan.size(); ++i)
        if (plan[i].phase == p && plan[i].slot == slot) return t.phase_us[i];
    FAIL("phase " << phase_name(p) << " not in plan");
    return 0;
}

bool has_phase(const json& run, const std::string& name) { return run["latency"]["phases"].contains(name); }

}  // namespace

TEST_CASE("tp: ring collectives move 2(n-1)/n (all-reduce) or (n-1)/n of the buffer per GPU", "[tp]") {
    const double B = 1048576;  // 1 MiB
    CHECK(ring_bytes_per_gpu(Collective::all_reduce, 1, B) == 0);
    CHECK(ring_bytes_per_gpu(Collective::all_reduce, 2, B) == 1048576);
    CHECK(ring_bytes_per_gpu(Collective::all_reduce, 4, B) == 1572864);
    CHECK(ring_bytes_per_gpu(Collective::all_reduce, 8, B) == 1835008);
    for (Collective c : {Collective::all_gather, Collective::reduce_scatter}) {
        INFO(to_string(c));
        CHECK(ring_bytes_per_gpu(c, 1, B) == 0);
        CHECK(ring_bytes_per_gpu(c, 2, B) == 524288);
        CHECK(ring_bytes_per_gpu(c, 4, B) == 786432);
        CHECK(ring_bytes_per_gpu(c, 8, B) == 917504);
    }
}

TEST_CASE("tp: a collective's time is latency + its ring bytes over one direction of its link", "[tp][sim]") {
    const HardwareProfile hw = toy_hw();
    const SimParams p = toy_params();
    // In a node: 0.5 GB/s effective. All-reduce of 1000 B: n=2 1000 B -> 2 us; n=4 1500 B -> 3 us; n=8 1750 B -> 3.5
    // us; each + 10 us.
    CHECK(sim_collective_us(Collective::all_reduce, 2, 1000, false, hw, p) == Approx(12.0));
    CHECK(sim_collective_us(Collective::all_reduce, 4, 1000, false, hw, p) == Approx(13.0));
    CHECK(sim_collective_us(Collective::all_reduce, 8, 1000, false, hw, p) == Approx(13.5));
    // All-gather and reduce-scatter over 8: 875 B -> 1.75 us + 10 us.
    CHECK(sim_collective_us(Collective::all_gather, 8, 1000, false, hw, p) == Approx(11.75));
    CHECK(sim_collective_us(Collective::reduce_scatter, 8, 1000, false, hw, p) == Approx(11.75));
    // Across nodes: the network at 0.125 GB/s effective, 1750 B -> 14 us + 20 us.
    CHECK(sim_collective_us(Collective::all_reduce, 8, 1000, true, hw, p) == Approx(34.0));
    // One GPU: nothing to sum, no latency.
    CHECK(sim_collective_us(Collective::all_reduce, 1, 1000, false, hw, p) == 0);
    // A TP group spans nodes when its consecutive GPUs cross a node boundary.
    CHECK_FALSE(tp_groups_span_nodes(layout_of(8, 2, 0, 16), 8));
    CHECK(tp_groups_span_nodes(layout_of(16, 1, 0, 16), 8));
    CHECK(tp_groups_span_nodes(layout_of(3, 3, 0, 9), 8));  // GPUs 6-8: the third group crosses into node 2
}

TEST_CASE("tp: each layout's exchange and the phases of its layers", "[tp][engine]") {
    const ModelConfig m = tiny_gqa_h8();
    ModelConfig dense = m;
    dense.layer_is_moe = {0, 1};
    // --ep N: data-parallel attention, expert-parallel experts: the all-to-alls, no collective.
    CHECK(ep_layout(8).moe_exchange() == MoeExchange::all_to_all);
    CHECK(Layout{}.moe_exchange() == MoeExchange::local);
    CHECK(names(phases_for_layer(m, 0, ep_layout(2))) ==
          std::vector<std::string>{"attn_norm", "qkv_proj", "attention", "o_proj", "ffn_norm", "router_gemm", "topk",
                                   "permute", "dispatch_a2a", "expert_up", "activation", "expert_down", "shared_expert",
                                   "combine_a2a", "unpermute_reduce"});
    // TP 2 attention x EP 2 experts on 2 GPUs (vLLM's TP + EP): the attention output all-reduced over the TP group;
    // every GPU holds every token, so no all-to-all: its experts' partial outputs are all-reduced.
    const Layout tp_ep = layout_of(2, 0, 0, 2);
    CHECK(tp_ep.num_gpus() == 2);
    CHECK(tp_ep.attn_dp == 1);
    CHECK(tp_ep.moe_tp == 1);
    CHECK(tp_ep.moe_exchange() == MoeExchange::gather);
    CHECK(names(phases_for_layer(m, 0, tp_ep)) ==
          std::vector<std::string>{"attn_norm", "qkv_proj", "attention", "o_proj", "attn_allreduce", "ffn_norm",
                                   "router_gemm", "topk", "permute", "expert_up", "activation", "expert_down",
                                   "shared_expert", "unpermute_reduce", "moe_allreduce"});
    // TP 2 x DP 2 attention, EP 4: the replicas' tokens gathered first.
    CHECK(names(phases_for_layer(m, 0, layout_of(2, 2, 0, 4))) ==
          std::vector<std::string>{"attn_norm", "qkv_proj", "attention", "o_proj", "attn_allreduce", "ffn_norm",
                                   "router_gemm", "topk", "moe_allgather", "permute", "expert_up", "activation",
                                   "expert_down", "shared_expert", "unpermute_reduce", "moe_allreduce"});
    // DP 4 attention, experts TP 2 x EP 2: no attention all-reduce, the gather exchange.
    const std::vector<std::string> dp_moe_tp = names(phases_for_layer(m, 0, layout_of(1, 4, 2, 2)));
    CHECK(std::count(dp_moe_tp.begin(), dp_moe_tp.end(), "attn_allreduce") == 0);
    CHECK(std::count(dp_moe_tp.begin(), dp_moe_tp.end(), "moe_allgather") == 1);
    CHECK(std::count(dp_moe_tp.begin(), dp_moe_tp.end(), "moe_allreduce") == 1);
    // A dense layer under TP: its MLP's partial outputs all-reduced.
    CHECK(names(phases_for_layer(dense, 0, layout_of(2, 0, 0, 0))) ==
          std::vector<std::string>{"attn_norm", "qkv_proj", "attention", "o_proj", "attn_allreduce", "ffn_norm",
                                   "dense_mlp", "dense_allreduce"});
}

TEST_CASE("tp: one GPU's share of each phase, by hand", "[tp][phase_work]") {
    // tiny_gqa_h8: H 8, 2 heads of 4, 1 KV head, experts of width 6, a shared expert of width 5; bf16 (2 bytes).
    const ModelConfig m = tiny_gqa_h8();
    const Precision bf16 = uniform_precision(DType::bf16);
    const Layout tp2 = layout_of(2, 0, 0, 2);  // TP 2 x EP 2
    PhaseWorkOptions whole, share;
    share.layout = &tp2;
    const StepShape s = decode(4, 3);
    auto work = [&](Phase p, const PhaseWorkOptions& o, const std::vector<int64_t>& tpe = {}) {
        return phase_work(m, p, 0, s, tpe, bf16, 2, o);
    };
    // qkv_proj: q 8x8 + k, v 2 x 8x4 = 128 weights -> 2 x 4 tokens x 128 = 1024 FLOPs, 256 B; activations: x in
    // (4 x 8 x 2 = 64 B, read whole by both GPUs) and q, k, v out (4 x 16 x 2 = 128 B, split).
    PhaseWork q = work(Phase::qkv_proj, whole);
    CHECK(q.flops == 1024);
    CHECK(q.weight_bytes == 256);
    CHECK(q.activation_bytes == 192);
    q = work(Phase::qkv_proj, share);
    CHECK(q.flops == 512);
    CHECK(q.weight_bytes == 128);
    CHECK(q.activation_bytes == 64 + 64);
    // attention: 4 sequences, each 1 query over 4 keys (3 cached + itself), 2 heads x (4 + 4) MACs per pair ->
    // 2 x 4 x 4 x 16 = 512 FLOPs. The one KV head cannot be split over 2 GPUs: each keeps it, and reads the whole
    // cache (4 x 3 x 8 x 2 = 192 B) and writes the new k, v (4 x 8 x 2 = 64 B); q and the output (64 B each) split.
    PhaseWork at = work(Phase::attention, whole);
    CHECK(at.flops == 512);
    CHECK(at.activation_bytes == 64 + 64 + 64 + 192);
    at = work(Phase::attention, share);
    CHECK(at.flops == 256);
    CHECK(at.activation_bytes == 32 + 64 + 32 + 192);
    // shared_expert (width 5): 3 x 8 x 5 = 120 weights -> 960 FLOPs, 240 B; split in half; in and out rows whole.
    PhaseWork se = work(Phase::shared_expert, share);
    CHECK(se.flops == 480);
    CHECK(se.weight_bytes == 120);
    // Experts TP 2: each GPU holds half of every expert's width (3 of 6). expert_up on 4 rows of expert 0 and 2 of
    // expert 2: 2 x 6 rows x 2 x 3 x 8 = 576 FLOPs, 2 experts x 2 x 3 x 8 x 2 B = 192 B.
    const Layout moe_tp2 = layout_of(1, 2, 2, 1);
    PhaseWorkOptions expert_share;
    expert_share.layout = &moe_tp2;
    const PhaseWork up = phase_work(m, Phase::expert_up, 0, s, {4, 0, 2, 0}, bf16, 1, expert_share);
    CHECK(up.flops == 576);
    CHECK(up.weight_bytes == 192);
    CHECK(up.activation_bytes == (6 * 8 + 6 * 6) * 2);  // rows in whole, their half of gate|up out
    // The collectives, summed over the GPUs for the whole step: attention output 4 x 8 x 2 = 64 B, all-reduced over
    // 2 GPUs -> 64 B each, 128 B in all; the MoE output the same over both GPUs.
    CHECK(work(Phase::attn_allreduce, share).activation_bytes == 128);
    CHECK(work(Phase::moe_allreduce, share).activation_bytes == 128);
    CHECK(work(Phase::moe_allgather, share).activation_bytes == 0);   // one replica: nothing to gather
    CHECK(work(Phase::dispatch_a2a, share).activation_bytes == 0);    // no all-to-all under TP
    CHECK(work(Phase::attn_allreduce, whole).activation_bytes == 0);  // no layout: no collective
    // MLA: the latent cache is kept whole on every TP rank, so attention reads it whole however many ranks split the
    // heads (the cost of TP attention on DeepSeek-V3 that data-parallel attention avoids).
    ModelConfig mla = m;
    mla.attn = tiny_mla_attention(
        {.num_heads = 4, .kv_lora_rank = 8, .qk_nope_head_dim = 4, .qk_rope_head_dim = 2, .v_head_dim = 4});
    PhaseWorkOptions absorbed_whole, absorbed_share;
    absorbed_whole.mla_form = absorbed_share.mla_form = MlaForm::absorbed;
    absorbed_share.layout = &tp2;
    auto cache_bytes = [&](const PhaseWorkOptions& o) {
        return phase_work(mla, Phase::attention, 0, decode(4, 1000), {}, bf16, 2, o).activation_bytes -
               phase_work(mla, Phase::attention, 0, decode(4, 0), {}, bf16, 2, o).activation_bytes;
    };
    // 4 sequences x 1000 cached latents x (8 + 2) x 2 B.
    CHECK(cache_bytes(absorbed_whole) == Approx(4.0 * 1000 * 10 * 2));
    CHECK(cache_bytes(absorbed_share) == Approx(4.0 * 1000 * 10 * 2));
}

TEST_CASE("tp: the sim on TP x EP and TP x DP layouts, by hand", "[tp][sim]") {
    ModelConfig m = tiny_gqa_h8();
    m.dense_intermediate_size = 0;
    const StepShape s = decode(4, 0);
    // Every token to experts 0 and 1 (both on expert-parallel rank 0 of 2).
    const LayerRouting lr{4, 2, {0, 1, 0, 1, 0, 1, 0, 1}, std::vector<float>(8, 0.5f)};
    StepRouting routing{{lr}};
    auto be = make_sim_backend(toy_hw(), toy_params());
    RunOptions opt;
    opt.layout = layout_of(2, 0, 0, 2);  // TP 2 x EP 2
    be->prepare(m, {0}, s, opt);
    be->set_routing_override(&routing);
    std::vector<PhaseEntry> plan = step_plan(m, {0}, opt.layout, false);
    StepTimes t = run_step(*be, plan);
    // attn_allreduce: 4 tokens x 8 x 2 B = 64 B over 2 GPUs: 64 B each way -> 0.128 us + 10 us. The MoE output
    // likewise (bf16 combine).
    CHECK(time_of(plan, t, Phase::attn_allreduce, 0) == Approx(10.128));
    CHECK(time_of(plan, t, Phase::moe_allreduce, 0) == Approx(10.128));
    // qkv_proj on each GPU: 512 FLOPs -> 1.024 us at 0.5 GFLOP/s; 256 B -> 0.512 us; + 1 us.
    CHECK(time_of(plan, t, Phase::qkv_proj, 0) == Approx(2.024));
    // The experts: rank 0 holds experts 0 and 1 and runs all 8 rows (every GPU holds every token: nothing is
    // dispatched). expert_down: 2 x 8 x 6 x 8 = 768 FLOPs -> 1.536 us; 2 x 6 x 8 x 2 B + 8 x (6 + 8) x 2 B = 416 B
    // -> 0.832 us; + 1 us.
    CHECK(time_of(plan, t, Phase::expert_down, 0) == Approx(2.536));

    // TP 2 x DP 2 attention over EP 4: each replica holds 2 sequences. moe_allgather: 4 rows x 16 B = 64 B over 4
    // GPUs -> 48 B each -> 0.096 us + 10 us. moe_allreduce: reduce-scatter of 64 B over 4 (48 B -> 0.096 us + 10 us),
    // then the replica's 2 rows (32 B) all-gathered over its TP 2 (16 B -> 0.032 us + 10 us).
    auto be4 = make_sim_backend(toy_hw(), toy_params());
    opt.layout = layout_of(2, 2, 0, 4);
    be4->prepare(m, {0}, s, opt);
    be4->set_routing_override(&routing);
    plan = step_plan(m, {0}, opt.layout, false);
    t = run_step(*be4, plan);
    CHECK(time_of(plan, t, Phase::moe_allgather, 0) == Approx(10.096));
    CHECK(time_of(plan, t, Phase::moe_allreduce, 0) == Approx(20.128));
    // attn_allreduce over each replica's 2 tokens: 32 B over 2 GPUs -> 32 B -> 0.064 us + 10 us.
    CHECK(time_of(plan, t, Phase::attn_allreduce, 0) == Approx(10.064));
    CHECK(be4->traits().tensor_parallel);
}

TEST_CASE("tp: plan and the sim count the same weights per GPU under tensor-parallel layouts", "[tp][plan][sim][cli]") {
    const std::vector<std::string> layouts = {
        "--model deepseek-v3 --tp 8 --ep 8", "--model deepseek-v3 --tp 8 --moe-tp 8",
        "--model deepseek-v3 --tp 2 --attention-dp 4 --ep 8", "--model qwen3-30b-a3b --tp 4"};
    for (const std::string& l : layouts) {
        const std::string point = "--hardware h200-sxm --dtype fp8 --batch 16 --context 2048 " + l;
        INFO(point);
        const CliResult plan = run_cli("plan --format json " + point);
        REQUIRE(plan.exit_code == 0);
        const CliResult sim = run_cli("run --backend sim --layers 1 --iters 1 --warmup 0 --json - " + point);
        REQUIRE(sim.exit_code == 0);
        const json mem = json::parse(sim.out)["runs"][0]["backend_info"]["memory_per_gpu"];
        const json per_gpu = json::parse(plan.out)["memory"]["per_gpu"];
        CHECK(mem["weights_bytes"].get<double>() == Approx(per_gpu["weights_bytes"].get<double>()).margin(1));
        for (const auto& [component, bytes] : per_gpu["weights_by_component_bytes"].items()) {
            INFO(component);
            CHECK(mem["weights_by_component_bytes"][component].get<double>() == Approx(bytes.get<double>()).margin(1));
        }
        CHECK(mem["kv_cache_bytes"].get<double>() == Approx(per_gpu["kv_cache_bytes"].get<double>()).margin(1));
    }
    // By hand: DeepSeek-V3's routed experts (58 x 256 x 3 x 7168 x 2048 = 653,908,770,816 weights) in fp8 over 8
    // GPUs, whether split as EP 8 or as expert TP 8: 81,738,596,352 bytes per GPU.
    for (const char* l : {"--tp 8 --ep 8", "--tp 8 --moe-tp 8"}) {
        const CliResult r = run_cli(
            "run --backend sim --hardware h200-sxm --model deepseek-v3 --dtype fp8 "
            "--layers 1 --iters 1 --warmup 0 --json - " +
            std::string(l));
        REQUIRE(r.exit_code == 0);
        CHECK(json::parse(
                  r.out)["runs"][0]["backend_info"]["memory_per_gpu"]["weights_by_component_bytes"]["routed_experts"]
                  .get<double>() == Approx(81738596352.0));
    }
}

TEST_CASE("tp: DeepSeek-V3 on 8 H200s: fp8 runs at EP 8 and at TP 8 x EP 8, bf16 is refused", "[tp][sim][fit][cli]") {
    const std::string base =
        "run --backend sim --hardware h200-sxm --model deepseek-v3 --layers 0 --batch 64 "
        "--context 4096 --iters 1 --warmup 0 --json - ";
    const CliResult ep = run_cli(base + "--dtype fp8 --ep 8");
    REQUIRE(ep.exit_code == 0);
    const json ep_run = json::parse(ep.out)["runs"][0];
    CHECK(ep_run["fits"] == true);
    CHECK(ep_run["layout"]["describe"] == "8 GPUs: attention DP 8, experts EP 8");
    CHECK(has_phase(ep_run, "dispatch_a2a"));
    CHECK_FALSE(has_phase(ep_run, "attn_allreduce"));

    const CliResult tp = run_cli(base + "--dtype fp8 --tp 8 --ep 8");
    REQUIRE(tp.exit_code == 0);
    const json tp_run = json::parse(tp.out)["runs"][0];
    CHECK(tp_run["fits"] == true);
    CHECK(tp_run["layout"]["describe"] == "8 GPUs: attention TP 8, experts EP 8");
    CHECK(tp_run["backend_info"]["parallel_layout"]["moe_exchange"] == "gather");
    for (const char* p : {"attn_allreduce", "moe_allreduce", "dense_allreduce"}) CHECK(has_phase(tp_run, p));
    CHECK_FALSE(has_phase(tp_run, "dispatch_a2a"));
    CHECK_FALSE(has_phase(tp_run, "moe_allgather"));
    CHECK(tp_run["roofline"]["ranks"] == 8);
    CHECK_FALSE(tp_run["roofline"].contains("unavailable"));
    // TP 8 holds an eighth of the attention weights, so it holds more KV room; the MLA latent cache is kept whole on
    // every TP rank: the same KV per GPU for all 64 sequences as DP 8 holds for its 8.
    const json ep_mem = ep_run["backend_info"]["memory_per_gpu"], tp_mem = tp_run["backend_info"]["memory_per_gpu"];
    CHECK(tp_mem["weights_by_component_bytes"]["attention"].get<double>() ==
          Approx(ep_mem["weights_by_component_bytes"]["attention"].get<double>() / 8));
    CHECK(tp_mem["kv_cache_bytes"].get<double>() == Approx(ep_mem["kv_cache_bytes"].get<double>() * 8));

    // bf16 fits neither: refused before anything is modeled, naming a format and a layout that fit.
    for (const std::string layout : {"--ep 8", "--tp 8 --ep 8"}) {
        INFO(layout);
        const CliResult bf16 = run_cli(base + "--dtype bf16 " + layout);
        CHECK(bf16.exit_code == 2);
        CHECK(bf16.out.empty());
        CHECK_THAT(bf16.err, Catch::Contains("--dtype/--ep/--tp") && Catch::Contains("GiB per GPU") &&
                                 Catch::Contains("use --dtype fp8") && Catch::Contains("at least 16 GPUs") &&
                                 Catch::Contains("--allow-no-fit"));
    }
    // Modeled anyway when asked: the report says it does not fit.
    const CliResult anyway = run_cli(base + "--dtype bf16 --ep 8 --allow-no-fit");
    REQUIRE(anyway.exit_code == 0);
    const json anyway_run = json::parse(anyway.out)["runs"][0];
    CHECK(anyway_run["fits"] == false);
    CHECK_THAT(anyway_run.value("sim_fit_warning", ""), Catch::Contains("GiB per GPU"));
    CHECK_THAT(anyway.err, Catch::Contains("--allow-no-fit"));
}

TEST_CASE("tp: a KV cache that does not fit is refused with the batch that does", "[tp][sim][fit][cli]") {
    const CliResult r = run_cli(
        "run --backend sim --hardware h200-sxm --model deepseek-v3 --dtype fp8 --ep 8 "
        "--first-layer 3 --layers 1 --batch 4096 --context 32768 --iters 1 --warmup 0 --json -");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("--batch/--context") && Catch::Contains("KV cache") &&
                          Catch::Contains("--batch ") && Catch::Contains("or less"));
}

TEST_CASE("tp: a backend without tensor parallelism names the one that models it", "[tp][cli]") {
    const CliResult r = run_cli("run --backend cpu --model olmoe-1b-7b --layers 1 --batch 2 --tp 2");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("tp (--tp)") && Catch::Contains("--backend sim"));
}

TEST_CASE("tp: a sweep marks points that do not fit and never picks one", "[tp][sweep][fit]") {
    // By hand: the point that does not fit has the best throughput and the lowest p95, and is left out.
    json runs = json::array();
    auto point = [&](int batch, double tps, double p95_us, bool fits) {
        runs.push_back({{"status", "ok"},
                        {"batch", batch},
                        {"axes", {{"batch", batch}}},
                        {"fits", fits},
                        {"throughput", {{"tokens_per_s", tps}}},
                        {"latency", {{"step", {{"p95_us", p95_us}}}}}});
    };
    point(1, 100, 1000, true);
    point(2, 180, 1100, true);
    point(4, 900, 900, false);
    for (const std::optional<double> slo : {std::optional<double>{}, std::optional<double>{5.0}}) {
        const json a = analyze_sweep(runs, slo, 0.9);
        REQUIRE(a["golden"].is_object());
        CHECK(a["golden"]["run_index"] == 1);
        CHECK(a["not_fitting"] == json::array({2}));
        CHECK(a["series"][0]["points"] == json::array({0, 1}));
    }
    const json none = analyze_sweep(json::array({runs[2]}), std::nullopt, 0.9);
    CHECK(none["golden"].is_null());
    CHECK_THAT(none["golden_reason"].get<std::string>(), Catch::Contains("do not fit"));

    // Through the CLI: DeepSeek-V3's first MoE layer on 8 H200s in bf16 and fp8: the bf16 point is modeled, marked
    // and not golden.
    const std::string dir = temp_dir("tp-sweep");
    const CliResult r = run_cli(
        "sweep --backend sim --set hardware=h200-sxm --model deepseek-v3 --ep 8 "
        "--set first_layer=3 --layers 1 --batch 64 --iters 1 --warmup 0 --dtype bf16,fp8 --out " +
        dir + "/s.json --journal " + dir + "/s.jsonl");
    REQUIRE(r.exit_code == 0);
    const json s = json::parse(read_text(dir + "/s.json"));
    REQUIRE(s["runs"].size() == 2);
    CHECK(s["runs"][0]["status"] == "ok");
    CHECK(s["runs"][0]["fits"] == false);
    CHECK(s["runs"][1]["fits"] == true);
    CHECK(s["sweep"]["not_fitting"] == json::array({0}));
    CHECK(s["sweep"]["golden"]["run_index"] == 1);
}

TEST_CASE("tp: the README's sim examples fit their GPUs", "[tp][sim][fit][cli]") {
    // README, "What would this cost on hardware I do not have?", the layouts row (--tp 8 added) and the skew row.
    for (const std::string& cmd :
         {std::string(
              "run --backend sim --hardware h200-sxm --model deepseek-v3 --layers 0 --batch 64 --ep 8 --dtype fp8"),
          std::string(
              "run --backend sim --hardware h200-sxm --model deepseek-v3 --layers 0 --batch 64 --ep 8 --dtype fp8 "
              "--tp 8"),
          std::string("run --backend sim --hardware h200-sxm --model deepseek-v3 --dtype fp8 --ep 8 --mode prefill "
                      "--batch 8 --seq-len 4096 --first-layer 3 --layers 1")}) {
        INFO(cmd);
        const CliResult r = run_cli(cmd + " --iters 1 --warmup 0 --json -");
        REQUIRE(r.exit_code == 0);
        CHECK(json::parse(r.out)["runs"][0]["fits"] == true);
    }
}
