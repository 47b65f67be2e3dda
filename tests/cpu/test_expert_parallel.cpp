// SPDX-License-Identifier: Apache-2.0
// Expert parallelism's host pieces: the dispatch formats bit for bit (hand-computed e4m3 and bf16 codes), expert
// placement (contiguous blocks, replicas, files), and `moebench place` on a trace built to favour co-location and on
// the real Mixtral traces. The multi-process runs themselves are tests/mpi_check.py (CTest moebench.mpi).
#include "comm/process_group.hpp"
#include "common/json_util.hpp"
#include "core/dispatch_dtype.hpp"
#include "model/phase_work.hpp"
#include "model/placement.hpp"
#include "test_paths.hpp"
#include "workload/placement_search.hpp"
#include "workload/trace_import.hpp"

#include "cli_helpers.hpp"
#include "error_helpers.hpp"
#include "report/formats.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <string>

using namespace moebench;
using moebench::test::CliResult;
using moebench::test::run_cli;

TEST_CASE("e4m3 codes of hand-picked values", "[ep][dispatch]") {
    using core::e4m3_from_float;
    using core::e4m3_to_float;
    CHECK(e4m3_from_float(1.0f) == 0x38);     // exponent 7 (bias 7), mantissa 0
    CHECK(e4m3_from_float(448.0f) == 0x7e);   // the largest finite value: 1.75 x 2^8
    CHECK(e4m3_from_float(1000.0f) == 0x7e);  // saturates
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
    for (int64_t i = 0; i < H; ++i)
        x[static_cast<size_t>(i)] = std::sin(0.37f * static_cast<float>(i)) * (i < 128 ? 3.0f : 0.01f);
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
    const json doc = {
        {"schema", kPlacementSchema}, {"num_experts", 4}, {"num_ranks", 2}, {"experts_on_rank", {{0, 1, 3}, {2, 3}}}};
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

namespace {
// A trace with planted structure: `groups` of experts chosen together (k of the token's group) with probability
// `together`, else k distinct experts at random; `seqs` sequences of `len` tokens, one layer. Raw mt19937 words
// (their sequence is fixed by the standard, unlike the distributions').
RoutingTrace planted_trace(int64_t E, int64_t k, const std::vector<std::vector<int32_t>>& groups, double together,
                           int64_t seqs, int64_t len, uint32_t seed) {
    RoutingTrace t;
    t.num_layers = 1;
    t.num_tokens = seqs * len;
    t.top_k = k;
    t.num_experts = E;
    for (int64_t s = 0; s < seqs; ++s) t.seq_starts.push_back(s * len);
    std::mt19937 rng(seed);
    const auto below = [&](int64_t n) { return static_cast<int64_t>(rng() % static_cast<uint32_t>(n)); };
    for (int64_t i = 0; i < t.num_tokens; ++i) {
        std::vector<int32_t> pool;
        if (static_cast<double>(rng()) / 4294967296.0 < together) {
            pool = groups[static_cast<size_t>(below(static_cast<int64_t>(groups.size())))];
        } else {
            for (int32_t e = 0; e < E; ++e) pool.push_back(e);
        }
        for (int64_t j = 0; j < k; ++j) {  // k distinct members of the pool
            const int64_t at = j + below(static_cast<int64_t>(pool.size()) - j);
            std::swap(pool[static_cast<size_t>(j)], pool[static_cast<size_t>(at)]);
            t.topk_ids.push_back(pool[static_cast<size_t>(j)]);
        }
    }
    return t;
}

// True when every rank holds exactly the members of one group.
bool one_group_per_rank(const ExpertPlacement& p, const std::vector<std::vector<int32_t>>& groups) {
    for (const auto& held : p.experts_on_rank) {
        bool found = false;
        for (auto g : groups) {
            std::sort(g.begin(), g.end());
            found = found || g == held;
        }
        if (!found) return false;
    }
    return true;
}
}  // namespace

TEST_CASE("place: planted pairs share a rank (8 experts, top-2, ep 4)", "[ep][placement]") {
    // {0,4} {1,5} {2,6} {3,7} chosen together 90% of the time: contiguous blocks ({0,1} {2,3} ...) split every pair,
    // a token touches 2 ranks; one pair per rank, about 1.1. Before the row-exact search with its clustering start
    // place returned contiguous blocks here (47.7 rows a step): the pairs' per-step load is lumpier, which its 2% bound
    // on max/mean refused.
    const std::vector<std::vector<int32_t>> pairs = {{0, 4}, {1, 5}, {2, 6}, {3, 7}};
    const RoutingTrace t = planted_trace(8, 2, pairs, 0.9, 32, 64, 1);
    const PlacementSearch r = search_placement(t, 4, 0, 32);
    INFO("dedup remote rows " << r.contiguous.dedup_remote_rows_per_step << " -> "
                              << r.chosen.dedup_remote_rows_per_step << " (" << r.chosen_from << ")");
    CHECK(one_group_per_rank(r.placement, pairs));
    CHECK(r.chosen.dedup_remote_rows_per_step <= 0.7 * r.contiguous.dedup_remote_rows_per_step);
    // By hand: a step's 32 tokens live 8 per rank; a token's pair is on its own rank 1/4 of the time, so about
    // 32 x 3/4 = 24 tokens send one row (a little more from the 10% chosen at random); contiguous, about 32 x 3/2 = 48.
    CHECK(r.chosen.dedup_remote_rows_per_step == Approx(24.0).margin(4.0));
    CHECK(r.contiguous.dedup_remote_rows_per_step == Approx(48.0).margin(3.0));
}

TEST_CASE("place: planted groups of 4 share a rank (16 experts, top-3, ep 4)", "[ep][placement]") {
    // Groups {g, g+4, g+8, g+12}: contiguous blocks put each group's members on 4 different ranks (a token's 3 experts
    // on 3 ranks); one group per rank puts them on one.
    std::vector<std::vector<int32_t>> groups;
    for (int32_t g = 0; g < 4; ++g) groups.push_back({g, g + 4, g + 8, g + 12});
    const RoutingTrace t = planted_trace(16, 3, groups, 0.9, 32, 64, 2);
    for (int64_t replicas : {0, 4}) {
        const PlacementSearch r = search_placement(t, 4, replicas, 32);
        INFO(replicas << " replicas: dedup remote rows " << r.contiguous.dedup_remote_rows_per_step << " -> "
                      << r.chosen.dedup_remote_rows_per_step << " (" << r.chosen_from << ")");
        CHECK(r.chosen.dedup_remote_rows_per_step <= 0.7 * r.contiguous.dedup_remote_rows_per_step);
        if (replicas == 0) CHECK(one_group_per_rank(r.placement, groups));
    }
}

TEST_CASE("place: on the real Mixtral traces no worse than before the row-exact search", "[ep][placement]") {
    // The figures of the search before (git e87231d: pairwise swaps from contiguous blocks, then the replay's fewest
    // rows within 2% of contiguous's per-step max/mean): dedup remote rows per step and max/mean rank load of the
    // chosen placement, --batch 32. The new choice weighs both (relative to contiguous, added): no worse by that
    // measure, and neither figure more than 0.5% above the old one.
    struct Before {
        const char* trace;
        int64_t ep, replicas;
        double rows, max_over_mean;
    };
    const Before before[] = {
        {"mixtral-8x7b-gsm8k.jsonl", 2, 0, 795.86, 1.1271},
        {"mixtral-8x7b-gsm8k.jsonl", 2, 2, 636.43, 1.1141},
        {"mixtral-8x7b-gsm8k.jsonl", 4, 0, 1405.14, 1.3245},
        {"mixtral-8x7b-gsm8k.jsonl", 4, 4, 1168.29, 1.3624},
        {"mixtral-8x7b-humaneval.jsonl", 2, 0, 777.90, 1.1199},
        {"mixtral-8x7b-humaneval.jsonl", 2, 2, 618.30, 1.1211},
        {"mixtral-8x7b-humaneval.jsonl", 4, 0, 1418.40, 1.3010},
        {"mixtral-8x7b-humaneval.jsonl", 4, 4, 1185.30, 1.2654},
    };
    for (const Before& b : before) {
        ImportSummary summary;
        const RoutingTrace t = import_trace(std::string(MOEBENCH_TEST_DATA) + "/traces/" + b.trace, 0, &summary);
        const PlacementSearch r = search_placement(t, b.ep, b.replicas, 32);
        INFO(b.trace << " ep " << b.ep << " replicas " << b.replicas << ": dedup remote rows "
                     << r.contiguous.dedup_remote_rows_per_step << " -> " << r.chosen.dedup_remote_rows_per_step
                     << " (before " << b.rows << "), max/mean " << r.contiguous.max_over_mean_rank_load << " -> "
                     << r.chosen.max_over_mean_rank_load << " (before " << b.max_over_mean << ")");
        const auto cost = [&](double rows, double mm) {
            return rows / r.contiguous.dedup_remote_rows_per_step + mm / r.contiguous.max_over_mean_rank_load;
        };
        CHECK(cost(r.chosen.dedup_remote_rows_per_step, r.chosen.max_over_mean_rank_load) <=
              cost(b.rows, b.max_over_mean) + 1e-4);
        CHECK(r.chosen.dedup_remote_rows_per_step <= b.rows * 1.005);
        CHECK(r.chosen.max_over_mean_rank_load <= b.max_over_mean * 1.005);
        // Fewer rows than contiguous, no worse balanced; a replica per rank: most experts found at home.
        CHECK(r.chosen.dedup_remote_rows_per_step <
              r.contiguous.dedup_remote_rows_per_step * (b.replicas > 0 ? 0.9 : 1.0));
        CHECK(r.chosen.max_over_mean_rank_load <= r.contiguous.max_over_mean_rank_load * 1.02);
    }
}

TEST_CASE("place: 384 experts on 384 ranks with 384 replicas is bounded work", "[ep][placement]") {
    // Before the incremental search this took about 2 minutes (every candidate replica re-modeled every rank: E N^2
    // per replica); the work now grows as E N per pass and (E + N log N + slots N) per replica. No wall time is
    // asserted: the count of swaps the search looked at stays within its passes x experts x target ranks.
    std::vector<std::vector<int32_t>> groups;
    for (int32_t g = 0; g < 48; ++g) {
        groups.emplace_back();
        for (int32_t j = 0; j < 8; ++j) groups.back().push_back(g * 8 + j);
    }
    RoutingTrace t = planted_trace(384, 8, groups, 0.5, 768, 2, 3);
    int64_t calls = 0;
    double last = 0;
    bool monotone = true;
    const PlacementSearch r = search_placement(t, 384, 384, 384, [&](double done, const std::string& stage) {
        monotone = monotone && done >= last && done <= 1.0 && !stage.empty();
        last = done;
        ++calls;
    });
    CHECK(r.placement.max_experts_per_rank() == 2);
    CHECK(r.candidates_scored == 4);  // one expert per rank: contiguous and its row-exact swaps, two replica rules each
    CHECK(r.swaps_evaluated <= 12 * 384 * 8);
    CHECK(r.chosen.max_over_mean_rank_load < r.contiguous.max_over_mean_rank_load);
    CHECK(calls > 384);
    CHECK(monotone);
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

TEST_CASE("place: the terminal view is a view of the placement file", "[ep][placement][cli]") {
    const std::string dir = moebench::test::temp_dir("place_view");
    const std::string trace = std::string(MOEBENCH_TEST_DATA) + "/traces/mixtral-8x7b-gsm8k.jsonl";
    const CliResult r =
        run_cli("place --trace " + trace + " --ep 4 --replicas 4 --model mixtral-8x7b -o " + dir + "/p.json");
    REQUIRE(r.exit_code == 0);
    const json doc = json::parse(moebench::test::read_text(dir + "/p.json"));
    CHECK(r.out == render_view(doc, DocKind::placement, "text") + "placement: " + dir + "/p.json\n");
    // What the view reads is in the file: the replay's size and how the placement was chosen.
    const json& p = doc["predicted"];
    CHECK(p["batch"] == 64);
    CHECK(p["trace_layers"] == 32);
    CHECK(p["candidates_scored"].get<int64_t>() > 0);
    CHECK_THAT(r.out, Catch::Contains("remote dispatch bytes (bf16), dedup"));  // --model: bf16 rows of its hidden size
    CHECK(p["placed"]["dedup_remote_bytes_per_step"].get<double>() ==
          Approx(p["placed"]["dedup_remote_rows_per_step"].get<double>() * 2 * 4096));
    // --format json: the file's document on stdout; a format a placement has no view in is refused by name.
    const CliResult j = run_cli("place --trace " + trace +
                                " --ep 4 --replicas 4 --model mixtral-8x7b --format json -o " + dir + "/p2.json");
    REQUIRE(j.exit_code == 0);
    CHECK(json::parse(j.out) == json::parse(moebench::test::read_text(dir + "/p2.json")));
    const CliResult bad = run_cli("place --trace " + trace + " --ep 4 --format csv -o " + dir + "/p3.json");
    CHECK(bad.exit_code == 2);
    CHECK_THAT(bad.err, Catch::Contains("a placement has no csv view") && Catch::Contains("text, json"));
}

TEST_CASE("place refuses a replica count whose search would run for many minutes", "[ep][placement][cli]") {
    // 4096 experts (the trace bound) on 4096 ranks with 100 replicas per rank: about 4e11 load updates, beyond the
    // bound of 1e10; refused at once, naming --replicas and the count that fits.
    const std::string dir = moebench::test::temp_dir("place-bound");
    {
        std::ofstream f(dir + "/t.txt");
        f << "4095 0\n1 2\n";
    }
    const CliResult r =
        run_cli("place --trace " + dir + "/t.txt --ep 4096 --replicas 409600 --batch 4096 -o " + dir + "/p.json");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("--replicas") && Catch::Contains("beyond the bound") &&
                          Catch::Contains("use --replicas 8192 or fewer"));
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
    const json doc = {
        {"schema", kPlacementSchema}, {"num_experts", 4}, {"num_ranks", 2}, {"experts_on_rank", {{0, 2}, {1, 3}}}};
    t = a2a_traffic(shape, r, 10.0, placement_from_json(doc, 4, 2, "p.json"), false);
    CHECK(t.at(0, 1) == 10.0);
    CHECK(t.at(1, 0) == 10.0);
    CHECK(t.total() == 20.0);
}

TEST_CASE("the sim models a placement file and the dispatch mode", "[ep][placement][cli]") {
    const std::string dir = moebench::test::temp_dir("sim-place");
    const std::string trace = std::string(MOEBENCH_TEST_DATA) + "/traces/mixtral-8x7b-gsm8k.jsonl";
    REQUIRE(run_cli("place --trace " + trace + " --ep 4 --replicas 4 -o " + dir + "/p.json").exit_code == 0);
    const std::string base =
        "run --backend sim --model mixtral-8x7b --layers 1 --batch 64 --ep 4 --iters 1 --warmup 0 ";
    const CliResult placed = run_cli(base + "--placement " + dir + "/p.json --out " + dir + "/placed.json");
    REQUIRE(placed.exit_code == 0);
    const json rec = load_json_file(dir + "/placed.json")["runs"][0];
    CHECK_THAT(rec["backend_info"]["ep_layout"].get<std::string>(),
               Catch::Contains("p.json") && Catch::Contains("dedup"));
    const CliResult single =
        run_cli("run --backend cpu --model mixtral-8x7b --layers 1 --placement " + dir + "/p.json");
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
        const CliResult r =
            run_cli("run --backend sim --model mixtral-8x7b --routing trace:" + dir +
                    "/t.safetensors --ep 4 --batch 32 --context 128 --layers 32 --warmup 0 --min-time 0 "
                    "--iters " +
                    std::to_string(steps) + (placed ? " --placement " + dir + "/p.json" : std::string()) + " --out " +
                    dir + "/run.json");
        INFO(r.err);
        REQUIRE(r.exit_code == 0);
        const json rec = load_json_file(dir + "/run.json")["runs"][0];
        // Mixtral's hidden rows in bf16 (the sim's dtype): 4096 x 2 bytes.
        const double rows = rec["roofline"]["phases"]["dispatch_a2a"]["bytes"].get<double>() / 8192.0;
        CHECK(rows == Approx(predicted[placed ? "placed" : "contiguous"]["dedup_remote_rows_per_step"].get<double>()));
    }
}
