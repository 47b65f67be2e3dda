// SPDX-License-Identifier: Apache-2.0
// Expert parallelism's host pieces: the dispatch formats bit for bit (hand-computed e4m3 and bf16 codes), expert
// placement (contiguous blocks, replicas, files), and `moebench place` on a trace built to favour co-location and on
// the real Mixtral traces. The multi-process runs themselves are tests/mpi_check.py (CTest moebench.mpi).
#include "test_paths.hpp"
#include "comm/process_group.hpp"
#include "core/dispatch_dtype.hpp"
#include "model/phase_work.hpp"
#include "model/placement.hpp"
#include "common/json_util.hpp"
#include "workload/placement_search.hpp"
#include "workload/trace_import.hpp"

#include "cli_helpers.hpp"
#include "error_helpers.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <string>

using namespace moebench;
using moebench::test::CliResult;
using moebench::test::run_cli;

TEST_CASE("e4m3 codes of hand-picked values", "[ep][dispatch]") {
    using core::e4m3_from_float;
    using core::e4m3_to_float;
    CHECK(e4m3_from_float(1.0f) == 0x38);          // exponent 7 (bias 7), mantissa 0
    CHECK(e4m3_from_float(448.0f) == 0x7e);        // the largest finite value: 1.75 x 2^8
    CHECK(e4m3_from_float(1000.0f) == 0x7e);       // saturates
    CHECK(e4m3_from_float(-2.0f) == 0xc0);
    CHECK(e4m3_from_float(0.001953125f) == 0x01);  // 2^-9, the smallest subnormal
    CHECK(e4m3_from_float(0.015625f) == 0x08);     // 2^-6, the smallest normal
    CHECK(e4m3_from_float(1.0625f) == 0x38);       // halfway between 1 and 1.125: to even (mantissa 0)
    CHECK(e4m3_from_float(1.1875f) == 0x3a);       // halfway between 1.125 and 1.25: to even (mantissa 2)
    CHECK(e4m3_to_float(0x7e) == 448.0f);
    CHECK(e4m3_to_float(0x01) == 0.001953125f);
    CHECK(std::isnan(e4m3_to_float(0x7f)));
    for (int c = 0; c < 256; ++c) {  // every finite code survives a round trip
        if ((c & 0x7f) == 0x7f) continue;
        const float v = e4m3_to_float(static_cast<uint8_t>(c));
        if (v == 0.0f) continue;  // +0 and -0
        CHECK(e4m3_from_float(v) == c);
    }
}

TEST_CASE("bf16 rounds to nearest even", "[ep][dispatch]") {
    CHECK(core::bf16_from_float(1.0f) == 0x3f80);
    CHECK(core::bf16_from_float(1.00390625f) == 0x3f80);  // 1 + 2^-8: halfway, to even
    CHECK(core::bf16_from_float(1.01171875f) == 0x3f82);  // 1 + 3 x 2^-8: halfway, to even (up)
    CHECK(core::bf16_to_float(0x3f81) == 1.0078125f);
}

TEST_CASE("an fp8 row: one scale per 128 channels, dequantised within e4m3's step", "[ep][dispatch]") {
    const int64_t H = 200;  // two scale blocks, the second partial
    std::vector<float> x(H), back(H);
    for (int64_t i = 0; i < H; ++i) x[static_cast<size_t>(i)] = std::sin(0.37f * static_cast<float>(i)) * (i < 128 ? 3.0f : 0.01f);
    std::vector<uint8_t> wire(static_cast<size_t>(core::dispatch_row_bytes(core::DispatchDtype::fp8, H)));
    CHECK(wire.size() == 200 + 2 * 4);
    core::encode_row(core::DispatchDtype::fp8, x.data(), H, wire.data());
    core::decode_row(core::DispatchDtype::fp8, wire.data(), H, back.data());
    for (int64_t i = 0; i < H; ++i) {
        const float amax = i < 128 ? 3.0f : 0.01f;  // each block keeps its own range
        CHECK(std::fabs(back[static_cast<size_t>(i)] - x[static_cast<size_t>(i)]) <= amax / 16.0f + 1e-7f);
    }
}

