// SPDX-License-Identifier: Apache-2.0
// --redundant-experts N: each MoE layer's N replicas go to its hottest experts by the workload's expected load, on the
// least-loaded ranks (EPLB's rule, add_replicas, which `moebench place --replicas` also runs). Checked on hand-computed
// loads (a hot expert on 2 ranks), on the sim's counted rank loads, in plan's and the sim's memory, in the report, and
// on bad values (exit 2 naming the field).
#include "common/json_util.hpp"
#include "config/layout_request.hpp"
#include "model/phase_work.hpp"
#include "model/placement.hpp"
#include "test_models.hpp"
#include "workload/redundant_experts.hpp"
#include "workload/workload.hpp"

#include "cli_helpers.hpp"
#include "error_helpers.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

using namespace moebench;
using Catch::Detail::Approx;
using moebench::test::CliResult;
using moebench::test::run_cli;

namespace {

ModelConfig moe_model(int64_t num_experts, int64_t top_k, int64_t num_layers) {
    ModelConfig m;
    m.name = "synthetic";
    m.num_layers = num_layers;
    m.hidden_size = 64;
    m.moe.num_experts = num_experts;
    m.moe.top_k = top_k;
    m.layer_is_moe.assign(static_cast<size_t>(num_layers), 1);
    return m;
}

// Each rank's expected share of a layer's assignments, written straight from the run's replica rule
// (ExpertPlacement::dest_rank) rather than from add_replicas' running sums: the assignments of expert e made by tokens
// of rank r (expert_load[e] x home_share[r]) stay on r when r holds e, else spread evenly over e's replicas.
std::vector<double> rank_loads(const ExpertPlacement& p, const std::vector<double>& expert_load,
                               const std::vector<double>& home_share) {
    std::vector<double> out(static_cast<size_t>(p.num_ranks), 0.0);
    for (int64_t e = 0; e < p.num_experts; ++e) {
        const auto& holders = p.ranks_of_expert[static_cast<size_t>(e)];
        for (int64_t r = 0; r < p.num_ranks; ++r) {
            const double x = expert_load[static_cast<size_t>(e)] * home_share[static_cast<size_t>(r)];
            if (std::find(holders.begin(), holders.end(), static_cast<int32_t>(r)) != holders.end())
                out[static_cast<size_t>(r)] += x;
            else
                for (int32_t h : holders) out[static_cast<size_t>(h)] += x / static_cast<double>(holders.size());
        }
    }
    return out;
}

double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

}  // namespace

TEST_CASE("redundant experts: the hot expert's replica and one more balance 2 ranks (hand-computed)",
          "[ep][redundant_experts]") {
    // 8 experts, top-2, hot:1:0.45: the hot expert takes 0.45 of the assignments, each of the 7 others 0.55/7. EP 2,
    // contiguous: the hot expert's rank A carries 0.45 + 3 x 0.55/7 = 4.8/7, rank B 4 x 0.55/7 = 2.2/7. Two replicas
    // (one slot more per rank). First: the most load per copy is the hot expert's (0.45), onto the lighter rank B,
    // where B's own tokens' half stays: A = 0.225 + 3c, B = 0.225 + 4c (c = 0.55/7). Second: the hot expert is on both
    // ranks, so the next most load per copy is a cold expert's (c) not on A, the only rank with a free slot: A gains
    // c/2 and B loses it, A = B = 0.5.
    const ModelConfig m = moe_model(8, 2, 2);
    const auto w = make_workload("hot:1:0.45", m, 5);
    StepShape shape;
    shape.batch = 2;  // one decode token on each rank
    const std::vector<double> home{0.5, 0.5};
    for (int64_t layer : {0, 1}) {
        INFO("layer " << layer);
        const std::vector<double> load = w->expected_load(layer);
        REQUIRE(load.size() == 8);
        const auto hot = static_cast<int32_t>(std::max_element(load.begin(), load.end()) - load.begin());
        const double c = 0.55 / 7;
        for (int32_t e = 0; e < 8; ++e) CHECK(load[static_cast<size_t>(e)] == Approx(e == hot ? 0.45 : c));

        const ExpertPlacement base = contiguous_placement(8, 2);
        const int32_t a = base.ranks_of_expert[static_cast<size_t>(hot)][0], b = 1 - a;
        const std::vector<double> before = rank_loads(base, load, home);
        CHECK(before[static_cast<size_t>(a)] == Approx(4.8 / 7));
        CHECK(before[static_cast<size_t>(b)] == Approx(2.2 / 7));

        const ExpertPlacement with = with_redundant_experts(base, *w, m, {0, 1}, shape, 2);
        const ExpertPlacement& pl = with.of_layer(layer);
        REQUIRE(pl.experts_on_rank.size() == 2);
        CHECK(pl.experts_on_rank[0].size() == 5);
        CHECK(pl.experts_on_rank[1].size() == 5);
        CHECK(pl.ranks_of_expert[static_cast<size_t>(hot)] == std::vector<int32_t>{0, 1});
        // The second replica: the first of B's (cold) experts, onto A.
        const int32_t first_of_b = base.experts_on_rank[static_cast<size_t>(b)][0];
        CHECK(pl.local_index(a, first_of_b) >= 0);
        const std::vector<double> after = rank_loads(pl, load, home);
        CHECK(after[0] == Approx(0.5));
        CHECK(after[1] == Approx(0.5));
        CHECK(max_of(after) < max_of(before));
    }
    // Layers not run keep the base placement.
    const ExpertPlacement only0 = with_redundant_experts(contiguous_placement(8, 2), *w, m, {0}, shape, 2);
    CHECK(only0.of_layer(1).experts_on_rank == contiguous_placement(8, 2).experts_on_rank);
}

