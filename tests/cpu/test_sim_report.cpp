// SPDX-License-Identifier: Apache-2.0
// What a run on the sim backend reports: its figures labelled modeled, where its routing ids came from, floors over
// all ranks' ceilings under expert parallelism, a model of 20000 experts without an E x E table, and a warning when
// the layers it models would not fit the profile's GPUs.
#include "cli_helpers.hpp"
#include "test_paths.hpp"

#include "common/json_util.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

using moebench::test::run_cli;
using moebench::test::write_temp;
using namespace moebench;

namespace {

const std::string kTiny = std::string(MOEBENCH_TEST_DATA) + "/models/tiny-gqa.json";

}  // namespace

TEST_CASE("the terminal summary labels sim figures modeled, never measured", "[sim]") {
    auto r = run_cli("run --backend sim --hardware h200-sxm --model " + kTiny + " --out -");
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    // The summary goes to stderr when the JSON goes to stdout; look in both.
    const std::string all = r.out + r.err;
    CHECK_THAT(all, Catch::Contains("MoE block:"));
    CHECK_THAT(all, !Catch::Contains("us measured"));
    CHECK_THAT(all, Catch::Contains("us modeled"));
}

TEST_CASE("the routing block says where ids came from on sim, and that router steps repeat", "[report]") {
    // Before: a sim report said its ids came from "the model's router" and its logits from the router GEMM; the sim
    // has neither. And nothing said that router-workload steps all route the same tokens.
    const auto sim = run_cli("run --backend sim --model " + kTiny + " --iters 2 --warmup 0 --json -");
    REQUIRE(sim.exit_code == 0);
    const json s = json::parse(sim.out)["runs"][0];
    CHECK_THAT(s["routing"]["ids_from"].get<std::string>(), Catch::Contains("sim backend"));
    CHECK_THAT(s["routing"]["logits_from"].get<std::string>(), Catch::StartsWith("none"));
    const auto cpu = run_cli("run --backend cpu --model " + kTiny + " --iters 2 --warmup 0 --json -");
    REQUIRE(cpu.exit_code == 0);
    const json c = json::parse(cpu.out)["runs"][0];
    CHECK_THAT(c["routing"]["ids_from"].get<std::string>(), Catch::Contains("router"));
    CHECK_THAT(c["expert_load"]["basis"].get<std::string>(), Catch::Contains("same seeded tokens"));
    const auto zipf =
        run_cli("run --backend cpu --model " + kTiny + " --routing zipf:1.2 --iters 2 --warmup 0 --json -");
    REQUIRE(zipf.exit_code == 0);
    CHECK_THAT(json::parse(zipf.out)["runs"][0]["expert_load"]["basis"].get<std::string>(),
               !Catch::Contains("same seeded tokens"));
}

TEST_CASE("with expert parallelism on sim the floors use all ranks' ceilings", "[sim]") {
    // Before: the whole step's work (all 8 ranks) was held to ONE GPU's bandwidth, so the modeled block came out at
    // 0.17x of its "floor", with a warning that a ceiling was under-measured (nothing is measured on sim).
    const auto r = run_cli(
        "run --backend sim --model deepseek-v3 --layers 4 --batch 256 --context 4096 --hardware b200 "
        "--ep 8 --dtype fp8 --iters 2 --warmup 0 --json -");
    REQUIRE(r.exit_code == 0);
    const json roof = json::parse(r.out)["runs"][0]["roofline"];
    CHECK(roof["ranks"] == 8);
    CHECK(roof["moe_block"]["ratio_to_floor"].get<double>() >= 1.0);
    CHECK_FALSE(roof["moe_block"].contains("floor_warning"));
    CHECK(roof["phases"]["expert_up"]["fraction_of_mem_bw"].get<double>() <= 1.0);
}

TEST_CASE("a model of 20000 experts runs without an E x E table; its report keeps the top pairs", "[cli]") {
    // Before: the report's 20000 x 20000 co-activation matrix took gigabytes, and the run aborted (bad_alloc while a
    // JSON array was being destroyed). Above 512 experts a layer carries its most frequent pairs instead.
    const std::string dir = moebench::test::temp_dir("many-experts");
    const std::string model = write_temp("e20000.json", R"({"moebench": "model/1", "name": "many", "family": "mixtral",
        "vocab_size": 100, "hidden_size": 64, "num_layers": 1,
        "attention": {"kind": "gqa", "num_heads": 4, "num_kv_heads": 2, "head_dim": 16},
        "moe": {"num_experts": 20000, "top_k": 2, "expert_intermediate_size": 32, "routing": "topk_softmax"}})");
    const auto r = run_cli("run --backend sim --model " + model + " --routing-path per-token" +
                           " --layers 1 --batch 64 --iters 2 --warmup 0 --min-time 0 --out " + dir + "/r.json");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const json layer = load_json_file(dir + "/r.json")["runs"][0]["expert_load"]["per_layer"][0];
    CHECK_FALSE(layer.contains("coactivation"));
    CHECK_THAT(layer["coactivation_omitted"].get<std::string>(), Catch::Contains("512"));
    REQUIRE(layer["coactivation_top_pairs"].is_array());
    int64_t pairs = 0;  // 2 steps x 64 tokens, one pair each (top-2, distinct experts)
    for (const json& p : layer["coactivation_top_pairs"]) pairs += p["count"].get<int64_t>();
    CHECK(pairs == 128);
}