TEST_CASE("contiguous placement and replicas choose ranks as documented", "[ep][placement]") {
    const ExpertPlacement c = contiguous_placement(8, 4);
    CHECK(c.experts_on_rank[1] == std::vector<int32_t>{2, 3});
    CHECK(c.dest_rank(5, 0, 0) == 2);
    CHECK(c.local_index(2, 5) == 1);
    CHECK(c.local_index(1, 5) == -1);
    const json doc = {{"schema", kPlacementSchema}, {"num_experts", 4}, {"num_ranks", 2},
                      {"experts_on_rank", {{0, 1, 3}, {2, 3}}}};
    const ExpertPlacement p = placement_from_json(doc, 4, 2, "p.json");
    CHECK(p.ranks_of_expert[3] == std::vector<int32_t>{0, 1});
    CHECK(p.dest_rank(3, 1, 0) == 1);  // a replica on the token's own rank: nothing crosses
    CHECK(p.dest_rank(3, 0, 7) == 0);
    CHECK(p.dest_rank(2, 0, 7) == 1);
}

TEST_CASE("a bad placement file names the field and the fix", "[ep][placement]") {
    json doc = {{"schema", kPlacementSchema}, {"num_experts", 4}, {"num_ranks", 2}, {"experts_on_rank", {{0, 1}, {2}}}};
    CHECK_THAT(moebench::test::config_error_of([&] { placement_from_json(doc, 4, 2, "p.json"); }),
               Catch::Contains("leaves an expert on no rank") && Catch::Contains("3"));
    doc["experts_on_rank"] = {{0, 1, 1}, {2, 3}};
    CHECK_THAT(moebench::test::config_error_of([&] { placement_from_json(doc, 4, 2, "p.json"); }),
               Catch::Contains("experts_on_rank[0]") && Catch::Contains("twice"));
    doc["experts_on_rank"] = {{0, 1}, {2, 3}};
    CHECK_THAT(moebench::test::config_error_of([&] { placement_from_json(doc, 4, 4, "p.json"); }),
               Catch::Contains("num_ranks") && Catch::Contains("--ep 4"));
    CHECK_THAT(moebench::test::config_error_of([&] { placement_from_json(doc, 8, 2, "p.json"); }),
               Catch::Contains("num_experts"));
}

namespace {
// Tokens always select the pairs {0,4} {1,5} {2,6} {3,7}: contiguous blocks split every pair over two ranks.
RoutingTrace paired_trace() {
    RoutingTrace t;
    t.num_layers = 1;
    t.num_tokens = 256;
    t.top_k = 2;
    t.num_experts = 8;
    t.seq_starts = {0};
    for (int64_t i = 0; i < t.num_tokens; ++i) {
        const int32_t a = static_cast<int32_t>((i * 7) % 4);
        t.topk_ids.push_back(a);
        t.topk_ids.push_back(a + 4);
    }
    return t;
}
}  // namespace

TEST_CASE("place: co-selected experts share a rank on a trace built for it", "[ep][placement]") {
    const RoutingTrace t = paired_trace();
    const PlacementSearch r = search_placement(t, 2, 0, 64);
    // Contiguous: each token has one expert on each rank, so all 64 tokens of a step send one row away; placed
    // with its pair, only the tokens whose pair lives on the other rank (half of them) do.
    CHECK(r.contiguous.dedup_remote_rows_per_step == Approx(64.0));
    CHECK(r.chosen.dedup_remote_rows_per_step == Approx(32.0));
    for (const auto& held : r.placement.experts_on_rank)
        for (int32_t e : held)  // each pair on one rank
            CHECK(std::find(held.begin(), held.end(), (e + 4) % 8) != held.end());
    CHECK(r.chosen.max_over_mean_rank_load <= r.contiguous.max_over_mean_rank_load + 1e-9);
}

TEST_CASE("place: hot experts get replicas that lower the max/mean rank load", "[ep][placement]") {
    RoutingTrace t;  // expert 0 in every token: its rank carries far more than the mean
    t.num_layers = 1;
    t.num_tokens = 128;
    t.top_k = 2;
    t.num_experts = 8;
    t.seq_starts = {0};
    for (int64_t i = 0; i < t.num_tokens; ++i) {
        t.topk_ids.push_back(0);
        t.topk_ids.push_back(static_cast<int32_t>(1 + i % 7));
    }
    const PlacementSearch r = search_placement(t, 4, 4, 32);
    CHECK(r.placement.ranks_of_expert[0].size() >= 2);
    CHECK(r.chosen.max_over_mean_rank_load < r.contiguous.max_over_mean_rank_load);
    CHECK_THAT(moebench::test::config_error_of([&] { search_placement(t, 4, 3, 32); }), Catch::Contains("--replicas"));
    CHECK_THAT(moebench::test::config_error_of([&] { search_placement(t, 3, 0, 32); }), Catch::Contains("--ep"));
}