TEST_CASE("redundant experts: on a power law the busiest rank expects less load, never more",
          "[ep][redundant_experts]") {
    // 64 experts, top-4, powerlaw:1.2 on 8 ranks: contiguous blocks leave the busiest rank 2.47 x the mean; one replica
    // per rank takes it within 10% of the mean.
    {
        const ModelConfig m = moe_model(64, 4, 1);
        const auto w = make_workload("powerlaw:1.2", m, 3);
        StepShape shape;
        shape.batch = 64;
        const std::vector<double> home(8, 1.0 / 8), load = w->expected_load(0);
        const ExpertPlacement base = contiguous_placement(64, 8);
        const double none = max_of(rank_loads(base, load, home));
        CHECK(none * 8 == Approx(2.46875).epsilon(1e-4));
        for (int64_t n : {8, 16, 32, 64}) {
            const double busiest =
                max_of(rank_loads(with_redundant_experts(base, *w, m, {0}, shape, n).of_layer(0), load, home));
            INFO(n << " replicas: busiest rank " << busiest * 8 << " x the mean");
            CHECK(busiest * 8 < 1.1);
            CHECK(busiest >= 1.0 / 8 - 1e-12);  // never below the mean
        }
    }
    // DeepSeek-V3's shape, powerlaw:0.5 on 8 ranks: EPLB's rule alone (the hottest expert per copy onto the
    // least-loaded rank), on contiguous blocks, raises the busiest rank from 1.116 to 1.166 x the mean with 8 replicas:
    // a hot expert of a light rank gets the first replica. The other rule of `place` is kept where it does better.
    {
        const ModelConfig m = moe_model(256, 8, 1);
        const auto w = make_workload("powerlaw:0.5", m, 3);
        StepShape shape;
        shape.batch = 256;
        const std::vector<double> home(8, 1.0 / 8), load = w->expected_load(0);
        const ExpertPlacement base = contiguous_placement(256, 8);
        const double none = max_of(rank_loads(base, load, home));
        for (int64_t n : {8, 16, 32, 64}) {
            const double busiest =
                max_of(rank_loads(with_redundant_experts(base, *w, m, {0}, shape, n).of_layer(0), load, home));
            INFO(n << " replicas: busiest rank " << busiest * 8 << " x the mean, " << none * 8 << " without");
            CHECK(busiest < none);
            CHECK(busiest * 8 < 1.05);
        }
    }
}

