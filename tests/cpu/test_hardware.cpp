// SPDX-License-Identifier: Apache-2.0
// Hardware profiles: every shipped profile loads; figures match the datasheets (dense, not sparse); bad files are
// refused; the field table reads every profile as a straightforward reading of its file does, and the docs hold its
// tables.
#include "backends/sim/sim_backend.hpp"
#include "cli_helpers.hpp"
#include "common/error.hpp"
#include "common/paths.hpp"
#include "common/read_file.hpp"
#include "config/hardware.hpp"
#include "config/hardware_fields.hpp"
#include "error_helpers.hpp"
#include "test_paths.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <set>

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
    for (const char* want :
         {"a100-sxm-80gb", "h100-sxm", "h200-sxm", "h800", "h20", "b200", "b300", "gb200", "gb300", "mi300x", "mi355x"})
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
        // Where fp8 exists its dense peak is twice bf16 on every one of these parts; fp4, where it exists, is 2x
        // (Blackwell, CDNA4) to about 3x (Blackwell Ultra: 14 / 4.5 PFLOPS) fp8.
        if (h.fp8_flops > 0) CHECK(h.fp8_flops == Approx(2 * h.bf16_flops).epsilon(0.001));
        if (h.fp4_flops > 0) {
            CHECK(h.fp4_flops >= 2 * h.fp8_flops);
            CHECK(h.fp4_flops <= 3.5 * h.fp8_flops);
        }
        CHECK(h.scaleup_bw_bytes_per_s > h.pcie_bw_bytes_per_s);
        // One 8-GPU board, or an NVL72 rack as one NVLink domain.
        CHECK((h.gpus_per_node == 8 || h.gpus_per_node == 72));
        // The figures are dense, and each file says where they come from.
        CHECK(h.comment.find("ense (no") != std::string::npos);
        CHECK(h.comment.find("Sources: ") != std::string::npos);
        if (h.price_per_gpu_hour > 0) CHECK_FALSE(h.price_source.empty());
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
    // HGX B200: 8 TB/s, BF16 2.25 PFLOPS dense, NVLink 5 1.8 TB/s bidirectional, FP4 9 PFLOPS dense, 1000 W TGP.
    HardwareProfile b200 = load_hardware("b200");
    CHECK(b200.bf16_flops == Approx(2250e12));
    CHECK(b200.scaleup_bw_bytes_per_s == Approx(900e9));
    CHECK(b200.fp4_flops == Approx(9000e12));
    CHECK(b200.tdp_w == 1000);
    CHECK(load_hardware("h100-sxm").fp4_flops == 0);  // Hopper has no FP4 units
}

