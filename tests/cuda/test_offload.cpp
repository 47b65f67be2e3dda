// SPDX-License-Identifier: Apache-2.0
// Expert offload on the cuda backend: expert_fetch copies the missed experts from pinned host memory on a copy
// stream (runs only where a GPU is: the runner exits 77, skipped, without one).
#include "cpu/cli_helpers.hpp"
#include "test_paths.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using moebench::test::run_cli;

TEST_CASE("cuda expert offload: expert_fetch is timed and its copies counted", "[gpu][offload]") {
    auto r = run_cli(
        "run --backend cuda --model olmoe-1b-7b --layers 1 --batch 1 --iters 5 --warmup 1 "
        "--resident-experts 8 --out -");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto run = nlohmann::json::parse(r.out).at("runs").at(0);
    REQUIRE(run.at("latency").at("phases").contains("expert_fetch"));
    const auto& off = run.at("backend_info").at("expert_offload");
    CHECK(off.at("expert_bytes") == 3 * 2048 * 1024 * 2);  // OLMoE expert in bf16
    CHECK(off.at("fetched_experts").get<int64_t>() > 0);
    CHECK(run.at("latency").at("phases").at("expert_fetch").at("max_us").get<double>() > 0);
}