TEST_CASE("redundant experts: a search that would take long is refused, naming the count that fits",
          "[ep][redundant_experts][bad_input]") {
    // 256 experts on 64 ranks with 16128 replicas (every rank holding every expert): 16128 x (512 + 16128) = 2.7e8
    // steps > 2e8. The largest multiple of 64 within it: R (512 + R) <= 2e8, R = 13888.
    const ModelConfig m = moe_model(256, 8, 1);
    const auto w = make_workload("powerlaw:0.5", m, 3);
    StepShape shape;
    shape.batch = 64;
    CHECK_THAT(
        test::config_error_of([&] { with_redundant_experts(contiguous_placement(256, 64), *w, m, {0}, shape, 16128); }),
        Catch::Contains("redundant_experts (--redundant-experts)") && Catch::Contains("16128") &&
            Catch::Contains("use at most 13888"));
    CHECK_NOTHROW(with_redundant_experts(contiguous_placement(256, 64), *w, m, {0}, shape, 256));
}

TEST_CASE("redundant experts: the sim's counted rank loads fall as hand-computed, the report records the replicas",
          "[ep][redundant_experts][cli]") {
    // mixtral-8x7b (8 experts, top-2) at EP 2 on hot:1:0.45, 8192 decode tokens: counted max/mean of the ranks'
    // assignments 2 x 4.8/7 = 1.371 without replicas, 1.0 with 2 (the case above), within sampling noise.
    const std::string dir = moebench::test::temp_dir("redundant");
    // At context 64: the KV cache of 4096 sequences per GPU fits beside the weights (at the default 1024 it does not).
    const std::string base =
        "run --backend sim --hardware h200-sxm --model mixtral-8x7b --layers 1 --batch 8192 "
        "--context 64 --ep 2 --routing hot:1:0.45 --iters 1 --warmup 0 ";
    json rec[2];
    for (int i = 0; i < 2; ++i) {
        const std::string out = dir + "/r" + std::to_string(i) + ".json";
        const CliResult r = run_cli(base + "--redundant-experts " + std::to_string(2 * i) + " --out " + out);
        INFO(r.err);
        REQUIRE(r.exit_code == 0);
        rec[i] = load_json_file(out)["runs"][0];
    }
    const json& load0 = rec[0]["backend_info"]["ep_rank_load"];
    const json& load2 = rec[1]["backend_info"]["ep_rank_load"];
    // Without replicas the statistical routing path draws the counts (modeled); with them every token is routed.
    CHECK(load0["source"] == "modeled");
    CHECK(load2["source"] == "counted");
    CHECK(rec[0]["routing"]["path"] == "statistical");
    CHECK(rec[1]["routing"]["path"] == "per-token");
    CHECK(load0["mean_max_over_mean"].get<double>() == Approx(2 * 4.8 / 7).margin(0.03));
    CHECK(load2["mean_max_over_mean"].get<double>() == Approx(1.0).margin(0.03));
    // The experts' GEMMs are compute-bound at 8192 rows per rank: their modeled time falls with the busiest rank.
    for (const char* phase : {"expert_up", "expert_down"}) {
        INFO(phase);
        const double t0 = rec[0]["latency"]["phases"][phase]["mean_us"].get<double>();
        const double t2 = rec[1]["latency"]["phases"][phase]["mean_us"].get<double>();
        CHECK(t2 < 0.85 * t0);
    }
    // The layout and its replicas in the record; an axis (compare matches on it).
    CHECK(rec[0]["layout"]["redundant_experts"] == 0);
    CHECK(rec[1]["layout"]["redundant_experts"] == 2);
    CHECK(rec[1]["axes"]["redundant_experts"] == 2);
    CHECK_THAT(rec[1]["layout"]["describe"].get<std::string>(), Catch::Contains("2 redundant experts"));
    CHECK(rec[0]["backend_info"]["redundant_experts"].is_null());
    const json& replicas = rec[1]["backend_info"]["redundant_experts"];
    CHECK(replicas["count"] == 2);
    REQUIRE(replicas["replicas_per_layer"].size() == 1);
    CHECK(replicas["replicas_per_layer"][0]["layer"] == 0);
    CHECK(replicas["replicas_per_layer"][0]["replicas"].size() == 2);
    // The same run from the report's config: the replicas come back.
    const CliResult again = run_cli("run --config " + dir + "/r1.json --out " + dir + "/again.json");
    REQUIRE(again.exit_code == 0);
    CHECK(load_json_file(dir + "/again.json")["runs"][0]["layout"]["redundant_experts"] == 2);
}

