// SPDX-License-Identifier: Apache-2.0
// Robustness of the hardware profile reader, its sim parameters included: a malformed field, a figure outside a
// physical range, a sim efficiency or latency of 1e300 are refused by name (exit 2), never run; each failed before
// its fix.
#include "cli_helpers.hpp"
#include "error_helpers.hpp"
#include "robust_helpers.hpp"
#include "test_paths.hpp"

#include "common/json_util.hpp"
#include "config/hardware.hpp"

#include <catch2/catch.hpp>

#include <filesystem>

namespace fs = std::filesystem;
using moebench::test::config_error_of;
using moebench::test::expect_refused;
using moebench::test::expect_refused_bounded;
using moebench::test::expect_refused_one_line;
using moebench::test::read_text;
using moebench::test::run_cli;
using moebench::test::write_temp;
using moebench::test::write_temp_json;
using namespace moebench;

namespace {

const std::string kData = MOEBENCH_TEST_DATA;
const std::string kTiny = kData + "/models/tiny-gqa.json";
const std::string kMixtral = kData + "/hf-configs/mixtral-8x7b-v0.1.json";

}  // namespace

TEST_CASE("a malformed hardware profile", "[robust][cli]") {
    json hw = {{"memory_gib", 80}, {"memory_bw_gbps", "fast"}, {"bf16_tflops", 900}};
    expect_refused_one_line("plan --model " + kMixtral + " --hardware " + write_temp_json("gpu.json", hw),
                            {"memory_bw_gbps", "fast"});
    hw = {{"memory_gib", 80}, {"bf16_tflops", 900}};
    expect_refused_one_line("plan --model " + kMixtral + " --hardware " + write_temp_json("gpu.json", hw),
                            {"memory_bw_gbps"});
}

TEST_CASE("hardware figures outside a physical range are refused by name", "[robust][cli]") {
    const json base = load_json_file(std::string(MOEBENCH_SOURCE_DIR) + "/configs/hardware/h200-sxm.json");
    for (const auto& [key, value] : std::vector<std::pair<std::string, double>>{{"bf16_tflops", 1e300},
                                                                                {"memory_bw_gbps", 1e300},
                                                                                {"memory_gib", 1e300},
                                                                                {"memory_bw_gbps", 1e-300},
                                                                                {"fp8_tflops", 1e300},
                                                                                {"network_bw_gbps", 1e300},
                                                                                {"scaleup_links", 1e9},
                                                                                {"gpus_per_node", 1e9}}) {
        json hw = base;
        hw[key] = value;
        INFO(key << " = " << value);
        CHECK_THAT(config_error_of([&] { hardware_from_json(hw, "hw.json"); }),
                   Catch::Contains("hw.json." + key) && Catch::Contains("plausible"));
    }
    json off = base;
    off["fp8_tflops"] = 0;  // 0 still means "not supported"
    CHECK_NOTHROW(hardware_from_json(off, "hw.json"));
    // Every shipped profile (datasheet figures) is within the ranges.
    for (const auto& e : fs::directory_iterator(std::string(MOEBENCH_SOURCE_DIR) + "/configs/hardware")) {
        INFO(e.path());
        CHECK_NOTHROW(load_hardware(e.path().string()));
    }
    json bad = base;
    bad["bf16_tflops"] = 1e300;
    const std::string path = write_temp("hw.json", bad.dump());
    expect_refused_bounded("plan --model " + kMixtral + " --hardware " + path, {"bf16_tflops", "plausible"});
}

TEST_CASE("sim parameters of a hardware profile are bounded: 1e300 us or an efficiency of 1e-300 is exit 2",
          "[robust][sim][cli]") {
    std::string profile = read_text(std::string(MOEBENCH_SOURCE_DIR) + "/configs/hardware/h200-sxm.json");
    json hw = json::parse(profile);
    for (const auto& [key, value] : std::vector<std::pair<std::string, double>>{
             {"phase_overhead_us", 1e300}, {"a2a_latency_us", 2e6}, {"compute_efficiency", 1e-300}}) {
        json h = hw;
        h["sim"] = {{key, value}};
        const std::string path = moebench::test::write_temp("hw.json", h.dump());
        auto r = run_cli("run --backend sim --hardware " + path + " --model " + kTiny + " --json -");
        INFO(key << ": " << r.err);
        CHECK(r.exit_code == 2);
        CHECK(r.err.find("sim." + key) != std::string::npos);
    }
}

TEST_CASE("the sim backend reports a bad hardware profile, not 'not built yet'", "[robust][cli]") {
    // Before: runner.cpp caught every ConfigError of make_backend("sim") and replaced it with
    // "the sim backend is not built yet", hiding the real field.
    json hw = load_json_file(std::string(MOEBENCH_SOURCE_DIR) + "/configs/hardware/h200-sxm.json");
    hw["sim"] = {{"compute_efficiency", 5}};
    const std::string path = write_temp("bad-sim.json", hw.dump());
    expect_refused("run --backend sim --model " + kTiny + " --hardware " + path + " --out -",
                   {"compute_efficiency", "5"});
    auto r = run_cli("run --backend sim --model " + kTiny + " --hardware " + path + " --out -");
    CHECK_THAT(r.err, !Catch::Contains("not built"));
}
