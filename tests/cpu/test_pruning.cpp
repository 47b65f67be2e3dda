// SPDX-License-Identifier: Apache-2.0
// run --prune-below on a trace whose shares are known by hand: which experts go, that no token routes to them, where
// their assignments go, and the memory the record says they free.
#include "cli_helpers.hpp"
#include "common/json_util.hpp"
#include "test_paths.hpp"
#include "workload/trace.hpp"

#include <catch2/catch.hpp>

using namespace moebench;
using Catch::Detail::Approx;
using moebench::test::run_cli;

namespace {

const std::string kTiny = std::string(MOEBENCH_TEST_DATA) + "/models/tiny-gqa.json";  // 2 MoE layers, 4 experts, top-2

// Layer 0: six tokens {0,1}, one {0,2}, one {1,3}: shares 7/16, 7/16, 1/16, 1/16. Layer 1: four {0,1}, four {2,3}:
// 1/4 each.
std::string hand_trace(const std::string& dir) {
    RoutingTrace t;
    t.num_layers = 2;
    t.num_tokens = 8;
    t.top_k = 2;
    t.num_experts = 4;
    t.seq_starts = {0};
    t.topk_ids = {0, 1, 0, 1, 0, 1, 0, 2, 0, 1, 1, 3, 0, 1, 0, 1,   // layer 0
                  0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3};  // layer 1
    const std::string path = dir + "/prune.safetensors";
    write_trace(path, t);
    return path;
}

std::string sim_run(const std::string& trace, const std::string& out) {
    return "run --backend sim --model " + kTiny + " --routing trace:" + trace +
           " --mode prefill --batch 1 --seq-len 8 --warmup 0 --iters 2 --out " + out;
}

}  // namespace

TEST_CASE("run --prune-below: experts below the share go, no token routes to them, the memory they free", "[pruning]") {
    const std::string dir = test::temp_dir("prune");
    const std::string trace = hand_trace(dir);
    const auto r = run_cli(sim_run(trace, dir + "/p.json") + " --prune-below 0.1");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const json rec = load_json_file(dir + "/p.json")["runs"][0];
    const json& pr = rec["pruning"];
    CHECK(pr["prune_below"].get<double>() == Approx(0.1));
    CHECK(pr["shares_from"].get<std::string>().find("trace") != std::string::npos);
    CHECK(pr["quality"].get<std::string>().find("not measured") == 0);
    REQUIRE(pr["per_layer"].size() == 2);
    CHECK(pr["per_layer"][0]["experts_kept"] == 2);
    CHECK(pr["per_layer"][0]["experts_pruned"] == json::array({2, 3}));
    CHECK(pr["per_layer"][0]["pruned_share"].get<double>() == Approx(0.125));
    CHECK(pr["per_layer"][1]["experts_kept"] == 4);
    CHECK(pr["per_layer"][1]["experts_pruned"].empty());
    // {0,2} -> {0,1} and {1,3} -> {1,0} (the most used kept expert the token has not chosen): every token of layer 0
    // takes 0 and 1, 8 of each per step, 2 steps.
    const json& load0 = rec["expert_load"]["per_layer"][0]["tokens_per_expert"];
    CHECK(load0 == json::array({16, 16, 0, 0}));
    CHECK(rec["expert_load"]["per_layer"][1]["tokens_per_expert"] == json::array({8, 8, 8, 8}));
    // One routed expert of tiny-gqa: gate, up and down, 3 x 64 x 32 parameters, in the run's expert format.
    const std::string fmt = rec["precision"]["expert_weights"];
    const double elem = fmt == "bf16" ? 2.0 : fmt == "fp32" ? 4.0 : fmt == "fp8" ? 1.0 : 0.0;
    REQUIRE(elem > 0);
    CHECK(pr["memory"]["expert_bytes"].get<double>() == Approx(3 * 64 * 32 * elem));
    CHECK(pr["memory"]["freed_bytes_layers_run"].get<double>() == Approx(2 * 3 * 64 * 32 * elem));
    CHECK(pr["memory"]["freed_bytes_model"].get<double>() == Approx(2 * 3 * 64 * 32 * elem));  // 1 per layer x 2

    // The CSV's column 55 (after expert offload's 52-54): the point's prune_below on each of its rows.
    const auto csv = run_cli("report " + dir + "/p.json --format csv");
    REQUIRE(csv.exit_code == 0);
    const auto cells = [](const std::string& line) {  // RFC 4180: a quoted cell may hold commas
        std::vector<std::string> out(1);
        bool quoted = false;
        for (char c : line) {
            if (c == '"')
                quoted = !quoted;
            else if (c == ',' && !quoted)
                out.emplace_back();
            else
                out.back().push_back(c);
        }
        return out;
    };
    const std::string header = csv.out.substr(0, csv.out.find('\n'));
    const std::string row =
        csv.out.substr(header.size() + 1, csv.out.find('\n', header.size() + 1) - header.size() - 1);
    REQUIRE(cells(header).size() == 55);
    CHECK(cells(header)[54] == "prune_below");
    REQUIRE(cells(row).size() == 55);
    CHECK(cells(row)[54] == "0.1");

    // Unpruned, the same trace loads all four experts of layer 0.
    REQUIRE(run_cli(sim_run(trace, dir + "/u.json")).exit_code == 0);
    const json u = load_json_file(dir + "/u.json")["runs"][0];
    CHECK(u["expert_load"]["per_layer"][0]["tokens_per_expert"] == json::array({14, 14, 2, 2}));
    CHECK(!u.contains("pruning"));
}

TEST_CASE("run --prune-below: refusals name the field, the value and the fix", "[pruning]") {
    const std::string dir = test::temp_dir("prune-bad");
    const std::string trace = hand_trace(dir);
    auto r = run_cli(sim_run(trace, dir + "/a.json") + " --prune-below 0.5");
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("prune_below (--prune-below)") != std::string::npos);
    CHECK(r.err.find("fewer than its top-2") != std::string::npos);
    CHECK(r.err.find("use at most 0.25") != std::string::npos);  // layer 1's second largest share (layer 0: 0.4375)
    r = run_cli(sim_run(trace, dir + "/b.json") + " --prune-below 1");
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("prune_below (--prune-below)") != std::string::npos);
    r = run_cli("run --backend sim --model " + kTiny + " --batch 4 --warmup 0 --iters 1 --prune-below 0.1 --out " +
                dir + "/c.json");
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("router") != std::string::npos);
    CHECK(r.err.find("trace:FILE") != std::string::npos);
}