TEST_CASE("redundant experts: an axis compare matches on; a report from before it was one reads as 0",
          "[ep][redundant_experts][cli]") {
    const std::string dir = moebench::test::temp_dir("redundant-compare");
    const std::string sim =
        "run --backend sim --hardware h200-sxm --model mixtral-8x7b --layers 1 --batch 8 --ep 2 "
        "--routing hot:1:0.45 --iters 1 --warmup 0 ";
    REQUIRE(run_cli(sim + "--out " + dir + "/r0.json").exit_code == 0);
    REQUIRE(run_cli(sim + "--redundant-experts 2 --out " + dir + "/r2.json").exit_code == 0);
    json old = load_json_file(dir + "/r0.json");
    old["runs"][0]["axes"].erase("redundant_experts");
    std::ofstream(dir + "/old.json") << old.dump();
    CliResult r = run_cli("compare " + dir + "/old.json " + dir + "/r0.json --allow-modeled");
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, !Catch::Contains("no point"));
    r = run_cli("compare " + dir + "/r0.json " + dir + "/r2.json --allow-modeled");
    CHECK_THAT(r.out + r.err, Catch::Contains("redundant_experts"));
}

TEST_CASE("redundant experts: their weights count in plan's and the sim's memory", "[ep][redundant_experts][cli]") {
    // mixtral-8x7b's routed experts: 32 layers x 8 experts x 3 x 4096 x 14336 = 45,097,156,608 parameters, bf16, over
    // 2 GPUs: 45.10 GB per GPU; with 2 redundant experts 10 of 8 copies: 56.37 GB.
    for (int64_t n : {0, 2}) {
        const CliResult r =
            run_cli("plan --model mixtral-8x7b --ep 2 --format json --redundant-experts " + std::to_string(n));
        REQUIRE(r.exit_code == 0);
        const json plan = json::parse(r.out);
        CHECK(plan["inputs"]["redundant_experts"] == n);
        const double routed = plan["memory"]["per_gpu"]["weights_by_component_bytes"]["routed_experts"].get<double>();
        CHECK(routed == Approx(45097156608.0 * 2 / 2 * (8.0 + static_cast<double>(n)) / 8));
    }
    // The sim's fit check counts them too: a 50 GiB GPU holds the 32 layers (about 45 GiB of weights per GPU at EP 2)
    // but not with 2 replicas per layer (about 55.5 GiB).
    const std::string dir = moebench::test::temp_dir("redundant-mem");
    json hw = load_json_file(std::string(MOEBENCH_SOURCE_DIR) + "/configs/hardware/h200-sxm.json");
    for (const char* k : {"memory_gb", "memory_gib", "memory_bytes"}) hw.erase(k);
    hw["memory_gib"] = 50;
    const std::string hw_path = moebench::test::write_temp("gpu50.json", hw.dump());
    const std::string base = "run --backend sim --hardware " + hw_path +
                             " --model mixtral-8x7b --layers 32 --batch 8 "
                             "--ep 2 --routing hot:1:0.45 --iters 1 --warmup 0 --out " +
                             dir + "/r.json ";
    const CliResult fits = run_cli(base);
    INFO(fits.err);
    REQUIRE(fits.exit_code == 0);
    CHECK_FALSE(load_json_file(dir + "/r.json")["runs"][0].contains("sim_fit_warning"));
    CHECK(load_json_file(dir + "/r.json")["runs"][0]["fits"] == true);
    const CliResult over = run_cli(base + "--redundant-experts 2");
    CHECK(over.exit_code == 2);
    CHECK_THAT(over.err, Catch::Contains("GiB per GPU") && Catch::Contains("50.0 GiB"));
    const CliResult anyway = run_cli(base + "--redundant-experts 2 --allow-no-fit");
    INFO(anyway.err);
    REQUIRE(anyway.exit_code == 0);
    CHECK(load_json_file(dir + "/r.json")["runs"][0]["fits"] == false);
}