TEST_CASE("the sim refuses a deployment that does not fit the profile's GPUs", "[sim][slow]") {
    // Before: DeepSeek-V3's ~1.2 TiB of bf16 weights were modeled on one B200 without a word; then with a warning
    // and exit 0. Now refused, naming what would fit; --allow-no-fit models it anyway and says so.
    // Per GPU, as moebench plan counts it: at EP 16 the replicated weights of 61 layers, embedding and LM head plus
    // 1/16 of the routed experts.
    const std::string one_b200 =
        "run --backend sim --hardware b200 --model deepseek-v3 --layers 0 --batch 8 --iters 1 "
        "--warmup 0 --json -";
    const auto refused = run_cli(one_b200);
    CHECK(refused.exit_code == 2);
    CHECK_THAT(refused.err, Catch::Contains("1249.9 GiB per GPU") && Catch::Contains("1 GPU") &&
                                Catch::Contains("at least") && Catch::Contains("--allow-no-fit"));
    const auto one = run_cli(one_b200 + " --allow-no-fit");
    REQUIRE(one.exit_code == 0);
    const json r1 = json::parse(one.out)["runs"][0];
    CHECK(r1["fits"] == false);
    REQUIRE(r1.contains("sim_fit_warning"));
    CHECK_THAT(r1["sim_fit_warning"].get<std::string>(), Catch::Contains("1249.9 GiB per GPU") &&
                                                             Catch::Contains("1 GPU") &&
                                                             Catch::Contains("modeled times assume"));
    CHECK_THAT(one.err, Catch::Contains("warning: sim"));
    // EP 16 spreads the routed experts thin enough (moebench plan: 8 GPUs need TP 2 as well).
    const auto ep16 = run_cli(
        "run --backend sim --hardware b200 --model deepseek-v3 --layers 0 --batch 16 --ep 16 "
        "--iters 1 --warmup 0 --json -");
    REQUIRE(ep16.exit_code == 0);
    CHECK_FALSE(json::parse(ep16.out)["runs"][0].contains("sim_fit_warning"));
    CHECK(json::parse(ep16.out)["runs"][0]["fits"] == true);
    // A small model on one H200 fits.
    const auto small = run_cli("run --backend sim --model " + kTiny + " --iters 1 --warmup 0 --json -");
    REQUIRE(small.exit_code == 0);
    CHECK_FALSE(json::parse(small.out)["runs"][0].contains("sim_fit_warning"));
}

TEST_CASE("a brief record leaves out the per-layer and per-expert tables and keeps every other figure",
          "[sim][report]") {
    // The tables are most of a record (DeepSeek-V3 at EP 8: 140 KB of 165 KB, built and written per point); a sweep
    // of thousands of points asks for --record brief.
    const std::string dir = moebench::test::temp_dir("brief");
    const std::string common =
        "run --backend sim --model deepseek-v3 --dtype fp8 --layers 0 --batch 64 --ep 8 --iters 2 --warmup 0 ";
    const auto full = run_cli(common + "--out " + dir + "/full.json");
    const auto brief = run_cli(common + "--record brief --out " + dir + "/brief.json");
    INFO(full.err << brief.err);
    REQUIRE(full.exit_code == 0);
    REQUIRE(brief.exit_code == 0);
    const json f = load_json_file(dir + "/full.json")["runs"][0], b = load_json_file(dir + "/brief.json")["runs"][0];
    CHECK(f["latency"].contains("per_layer"));
    CHECK_FALSE(b["latency"].contains("per_layer"));
    CHECK(f["expert_load"]["per_layer"].size() == 58);
    CHECK_FALSE(b["expert_load"].contains("per_layer"));
    CHECK(b["expert_load"]["layers"] == 58);
    CHECK_FALSE(b["backend_info"]["ep_rank_load"].contains("per_layer"));
    CHECK(b["backend_info"]["ep_rank_load"]["mean_max_over_mean"] ==
          f["backend_info"]["ep_rank_load"]["mean_max_over_mean"]);
    // The same seeded draws: every other figure is the same.
    CHECK(b["latency"]["step"] == f["latency"]["step"]);
    CHECK(b["latency"]["phases"] == f["latency"]["phases"]);
    CHECK(b["latency"]["whole_model"] == f["latency"]["whole_model"]);
    CHECK(b["roofline"] == f["roofline"]);
    double most = 0, sum = 0;
    for (const json& l : f["expert_load"]["per_layer"]) {
        most = std::max(most, l["max_over_mean"].get<double>());
        sum += l["max_over_mean"].get<double>();
    }
    CHECK(b["expert_load"]["max_over_mean_max"].get<double>() == Approx(most));
    CHECK(b["expert_load"]["max_over_mean_mean"].get<double>() == Approx(sum / 58));
    // It reads back as a report, and shows as one.
    const auto shown = run_cli("report " + dir + "/brief.json --format md");
    INFO(shown.err);
    CHECK(shown.exit_code == 0);
    const auto bad = run_cli("run --backend sim --model " + kTiny + " --record briefly --out -");
    CHECK(bad.exit_code == 2);
    CHECK_THAT(bad.err, Catch::Contains("record") && Catch::Contains("briefly") && Catch::Contains("brief"));
}