TEST_CASE("profiles of what people deploy carry the sourced figures", "[hardware]") {
    // Per the sources each file lists (dense figures; scale-up per direction; memory as the driver reports it).
    // H800: H100 compute, NVLink cut to 400 GB/s bidirectional; 400 Gb/s InfiniBand per GPU.
    const HardwareProfile h800 = load_hardware("h800");
    CHECK(h800.bf16_flops == Approx(989.4e12));
    CHECK(h800.scaleup_bw_bytes_per_s == Approx(200e9));
    CHECK(h800.network_bw_bytes_per_s == Approx(50e9));
    // H20: 148 TFLOPS BF16, 296 FP8, 96 GB at 4.0 TB/s (nvidia-smi 97871 MiB), full NVLink 4.
    const HardwareProfile h20 = load_hardware("h20");
    CHECK(h20.bf16_flops == Approx(148e12));
    CHECK(h20.fp8_flops == Approx(296e12));
    CHECK(h20.memory_bw_bytes_per_s == Approx(4.0e12));
    CHECK(h20.memory_bytes / kGiB == Approx(97871.0 / 1024).epsilon(0.001));
    CHECK(h20.scaleup_bw_bytes_per_s == Approx(450e9));
    // B300: FP4 14 PFLOPS dense (NVIDIA's modeler), 800 Gb/s per GPU, nvidia-smi 275040 MiB.
    const HardwareProfile b300 = load_hardware("b300");
    CHECK(b300.fp4_flops == Approx(14000e12));
    CHECK(b300.network_bw_bytes_per_s == Approx(100e9));
    CHECK(b300.memory_bytes / kGiB == Approx(275040.0 / 1024).epsilon(0.001));
    // GB200 / GB300 NVL72: 72 GPUs in one NVLink domain; FP4 10 and 15 PFLOPS dense; 1.2 and 1.4 kW per GPU.
    const HardwareProfile gb200 = load_hardware("gb200"), gb300 = load_hardware("gb300");
    CHECK(gb200.gpus_per_node == 72);
    CHECK(gb300.gpus_per_node == 72);
    CHECK(gb200.bf16_flops == Approx(2500e12));
    CHECK(gb200.fp4_flops == Approx(10000e12));
    CHECK(gb300.fp4_flops == Approx(15000e12));
    CHECK(gb200.tdp_w == 1200);
    CHECK(gb300.tdp_w == 1400);
    // MI355X: BF16 2.5 PFLOPS, MXFP4 10.1 PFLOPS dense; 7 x 76.5 GB/s Infinity Fabric; rocm-smi 309220868096 B.
    const HardwareProfile mi355 = load_hardware("mi355x");
    CHECK(mi355.fp4_flops == Approx(10100e12));
    CHECK(mi355.scaleup_bw_bytes_per_s == Approx(7 * 76.5e9));
    CHECK(mi355.memory_bytes == 309220868096.0);
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
    // FP4 peak, board power and a price with its source, in their units.
    j["fp4_tflops"] = 9000;
    j["tdp_w"] = 1000;
    j["price_per_gpu_hour"] = 2.9;
    j["price_source"] = "a dated quote";
    const HardwareProfile priced = hardware_from_json(j, "toy.json");
    CHECK(priced.fp4_flops == 9e15);
    CHECK(priced.tdp_w == 1000);
    CHECK(priced.price_per_gpu_hour == 2.9);
    const json rec = hardware_to_json(priced);
    CHECK(rec.at("fp4_tflops") == 9000.0);
    CHECK(rec.at("price_source") == "a dated quote");

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

    j = minimal_profile();
    j["fp4_tflops"] = 1e9;  // a unit slip (FLOP/s given as TFLOP/s)
    CHECK_THAT(error_of(j), Catch::Contains("fp4_tflops") && Catch::Contains("plausible"));

    j = minimal_profile();
    j["price_per_gpu_hour"] = 2.5;  // a price without where and when it was quoted
    CHECK_THAT(error_of(j), Catch::Contains("price_source") && Catch::Contains("price_per_gpu_hour"));

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

namespace {

// The hardware block a straightforward reading of a profile file gives: every figure in its file's unit (memory in
// bytes), absent figures 0, absent counts their defaults, the sources appended to the comment.
json reference_hardware_block(const json& f, const std::string& stem) {
    auto num = [&](const char* k) { return f.contains(k) ? f.at(k).get<double>() : 0.0; };
    std::string comment = f.value("comment", std::string());
    for (const auto& s : f.value("sources", json::array()))
        comment += (comment.empty() ? "" : " Sources: ") + s.get<std::string>();
    const double memory = f.contains("memory_gib")  ? num("memory_gib") * kGiB
                          : f.contains("memory_gb") ? num("memory_gb") * 1e9
                                                    : num("memory_bytes");
    const std::string name = f.value("name", stem);
    return json{{"schema", "moebench.hardware/1"},
                {"name", name},
                {"display_name", f.value("display_name", name)},
                {"comment", comment},
                {"memory_bytes", memory},
                {"memory_bw_gbps", num("memory_bw_gbps")},
                {"bf16_tflops", num("bf16_tflops")},
                {"fp8_tflops", num("fp8_tflops")},
                {"fp4_tflops", num("fp4_tflops")},
                {"fp32_tflops", num("fp32_tflops")},
                {"int4_tops", num("int4_tops")},
                {"scaleup_name", f.value("scaleup_name", std::string())},
                {"scaleup_bw_gbps", num("scaleup_bw_gbps")},
                {"scaleup_links", f.value("scaleup_links", int64_t{0})},
                {"pcie_bw_gbps", num("pcie_bw_gbps")},
                {"network_bw_gbps", num("network_bw_gbps")},
                {"gpus_per_node", f.value("gpus_per_node", int64_t{8})},
                {"tdp_w", num("tdp_w")},
                {"price_per_gpu_hour", num("price_per_gpu_hour")},
                {"price_source", f.value("price_source", std::string())}};
}

// The lines between a doc's generated-table markers, without the blank lines around the table.
std::string generated_block(const std::string& doc, const std::string& name) {
    const std::string begin = "<!-- " + name + ": generated by", end = "<!-- end " + name + " -->";
    const size_t b = doc.find(begin), e = doc.find(end);
    if (b == std::string::npos || e == std::string::npos || e < b) return "(no " + name + " markers)";
    std::string block = doc.substr(doc.find('\n', b) + 1, e - doc.find('\n', b) - 1);
    while (!block.empty() && block.front() == '\n') block.erase(0, 1);
    while (block.size() > 1 && block[block.size() - 1] == '\n' && block[block.size() - 2] == '\n') block.pop_back();
    return block;
}

}  // namespace

TEST_CASE("hardware fields: every shipped profile reads as a straightforward reading of its file", "[hardware]") {
    namespace fs = std::filesystem;
    int profiles = 0;
    for (const auto& e : fs::directory_iterator(fs::path(MOEBENCH_SOURCE_DIR) / "configs" / "hardware")) {
        INFO(e.path());
        const json file = load_json_file(e.path().string(), kMaxConfigBytes);
        const json want = reference_hardware_block(file, e.path().stem().string());
        const json got = hardware_to_json(load_hardware(e.path().string()));
        for (const auto& [key, value] : want.items()) {
            INFO(key);
            REQUIRE(got.contains(key));
            if (value.is_number_float())
                CHECK(got.at(key).get<double>() == Approx(value.get<double>()));
            else
                CHECK(got.at(key) == value);
        }
        // A field added since (a row of the table) that the file does not give: its default.
        for (const auto& [key, value] : got.items()) {
            if (want.contains(key)) continue;
            INFO(key);
            const HardwareField* f = find_hardware_field(key);
            REQUIRE(f);
            CHECK_FALSE(file.contains(key));
            CHECK((value == 0 || value == "" || value == f->default_count));
        }
        ++profiles;
    }
    CHECK(profiles >= 5);
}

TEST_CASE("hardware fields: one row per key, each filling a member of its own kind", "[hardware]") {
    std::set<std::string> keys;
    std::vector<HardwareMember> recorded;
    for (const HardwareField& f : hardware_fields()) {
        INFO(f.key);
        CHECK(keys.insert(f.key).second);
        CHECK(find_hardware_field(f.key) == &f);
        CHECK_FALSE(f.meaning.empty());
        switch (f.kind) {
            case HardwareFieldKind::number:
                CHECK(std::holds_alternative<double HardwareProfile::*>(f.member));
                CHECK((f.lo > 0 && f.lo < f.hi && f.si_scale > 0));
                break;
            case HardwareFieldKind::count:
                CHECK(std::holds_alternative<int64_t HardwareProfile::*>(f.member));
                CHECK((f.lo >= 0 && f.lo < f.hi && f.default_count >= f.lo && f.default_count <= f.hi));
                break;
            case HardwareFieldKind::text:
            case HardwareFieldKind::text_list:
                CHECK(std::holds_alternative<std::string HardwareProfile::*>(f.member));
                break;
            case HardwareFieldKind::schema:
            case HardwareFieldKind::object: CHECK(std::holds_alternative<std::monostate>(f.member)); break;
        }
        // The report's hardware block writes each member once (memory: as memory_bytes only).
        if (f.recorded && !std::holds_alternative<std::monostate>(f.member)) {
            CHECK(std::find(recorded.begin(), recorded.end(), f.member) == recorded.end());
            recorded.push_back(f.member);
        }
    }
    CHECK(find_hardware_field("memory_bw_gbs") == nullptr);
}

TEST_CASE("hardware fields: memory is given exactly one way", "[hardware][bad_input]") {
    json j = minimal_profile();
    j.erase("memory_gib");
    CHECK_THAT(error_of(j), Catch::Contains("hw.json.memory_gib") && Catch::Contains("missing") &&
                                Catch::Contains("memory_gib (2^30 B), memory_gb (10^9 B) or memory_bytes (B)"));
    j["memory_bytes"] = 80e9;
    CHECK(hardware_from_json(j, "hw.json").memory_bytes == 80e9);
    CHECK(hardware_to_json(hardware_from_json(j, "hw.json")).at("memory_bytes") == 80e9);
    j["memory_gb"] = 80;
    CHECK_THAT(error_of(j), Catch::Contains("memory_gib") && Catch::Contains("given twice"));
}

TEST_CASE("hardware fields: the docs hold the tables the code reads by", "[hardware][docs]") {
    const std::string dir = std::string(MOEBENCH_SOURCE_DIR) + "/docs/";
    INFO("a table changed: rewrite the docs' copies with scripts/field_docs.py build/moebench");
    CHECK(generated_block(test::read_text(dir + "hardware-schema.md"), "hardware-fields") ==
          hardware_fields_table("md"));
    CHECK(generated_block(test::read_text(dir + "sim-backend.md"), "sim-fields") == sim_fields_table("md"));
}

TEST_CASE("hardware fields: moebench devices --hardware-fields lists them", "[hardware][cli]") {
    auto r = test::run_cli("devices --hardware-fields");
    CHECK(r.exit_code == 0);
    for (const HardwareField& f : hardware_fields()) CHECK_THAT(r.out, Catch::Contains(f.key));
    CHECK_THAT(r.out, Catch::Contains("compute_efficiency") && Catch::Contains("0.001 to 200000, or 0"));
    r = test::run_cli("devices --hardware-fields --format md");
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains(hardware_fields_table("md")) && Catch::Contains(sim_fields_table("md")));
    r = test::run_cli("devices --hardware-fields --format json");
    CHECK(r.exit_code == 0);
    CHECK(json::parse(r.out).at("profile").size() == hardware_fields().size());
    r = test::run_cli("devices --hardware-fields --format yaml");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("--format") && Catch::Contains("yaml") && Catch::Contains("md"));
    r = test::run_cli("devices --hardware-fields --measure");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("--measure") && Catch::Contains("--hardware-fields"));
}