TEST_CASE("redundant experts: bad values are refused naming the field, the value and the fix",
          "[ep][redundant_experts][bad_input]") {
    LayoutRequest r;
    r.ep = 4;
    r.redundant_experts = -4;
    CHECK_THAT(
        test::config_error_of([&] { resolve_layout(r); }),
        Catch::Contains("redundant_experts (--redundant-experts)") && Catch::Contains("-4") && Catch::Contains(">= 0"));
    // 8 experts + 6 replicas on 4 ranks: 14 slots do not share evenly; 4 or 8 replicas do (the model decides).
    r.redundant_experts = 6;
    CHECK_NOTHROW(resolve_layout(r));
    CHECK_THAT(test::config_error_of([&] { check_layout_for_model(moe_model(8, 2, 1), resolve_layout(r)); }),
               Catch::Contains("8 + 6 = 14 expert slots") && Catch::Contains("use 4 or 8"));
    r.ep = 1;
    r.redundant_experts = 4;
    CHECK_THAT(test::config_error_of([&] { resolve_layout(r); }),
               Catch::Contains("redundant_experts") && Catch::Contains("--ep N"));
    r.ep = 4;
    r.redundant_experts = int64_t{1} << 40;
    CHECK_THAT(test::config_error_of([&] { resolve_layout(r); }), Catch::Contains("redundant_experts"));
    // Against the model: at most a copy of each of the 8 experts on each of the 3 other ranks.
    const ModelConfig m = moe_model(8, 2, 1);
    r.redundant_experts = 24;
    CHECK_NOTHROW(check_layout_for_model(m, resolve_layout(r)));
    r.redundant_experts = 28;
    CHECK_THAT(test::config_error_of([&] { check_layout_for_model(m, resolve_layout(r)); }),
               Catch::Contains("redundant_experts") && Catch::Contains("28") && Catch::Contains("at most 24"));

    // From the command line: exit 2, one line naming the flag.
    const std::string base =
        "run --backend sim --hardware h200-sxm --model mixtral-8x7b --layers 1 --batch 8 "
        "--iters 1 --warmup 0 --routing hot:1:0.45 ";
    for (const auto& [flags, says] :
         std::vector<std::pair<std::string, std::string>>{{"--ep 2 --redundant-experts -2", ">= 0"},
                                                          {"--ep 2 --redundant-experts 3", "use 2 or 4"},
                                                          {"--ep 2 --redundant-experts 10", "at most 8"},
                                                          {"--redundant-experts 2", "this layout has one"},
                                                          {"--ep 2 --redundant-experts x", "whole number"}}) {
        INFO(flags);
        const CliResult bad = run_cli(base + flags);
        CHECK(bad.exit_code == 2);
        CHECK_THAT(bad.err, Catch::Contains("redundant_experts (--redundant-experts)") && Catch::Contains(says));
    }
    // The model's own router gives no load before the run: nothing to choose replicas by.
    const CliResult router = run_cli(
        "run --backend sim --hardware h200-sxm --model mixtral-8x7b --layers 1 --batch 8 "
        "--iters 1 --warmup 0 --routing router --ep 2 --redundant-experts 2");
    CHECK(router.exit_code == 2);
    CHECK_THAT(router.err, Catch::Contains("redundant_experts") && Catch::Contains("powerlaw"));
    // plan refuses the same values.
    const CliResult plan = run_cli("plan --model mixtral-8x7b --ep 2 --redundant-experts 3");
    CHECK(plan.exit_code == 2);
    CHECK_THAT(plan.err, Catch::Contains("redundant_experts (--redundant-experts)"));
}

