// SPDX-License-Identifier: Apache-2.0
// expert_load.balance of a run record and the load gates (--max-cv, --min-balancedness) of run and sweep, on a trace
// whose loads are known by hand.
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

// Every token picks experts {0,1} at layer 0 and {0,2} at layer 1. Per layer the experts carry [n,n,0,0] and
// [n,0,n,0]: mean/max 1/2, (max-mean)/mean 1, CV 1 (population stdev n/2 over mean n/2). Under --ep 2 (experts {0,1}
// and {2,3}) the ranks carry [2n,0] and [n,n]: balancedness (1/2 + 1)/2 = 0.75, sum of means over sum of maxima
// (n + n)/(2n + n) = 2/3, imbalance 1 and 0 (mean 0.5, worst at layer 0).
std::string hand_trace(const std::string& dir) {
    RoutingTrace t;
    t.num_layers = 2;
    t.num_tokens = 4;
    t.top_k = 2;
    t.num_experts = 4;
    t.seq_starts = {0};
    for (int64_t i = 0; i < t.num_tokens; ++i) t.topk_ids.insert(t.topk_ids.end(), {0, 1});
    for (int64_t i = 0; i < t.num_tokens; ++i) t.topk_ids.insert(t.topk_ids.end(), {0, 2});
    const std::string path = dir + "/hand.safetensors";
    write_trace(path, t);
    return path;
}

std::string sim_run(const std::string& trace, const std::string& out) {
    return "run --backend sim --model " + kTiny + " --routing trace:" + trace +
           " --routing-path per-token --batch 4 --warmup 0 --iters 2 --out " + out;
}

}  // namespace

TEST_CASE("run: expert_load.balance over experts and ranks equals the hand-computed figures", "[load_gates]") {
    const std::string dir = test::temp_dir("balance");
    const std::string trace = hand_trace(dir);
    for (const std::string record : {"full", "brief"}) {
        INFO("record " << record);
        const auto r = run_cli(sim_run(trace, dir + "/r.json") + " --ep 2 --record " + record);
        INFO(r.err);
        REQUIRE(r.exit_code == 0);
        const json b = load_json_file(dir + "/r.json")["runs"][0]["expert_load"]["balance"];
        CHECK(b["source"] == "counted");
        CHECK(b["cv_max"].get<double>() == Approx(1.0));
        CHECK(b["cv_mean"].get<double>() == Approx(1.0));
        CHECK(b["experts"]["balancedness"].get<double>() == Approx(0.5));
        CHECK(b["experts"]["sum_mean_over_sum_max"].get<double>() == Approx(0.5));
        CHECK(b["experts"]["imbalance_mean"].get<double>() == Approx(1.0));
        CHECK(b["ranks"]["num_ranks"] == 2);
        CHECK(b["ranks"]["balancedness"].get<double>() == Approx(0.75));
        CHECK(b["ranks"]["sum_mean_over_sum_max"].get<double>() == Approx(2.0 / 3.0));
        CHECK(b["ranks"]["imbalance_mean"].get<double>() == Approx(0.5));
        CHECK(b["ranks"]["imbalance_max"].get<double>() == Approx(1.0));
        CHECK(b["ranks"]["imbalance_max_layer"] == 0);
        CHECK(b["gated"] == "ranks");
        CHECK(b["ranks"]["definitions"].contains("balancedness"));
    }
    // Without expert parallelism there are no ranks: the gate reads the experts' balancedness.
    const auto r = run_cli(sim_run(trace, dir + "/one.json"));
    REQUIRE(r.exit_code == 0);
    const json b = load_json_file(dir + "/one.json")["runs"][0]["expert_load"]["balance"];
    CHECK(b["ranks"].is_null());
    CHECK(b["gated"] == "experts");
}

TEST_CASE("run: a crossed load gate is exit 1 naming the metric, its value and the limit; the report is written",
          "[load_gates]") {
    const std::string dir = test::temp_dir("gates");
    const std::string trace = hand_trace(dir);
    auto r = run_cli(sim_run(trace, dir + "/a.json") + " --ep 2 --min-balancedness 0.8");
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("balancedness over the ranks 0.75") != std::string::npos);
    CHECK(r.err.find("--min-balancedness 0.8") != std::string::npos);
    const json gates = load_json_file(dir + "/a.json")["runs"][0]["load_gates"];
    REQUIRE(gates.size() == 1);
    CHECK(gates[0]["crossed"] == true);
    CHECK(gates[0]["value"].get<double>() == Approx(0.75));

    r = run_cli(sim_run(trace, dir + "/b.json") + " --ep 2 --min-balancedness 0.7 --max-cv 1.5");
    INFO(r.err);
    CHECK(r.exit_code == 0);

    r = run_cli(sim_run(trace, dir + "/c.json") + " --max-cv 0.9");
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("cv_max 1 ") != std::string::npos);
    CHECK(r.err.find("--max-cv 0.9") != std::string::npos);

    // Out of range: exit 2 naming the field.
    r = run_cli(sim_run(trace, dir + "/d.json") + " --min-balancedness 1.5");
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("min_balancedness (--min-balancedness)") != std::string::npos);
    r = run_cli(sim_run(trace, dir + "/d.json") + " --max-cv -1");
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("max_cv (--max-cv)") != std::string::npos);
}

TEST_CASE("sweep: load gates checked at every point; exit 1 naming the points that crossed", "[load_gates]") {
    const std::string dir = test::temp_dir("sweepgates");
    const std::string trace = hand_trace(dir);
    // ep 1 gates on the experts (0.5 < 0.6), ep 2 on the ranks (0.75 >= 0.6).
    const auto r = run_cli("sweep --quiet --backend sim --model " + kTiny + " --routing trace:" + trace +
                           " --set routing_path=per-token --batch 4 --warmup 0 --iters 2 --ep 1,2 "
                           "--min-balancedness 0.6 --out " +
                           dir + "/s.json");
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("1 load gate crossing") != std::string::npos);
    CHECK(r.err.find("ep=1") != std::string::npos);
    CHECK(r.err.find("ep=2") == std::string::npos);
    CHECK(r.err.find("balancedness over the experts 0.5") != std::string::npos);
    const json runs = load_json_file(dir + "/s.json")["runs"];
    CHECK(runs.size() == 2);
}
