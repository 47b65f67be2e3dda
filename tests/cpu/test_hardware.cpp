// SPDX-License-Identifier: Apache-2.0
// Hardware profiles: every shipped profile loads; figures match the datasheets (dense, not sparse); bad files are refused.
#include "common/error.hpp"
#include "common/paths.hpp"
#include "config/hardware.hpp"
#include "error_helpers.hpp"

#include <catch2/catch.hpp>

#include <algorithm>

using namespace moebench;

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

json minimal_profile() {
    return json{{"name", "toy"}, {"memory_gib", 1}, {"memory_bw_gbps", 1000}, {"bf16_tflops", 100}};
}
std::string error_of(const json& j) {
    return test::config_error_of([&] { hardware_from_json(j, "hw.json"); });
}
}  // namespace

TEST_CASE("all shipped hardware profiles load with sane figures", "[hardware]") {
    auto names = list_configs("hardware");
    for (const char* want : {"a100-sxm-80gb", "h100-sxm", "h200-sxm", "b200", "mi300x"})
        CHECK(std::find(names.begin(), names.end(), want) != names.end());
    for (const auto& n : names) {
        INFO(n);
        HardwareProfile h = load_hardware(n);
        CHECK(h.name == n);
        CHECK(h.memory_bytes > 16 * kGiB);
        CHECK(h.memory_bw_bytes_per_s > 1e12);
        CHECK(h.bf16_flops > 1e14);
        CHECK(h.fp32_flops > 0);
        CHECK(h.fp32_flops < h.bf16_flops);
        // Where fp8 exists its dense peak is twice bf16 on every one of these parts.
        if (h.fp8_flops > 0) CHECK(h.fp8_flops == Approx(2 * h.bf16_flops).epsilon(0.001));
        CHECK(h.scaleup_bw_bytes_per_s > h.pcie_bw_bytes_per_s);
        CHECK(h.scaleup_links > 0);
        CHECK(h.network_bw_bytes_per_s > 0);
        CHECK(h.gpus_per_node == 8);
        CHECK(h.comment.find("datasheet") != std::string::npos);
    }
}

TEST_CASE("profiles carry the vendors' dense figures", "[hardware]") {
    // NVIDIA H200 datasheet: 4.8 TB/s, BF16 1979 TFLOPS *with sparsity* -> 989.4 dense, NVLink 900 GB/s bidirectional.
    HardwareProfile h200 = load_hardware("h200-sxm");
    CHECK(h200.memory_bw_bytes_per_s == Approx(4.8e12));
    CHECK(h200.bf16_flops == Approx(989.4e12));
    CHECK(h200.fp8_flops == Approx(1978.9e12));
    CHECK(h200.scaleup_bw_bytes_per_s == Approx(450e9));
    CHECK(h200.memory_bytes / kGiB == Approx(140.4));
    // A100 datasheet: 2039 GB/s, BF16 312 TFLOPS dense (624 sparse), no FP8, 600 GB/s NVLink bidirectional.
    HardwareProfile a100 = load_hardware("a100-sxm-80gb");
    CHECK(a100.memory_bw_bytes_per_s == Approx(2039e9));
    CHECK(a100.bf16_flops == Approx(312e12));
    CHECK(a100.fp8_flops == 0);
    CHECK(a100.scaleup_bw_bytes_per_s == Approx(300e9));
    CHECK(a100.memory_bytes == Approx(80 * kGiB));
    // MI300X data sheet: 5.3 TB/s, BF16 1307.4 TFLOPS dense.
    HardwareProfile mi = load_hardware("mi300x");
    CHECK(mi.memory_bw_bytes_per_s == Approx(5.3e12));
    CHECK(mi.bf16_flops == Approx(1307.4e12));
    // HGX B200: 8 TB/s, BF16 2.25 PFLOPS dense, NVLink 5 1.8 TB/s bidirectional.
    HardwareProfile b200 = load_hardware("b200");
    CHECK(b200.bf16_flops == Approx(2250e12));
    CHECK(b200.scaleup_bw_bytes_per_s == Approx(900e9));
}

TEST_CASE("hardware JSON units convert to SI and round-trip", "[hardware]") {
    json j = minimal_profile();
    HardwareProfile h = hardware_from_json(j, "toy.json");
    CHECK(h.memory_bytes == 1 * kGiB);
    CHECK(h.memory_bw_bytes_per_s == 1e12);
    CHECK(h.bf16_flops == 1e14);
    CHECK(h.fp8_flops == 0);
    CHECK(h.gpus_per_node == 8);
    j.erase("memory_gib");
    j["memory_gb"] = 80;
    CHECK(hardware_from_json(j, "toy.json").memory_bytes == 80e9);

    HardwareProfile h200 = load_hardware("h200-sxm");
    HardwareProfile back = hardware_from_json(hardware_to_json(h200), "x.json");
    CHECK(back.name == h200.name);
    CHECK(back.memory_bytes == Approx(h200.memory_bytes));
    CHECK(back.memory_bw_bytes_per_s == Approx(h200.memory_bw_bytes_per_s));
    CHECK(back.fp8_flops == Approx(h200.fp8_flops));
    CHECK(back.scaleup_links == h200.scaleup_links);
    CHECK(back.network_bw_bytes_per_s == Approx(h200.network_bw_bytes_per_s));
}

TEST_CASE("bad hardware profiles are refused naming the field", "[hardware][bad_input]") {
    json j = minimal_profile();
    j.erase("memory_bw_gbps");
    CHECK_THAT(error_of(j), Catch::Contains("memory_bw_gbps") && Catch::Contains("missing"));

    j = minimal_profile();
    j["bf16_tflops"] = "fast";
    CHECK_THAT(error_of(j), Catch::Contains("bf16_tflops") && Catch::Contains("\"fast\""));

    j = minimal_profile();
    j["memory_gib"] = -4;
    CHECK_THAT(error_of(j), Catch::Contains("memory_gib") && Catch::Contains("-4"));

    j = minimal_profile();
    j["memory_bw_gbs"] = 3;  // typo of a unit suffix
    CHECK_THAT(error_of(j), Catch::Contains("memory_bw_gbs") && Catch::Contains("memory_bw_gbps"));

    j = minimal_profile();
    j["memory_gb"] = 80;  // two capacities
    CHECK_THAT(error_of(j), Catch::Contains("memory"));

    j = minimal_profile();
    j["fp8_tflops"] = -1;
    CHECK_THAT(error_of(j), Catch::Contains("fp8_tflops"));

    CHECK_THAT(error_of(json::array()), Catch::Contains("object"));
}

TEST_CASE("unknown hardware names list the available profiles", "[hardware][bad_input]") {
    try {
        load_hardware("h900-imaginary");
        FAIL("expected ConfigError");
    } catch (const ConfigError& e) {
        std::string msg = e.what();
        CHECK_THAT(msg, Catch::Contains("--hardware") && Catch::Contains("h900-imaginary") &&
                            Catch::Contains("h200-sxm") && Catch::Contains("mi300x"));
    }
}
