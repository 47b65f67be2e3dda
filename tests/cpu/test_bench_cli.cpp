// SPDX-License-Identifier: Apache-2.0
// 'moebench bench moe' end to end on a tiny model: the JSON's floor and ratios follow from its own measured
// ceilings and counted work, and the ratio against the read passes next to each iteration is never above the
// ratio against the run's best pass (a pass next to an iteration is one of the passes the best is taken over).
#include "cli_helpers.hpp"
#include "report/formats.hpp"
#include "test_paths.hpp"

#include <nlohmann/json.hpp>

#include <catch2/catch.hpp>

#include <algorithm>

using moebench::test::run_cli;
using nlohmann::json;

namespace {

const std::string kTiny = std::string(MOEBENCH_TEST_DATA) + "/models/tiny-gqa.json";

json bench_json(const std::string& extra) {
    const auto r =
        run_cli("bench moe --model " + kTiny + " --batch 4 --iters 3 --warmup 1 --threads 2 --format json " + extra);
    INFO("stderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    return json::parse(r.out);
}

}  // namespace

TEST_CASE("bench moe: floor and ratios from the run's own ceilings and counted work", "[bench_cli]") {
    const json j = bench_json("");
    const double bw = j["ceilings"]["read_bandwidth"]["value"].get<double>();
    const double gemm = j["ceilings"]["sgemm"]["value"].get<double>();
    const double bytes = j["work"]["weight_bytes"].get<double>(), flops = j["work"]["flops"].get<double>();
    REQUIRE(bw > 0);
    REQUIRE(gemm > 0);
    REQUIRE(bytes > 0);
    const double floor_us = j["floor"]["floor_us"].get<double>();
    CHECK(floor_us == Approx(std::max(bytes / bw, flops / gemm) * 1e6));
    const double p50_us = j["time"]["block"]["p50_us"].get<double>();
    CHECK(j["ratio_to_floor"]["p50"].get<double>() == Approx(p50_us / floor_us));

    const json& adj = j["ratio_to_floor"]["adjacent_passes"];
    REQUIRE(adj.is_object());
    const double adj_p50 = adj["p50"].get<double>(), adj_min = adj["min"].get<double>();
    CHECK(adj_min > 0);
    CHECK(adj_min <= adj_p50);
    CHECK(adj_p50 <= j["ratio_to_floor"]["p50"].get<double>() * (1 + 1e-9));
    CHECK(adj_min <= j["ratio_to_floor"]["min"].get<double>() * (1 + 1e-9));
    CHECK(adj["read_bandwidth_p50"].get<double>() > 0);
    CHECK(adj["read_bandwidth_p50"].get<double>() <= bw * (1 + 1e-9));
}

TEST_CASE("bench moe --warm-cache: no evicting passes, so no ratio against them", "[bench_cli]") {
    const json j = bench_json("--warm-cache");
    CHECK(j["cache"] == "warm");
    CHECK_FALSE(j["ratio_to_floor"].contains("adjacent_passes"));
    CHECK(j["ratio_to_floor"]["p50"].get<double>() > 0);
}

TEST_CASE("bench moe: the terminal view is a view of the document, then where the files went", "[bench_cli]") {
    const std::string dir = moebench::test::temp_dir("bench_view");
    const std::string out = dir + "/b.json", routing = dir + "/r.safetensors";
    const auto r = run_cli("bench moe --model " + kTiny + " --batch 4 --iters 2 --warmup 0 --threads 1 --out " + out +
                           " --dump-routing " + routing);
    INFO("stderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    const json doc = json::parse(moebench::test::read_text(out));
    CHECK(doc["schema"] == "moebench.bench_moe/1");
    CHECK(r.out == moebench::render_view(doc, moebench::DocKind::bench_moe, "text") + "json: " + out +
                       "\nrouting: " + routing + "\n");
    // The phases in the engine's order, each with its share of the block.
    const std::string view = moebench::render_view(doc, moebench::DocKind::bench_moe, "text");
    CHECK(view.find("router_gemm") < view.find("expert_up"));
    CHECK(view.find("expert_up") < view.find("unpermute_reduce"));
    CHECK(view.find("cold cache") != std::string::npos);
}

TEST_CASE("bench a2a in one process is refused, naming mpirun", "[bench_cli]") {
    const auto r = run_cli("bench a2a --model " + kTiny);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("one process") && Catch::Contains("mpirun -np N"));
}