TEST_CASE("place: on the real Mixtral traces the placement sends fewer rows, no worse balanced", "[ep][placement]") {
    for (const char* name : {"mixtral-8x7b-gsm8k.jsonl", "mixtral-8x7b-humaneval.jsonl"}) {
        ImportSummary summary;
        const RoutingTrace t = import_trace(std::string(MOEBENCH_TEST_DATA) + "/traces/" + name, 0, &summary);
        for (int64_t n : {2, 4}) {
            const PlacementSearch r = search_placement(t, n, 0, 32);
            INFO(name << " ep " << n << ": dedup remote rows " << r.contiguous.dedup_remote_rows_per_step << " -> "
                      << r.chosen.dedup_remote_rows_per_step << ", max/mean " << r.contiguous.max_over_mean_rank_load
                      << " -> " << r.chosen.max_over_mean_rank_load);
            CHECK(r.chosen.dedup_remote_rows_per_step < r.contiguous.dedup_remote_rows_per_step);
            CHECK(r.chosen.max_over_mean_rank_load <= r.contiguous.max_over_mean_rank_load * 1.02);
            // A replica per rank: the tokens find most of their experts at home. Replayed in the run's token order
            // the extra copies cost some balance on gsm8k at 4 ranks (max/mean 1.33 -> 1.36 with every candidate
            // tried), so the bound here is 5%, not the 2% the search aims for.
            const PlacementSearch rr = search_placement(t, n, n, 32);
            INFO("with " << n << " replicas: dedup rows " << rr.chosen.dedup_remote_rows_per_step << ", max/mean "
                         << rr.chosen.max_over_mean_rank_load);
            CHECK(rr.chosen.dedup_remote_rows_per_step < 0.9 * r.contiguous.dedup_remote_rows_per_step);
            CHECK(rr.chosen.max_over_mean_rank_load <= r.contiguous.max_over_mean_rank_load * 1.05);
        }
    }
}

TEST_CASE("moebench place writes a placement that run --placement reads back", "[ep][placement][cli]") {
    const std::string out = moebench::test::temp_dir("place") + "/placement.json";
    const std::string trace = std::string(MOEBENCH_TEST_DATA) + "/traces/mixtral-8x7b-gsm8k.jsonl";
    const CliResult r = run_cli("place --trace " + trace + " --ep 2 --replicas 2 -o " + out);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("remote dispatch rows, --a2a dedup"));
    const ExpertPlacement p = load_placement(out, 8, 2);
    CHECK(p.experts_on_rank[0].size() == 5);
    CHECK(p.experts_on_rank[1].size() == 5);
    const CliResult bad = run_cli("place --trace " + trace + " --ep 3 -o " + out);
    CHECK(bad.exit_code == 2);
    CHECK_THAT(bad.err, Catch::Contains("--ep") && Catch::Contains("divide"));
}

TEST_CASE("a2a traffic by placement and dispatch mode, hand-computed", "[ep][placement]") {
    // Decode batch 4 on 2 ranks: tokens 0, 1 live on rank 0, tokens 2, 3 on rank 1; 4 experts, top-2.
    StepShape shape;
    shape.batch = 4;
    LayerRouting r{4, 2, {2, 3, 0, 2, 0, 1, 1, 3}, {}};
    const ExpertPlacement blocks = contiguous_placement(4, 2);  // {0, 1} | {2, 3}
    // per-expert: t0 sends 2 rows and t1 1 row to rank 1; t2 sends 2 and t3 1 to rank 0.
    A2aTraffic t = a2a_traffic(shape, r, 10.0, blocks, false);
    CHECK(t.at(0, 1) == 30.0);
    CHECK(t.at(1, 0) == 30.0);
    // dedup: each of those tokens sends one row to the other rank.
    t = a2a_traffic(shape, r, 10.0, blocks, true);
    CHECK(t.at(0, 1) == 20.0);
    CHECK(t.at(1, 0) == 20.0);
    // {0, 2} | {1, 3}: only t0's expert 3 and t2's expert 0 cross.
    const json doc = {{"schema", kPlacementSchema}, {"num_experts", 4}, {"num_ranks", 2}, {"experts_on_rank", {{0, 2}, {1, 3}}}};
    t = a2a_traffic(shape, r, 10.0, placement_from_json(doc, 4, 2, "p.json"), false);
    CHECK(t.at(0, 1) == 10.0);
    CHECK(t.at(1, 0) == 10.0);
    CHECK(t.total() == 20.0);
}

