// SPDX-License-Identifier: Apache-2.0
// The README's examples run as written.
#include "cli_helpers.hpp"
#include "robust_helpers.hpp"
#include "test_paths.hpp"

#include <nlohmann/json.hpp>

#include <catch2/catch.hpp>

using moebench::test::expect_refused;
using moebench::test::run_cli;
using json = nlohmann::json;

TEST_CASE("the README's plan example runs as written", "[docs]") {
    // The README used --ep 8 in bf16, which the plan refuses (DeepSeek-V3 needs 16 H200s in bf16).
    auto r = run_cli("plan --model deepseek-v3 --hardware h200-sxm --dtype fp8 --ep 8 --batch 64 --context 8192");
    INFO(r.err);
    CHECK(r.exit_code == 0);
    expect_refused("plan --model deepseek-v3 --hardware h200-sxm --ep 8 --batch 64 --context 8192", {"--ep", "16"});
}

TEST_CASE("the README's deploy examples run as written", "[docs][deploy]") {
    // One layout: DeepSeek-V3 in fp8-block on 8 H200s (EP 8) fits at 64 requests in flight.
    auto one = run_cli(
        "deploy --model deepseek-v3 --hardware h200-sxm --dtype fp8-block --ep 8 --isl 1024 --osl 1024 "
        "--concurrency 64");
    INFO(one.err);
    REQUIRE(one.exit_code == 0);
    CHECK(one.out.find("8 x h200-sxm") != std::string::npos);
    CHECK(one.out.find("(fits)") != std::string::npos);
    // The search, its HTML view written by -o (here into a temporary folder).
    const std::string html = moebench::test::temp_dir("readme") + "/frontier.html";
    auto search = run_cli(
        "deploy --model deepseek-v3 --dtype fp8-block --isl 1024 --osl 1024 --gpus 8,16 "
        "--hardware h100-sxm,h200-sxm,b200 --tpot-ms 50 --format html -o " +
        html);
    INFO(search.err);
    REQUIRE(search.exit_code == 0);
    const std::string page = moebench::test::read_text(html);
    CHECK(page.find("<svg") != std::string::npos);
    for (const char* hw : {"h100-sxm", "h200-sxm", "b200"}) CHECK(page.find(hw) != std::string::npos);
}