TEST_CASE("redundant experts: an expert-parallel size that does not divide the experts, when the replicas fill it",
          "[ep][redundant_experts][cli]") {
    // DeepSeek-V3's decode deployment: 256 experts + 32 replicas = 288 slots on 144 GPUs, 2 per GPU. The contiguous
    // base puts 2 experts on ranks 0..111 and 1 on ranks 112..143; the replicas fill the 32 short ranks.
    const ExpertPlacement base = contiguous_placement(256, 144);
    for (int64_t r = 0; r < 144; ++r) {
        INFO(r);
        CHECK(base.experts_on_rank[static_cast<size_t>(r)].size() == (r < 112 ? 2u : 1u));
    }
    for (int64_t e = 0; e < 256; ++e) {  // expert_rank, plan's traffic rule, agrees with the placement
        INFO(e);
        REQUIRE(base.ranks_of_expert[static_cast<size_t>(e)].size() == 1);
        CHECK(expert_rank(e, 256, 144) == base.ranks_of_expert[static_cast<size_t>(e)].front());
    }
    CHECK(expert_rank(223, 256, 144) == 111);
    CHECK(expert_rank(224, 256, 144) == 112);
    CHECK(expert_rank(255, 256, 144) == 143);
    // Where the experts divide, the rule is unchanged: e / (E / ep).
    for (int64_t e = 0; e < 256; ++e) CHECK(expert_rank(e, 256, 32) == e / 8);

    // Without the replicas EP 144 is refused, naming the count that makes it fit; with 33 the nearest counts.
    LayoutRequest r;
    r.ep = 144;
    const ModelConfig m = moe_model(256, 8, 1);
    CHECK_THAT(test::config_error_of([&] { check_layout_for_model(m, resolve_layout(r)); }),
               Catch::Contains("does not divide the 256 routed experts") && Catch::Contains("--redundant-experts 32") &&
                   Catch::Contains("288 slots, 2 per rank"));
    r.redundant_experts = 33;
    CHECK_THAT(test::config_error_of([&] { check_layout_for_model(m, resolve_layout(r)); }),
               Catch::Contains("256 + 33 = 289 expert slots") && Catch::Contains("use 32 or 176"));
    r.redundant_experts = 32;
    CHECK_NOTHROW(check_layout_for_model(m, resolve_layout(r)));

    // The sim runs it: every rank of every layer holds exactly 2 slots, no rank holds an expert twice, and the
    // memory plan counts 2 experts per GPU (288 / 256 of the routed weights over 144 GPUs).
    const std::string dir = moebench::test::temp_dir("redundant_uneven");
    const std::string args = "--model deepseek-v3 --hardware h800 --dtype fp8-block --ep 144 --redundant-experts 32 ";
    const CliResult run =
        run_cli("run --backend sim " + args +
                "--routing powerlaw:0.5 --first-layer 3 --layers 2 --batch 1152 --context 1024 --iters 1 "
                "--warmup 0 --out " +
                dir + "/r.json");
    INFO(run.err);
    REQUIRE(run.exit_code == 0);
    const json rec = load_json_file(dir + "/r.json")["runs"][0];
    CHECK(rec["layout"]["redundant_experts"] == 32);
    CHECK_THAT(rec["backend_info"]["parallel_layout"]["per_gpu"].get<std::string>(),
               Catch::Contains("2 expert slots (the 256 experts and 32 replicas over 144 ranks)"));
    const json& per_layer = rec["backend_info"]["redundant_experts"]["replicas_per_layer"];
    REQUIRE(per_layer.size() == 2);
    for (const json& layer : per_layer) {
        std::vector<int> slots(144, 0);
        for (int64_t e = 0; e < 256; ++e) ++slots[static_cast<size_t>(expert_rank(e, 256, 144))];
        for (const json& rep : layer["replicas"]) {
            const int64_t expert = rep[0].get<int64_t>(), rank = rep[1].get<int64_t>();
            CHECK(expert_rank(expert, 256, 144) != rank);  // a replica never sits beside its original
            ++slots[static_cast<size_t>(rank)];
        }
        CHECK(std::all_of(slots.begin(), slots.end(), [](int n) { return n == 2; }));
    }
    const CliResult plan = run_cli("plan " + args + "--format json --batch 8 --context 1024");
    INFO(plan.err);
    REQUIRE(plan.exit_code == 0);
    const CliResult plan0 = run_cli(
        "plan --model deepseek-v3 --hardware h800 --dtype fp8-block --ep 128 --format json "
        "--batch 8 --context 1024");
    REQUIRE(plan0.exit_code == 0);
    // 2 expert slots per GPU either way: 288 / 256 of the routed weights over 144 GPUs = 1 / 128 of them.
    const auto routed_per_gpu = [](const std::string& out) {
        return json::parse(out)["memory"]["per_gpu"]["weights_by_component_bytes"]["routed_experts"].get<double>();
    };
    CHECK(routed_per_gpu(plan.out) == Approx(routed_per_gpu(plan0.out)).epsilon(1e-9));
}