TEST_CASE("the sim models a placement file and the dispatch mode", "[ep][placement][cli]") {
    const std::string dir = moebench::test::temp_dir("sim-place");
    const std::string trace = std::string(MOEBENCH_TEST_DATA) + "/traces/mixtral-8x7b-gsm8k.jsonl";
    REQUIRE(run_cli("place --trace " + trace + " --ep 4 --replicas 4 -o " + dir + "/p.json").exit_code == 0);
    const std::string base = "run --backend sim --model mixtral-8x7b --layers 1 --batch 64 --ep 4 --iters 1 --warmup 0 ";
    const CliResult placed = run_cli(base + "--placement " + dir + "/p.json --out " + dir + "/placed.json");
    REQUIRE(placed.exit_code == 0);
    const json rec = load_json_file(dir + "/placed.json")["runs"][0];
    CHECK_THAT(rec["backend_info"]["ep_layout"].get<std::string>(), Catch::Contains("p.json") && Catch::Contains("dedup"));
    const CliResult single = run_cli("run --backend cpu --model mixtral-8x7b --layers 1 --placement " + dir + "/p.json");
    CHECK(single.exit_code == 2);
    CHECK_THAT(single.err, Catch::Contains("placement") && Catch::Contains("--ep"));
}

TEST_CASE("a build without MPI started by a launcher says so and exits 2", "[ep][cli]") {
    if (mpi_built()) {
        SUCCEED("this build has MPI: tests/mpi_check.py (CTest moebench.mpi) runs the launcher");
        return;
    }
    // As mpirun would set it for 2 processes; the binary must not run each as a lone single process.
    const CliResult r = run_cli("--version", "OMPI_COMM_WORLD_SIZE=2");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("without MPI") && Catch::Contains("libopenmpi-dev"));
}

TEST_CASE("place's prediction is what a run replaying the trace moves", "[ep][placement][cli]") {
    // place replays the trace in the run's token order (sequences interleaved in decode); the sim run of the same
    // trace, ranks, placement and batch counts its dispatch rows with the run's a2a_traffic: the two must agree.
    const std::string dir = moebench::test::temp_dir("place-vs-run");
    const std::string trace = std::string(MOEBENCH_TEST_DATA) + "/traces/mixtral-8x7b-humaneval.jsonl";
    REQUIRE(run_cli("place --trace " + trace + " --ep 4 --replicas 4 --batch 32 -o " + dir + "/p.json").exit_code == 0);
    REQUIRE(run_cli("trace convert " + trace + " -o " + dir + "/t.safetensors").exit_code == 0);
    const json predicted = load_json_file(dir + "/p.json")["predicted"];
    const int64_t steps = predicted["steps"].get<int64_t>();
    REQUIRE(steps >= 2);
    for (const bool placed : {true, false}) {
        INFO((placed ? "placed" : "contiguous"));
        const CliResult r = run_cli("run --backend sim --model mixtral-8x7b --routing trace:" + dir +
                                    "/t.safetensors --ep 4 --batch 32 --context 128 --layers 32 --warmup 0 --min-time 0 "
                                    "--iters " + std::to_string(steps) +
                                    (placed ? " --placement " + dir + "/p.json" : std::string()) + " --out " + dir +
                                    "/run.json");
        INFO(r.err);
        REQUIRE(r.exit_code == 0);
        const json rec = load_json_file(dir + "/run.json")["runs"][0];
        // Mixtral's hidden rows in bf16 (the sim's dtype): 4096 x 2 bytes.
        const double rows = rec["roofline"]["phases"]["dispatch_a2a"]["bytes"].get<double>() / 8192.0;
        CHECK(rows == Approx(predicted[placed ? "placed" : "contiguous"]["dedup_remote_rows_per_step"].get<double>()));
    }
}
