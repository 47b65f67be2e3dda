// SPDX-License-Identifier: Apache-2.0
// moebench devices: what this machine has, as text and as JSON.
#include "cli_helpers.hpp"
#include "test_paths.hpp"

#include <nlohmann/json.hpp>

#include <catch2/catch.hpp>

using json = nlohmann::json;
using moebench::test::run_cli;

TEST_CASE("devices reports the CPU and host memory, and GPUs or why none", "[devices][cli]") {
    auto r = run_cli("devices --format json");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    json j = json::parse(r.out);
    CHECK(j.at("schema") == "moebench.devices/1");
    CHECK(j.at("cpu").at("logical_cpus_online").get<int64_t>() >= 1);
    CHECK(j.at("memory").at("total_bytes").get<int64_t>() > 0);
    const json& g = j.at("gpus");
    CHECK(g.at("available").is_boolean());
    if (!g.at("available").get<bool>()) CHECK(!g.at("reason").get<std::string>().empty());
    auto t = run_cli("devices");
    CHECK(t.exit_code == 0);
    CHECK_THAT(t.out, Catch::Contains("GPUs:") && Catch::Contains("CPU:") && Catch::Contains("Memory:"));
}
