// SPDX-License-Identifier: Apache-2.0
// Hardware profiles: reads configs/hardware/*.json (units in the field names, schema in docs/hardware-schema.md)
// and converts them to the SI HardwareProfile (bytes, bytes/s, FLOP/s).
#include "config/hardware.hpp"

#include "common/error.hpp"
#include "common/paths.hpp"

#include <cmath>
#include <filesystem>

namespace moebench {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kGB = 1e9;       // GB/s fields are decimal gigabytes per second (not gigabits)
constexpr double kTera = 1e12;

const char* const kKnownKeys[] = {
    "schema", "name", "display_name", "comment", "sources", "memory_gib", "memory_gb", "memory_bytes",
    "memory_bw_gbps", "bf16_tflops", "fp8_tflops", "fp32_tflops", "int4_tops", "scaleup_name", "scaleup_bw_gbps",
    "scaleup_links", "pcie_bw_gbps", "network_bw_gbps", "gpus_per_node",
    "sim"};  // "sim": optional efficiency settings read by the sim backend (docs/sim-backend.md)

std::string known_keys_list() {
    std::string s;
    for (const char* k : kKnownKeys) s += (s.empty() ? "" : ", ") + std::string(k);
    return s;
}

// The physically plausible range of each figure, in the field's own unit: far beyond any accelerator announced as of
// 2025 (H200: 4.8 TB/s, B200: 2.25 PFLOP/s dense bf16, NVLink 5: 900 GB/s per direction), yet bounded, so that a
// typo such as 1e300 is refused by name instead of turning every modeled time into 0 or inf.
struct Range {
    const char* key;
    double lo, hi;
};
constexpr Range kRanges[] = {
    {"memory_gib", 0.001, 65536},         {"memory_gb", 0.001, 70000},       {"memory_bytes", 1e6, 7e13},
    {"memory_bw_gbps", 0.1, 100000},      {"bf16_tflops", 0.001, 100000},    {"fp8_tflops", 0.001, 200000},
    {"fp32_tflops", 0.001, 100000},       {"int4_tops", 0.001, 400000},      {"scaleup_bw_gbps", 0.01, 100000},
    {"pcie_bw_gbps", 0.01, 10000},        {"network_bw_gbps", 0.001, 10000},
};

Range range_of(const std::string& key) {
    for (const Range& rg : kRanges)
        if (key == rg.key) return rg;
    return {"", 0, 0};
}

[[noreturn]] void out_of_range(const JsonReader& r, const std::string& key, const std::string& what) {
    const Range rg = range_of(key);
    config_error(r.field(key), fmt::format("{} (plausible: {:g} to {:g})", what, rg.lo, rg.hi),
                 json_brief(r.raw().at(key)), "use the datasheet value in the unit the field's name gives");
}

// A required figure: a finite number within its plausible range.
double positive_number(const JsonReader& r, const std::string& key) {
    const double v = r.req_double(key);
    const Range rg = range_of(key);
    if (!std::isfinite(v) || v <= 0) out_of_range(r, key, "must be a positive number");
    if (v < rg.lo || v > rg.hi) out_of_range(r, key, "is outside the physically plausible range");
    return v;
}
// An optional rate: 0 (or absent) means "not supported"; otherwise within its plausible range.
double nonneg_number(const JsonReader& r, const std::string& key) {
    const double v = r.opt_double(key, 0.0);
    const Range rg = range_of(key);
    if (!std::isfinite(v) || v < 0)
        config_error(r.field(key), "must not be negative", json_brief(r.raw().at(key)),
                     "use the datasheet value, or 0 when the GPU does not support it");
    if (v != 0 && (v < rg.lo || v > rg.hi)) out_of_range(r, key, "is outside the physically plausible range (or 0)");
    return v;
}

}  // namespace

HardwareProfile hardware_from_json(const json& j, const std::string& path) {
    JsonReader r(j, path);
    // Unknown keys are almost always typos of a unit suffix ("memory_bw_gbs"): refuse them rather than ignore.
    for (const auto& [key, value] : j.items()) {
        bool known = false;
        for (const char* k : kKnownKeys) known = known || key == k;
        if (!known) config_error(r.field(key), "unknown hardware field", key, "use one of: " + known_keys_list());
    }
    if (r.has("schema") && r.req_string("schema") != "moebench.hardware/1")
        config_error(r.field("schema"), "unsupported schema", r.req_string("schema"), "use \"moebench.hardware/1\"");

    HardwareProfile h;
    h.source = path;
    std::string stem = std::filesystem::path(path).stem().string();
    h.name = r.opt_string("name", stem.empty() ? "custom" : stem);
    h.display_name = r.opt_string("display_name", h.name);
    h.comment = r.opt_string("comment", "");
    if (r.has("sources")) {
        const json& s = j.at("sources");
        if (!s.is_array()) config_error(r.field("sources"), "must be a list of strings", json_brief(s), "");
        for (const auto& e : s) {
            if (!e.is_string()) config_error(r.field("sources"), "must be a list of strings", json_brief(e), "");
            h.comment += (h.comment.empty() ? "" : " Sources: ") + e.get<std::string>();
        }
    }

    int num_memory = int(r.has("memory_gib")) + int(r.has("memory_gb")) + int(r.has("memory_bytes"));
    if (num_memory != 1)
        config_error(r.field("memory_gib"), num_memory == 0 ? "required field is missing" : "memory given twice",
                     "", "give exactly one of memory_gib (2^30 bytes), memory_gb (10^9 bytes) or memory_bytes");
    if (r.has("memory_gib")) h.memory_bytes = positive_number(r, "memory_gib") * kGiB;
    if (r.has("memory_gb")) h.memory_bytes = positive_number(r, "memory_gb") * kGB;
    if (r.has("memory_bytes")) h.memory_bytes = positive_number(r, "memory_bytes");

    h.memory_bw_bytes_per_s = positive_number(r, "memory_bw_gbps") * kGB;
    h.bf16_flops = positive_number(r, "bf16_tflops") * kTera;
    h.fp8_flops = nonneg_number(r, "fp8_tflops") * kTera;
    h.fp32_flops = nonneg_number(r, "fp32_tflops") * kTera;
    h.int4_flops = nonneg_number(r, "int4_tops") * kTera;
    h.scaleup_name = r.opt_string("scaleup_name", "");
    h.scaleup_bw_bytes_per_s = nonneg_number(r, "scaleup_bw_gbps") * kGB;
    h.scaleup_links = r.opt_nonneg("scaleup_links", 0);
    if (h.scaleup_links > 1024)
        config_error(r.field("scaleup_links"), "is outside the physically plausible range (0 to 1024)",
                     std::to_string(h.scaleup_links), "use the number of scale-up links per GPU");
    h.pcie_bw_bytes_per_s = nonneg_number(r, "pcie_bw_gbps") * kGB;
    h.network_bw_bytes_per_s = nonneg_number(r, "network_bw_gbps") * kGB;
    h.gpus_per_node = r.has("gpus_per_node") ? r.req_positive("gpus_per_node") : 8;
    if (h.gpus_per_node > 4096)
        config_error(r.field("gpus_per_node"), "is outside the physically plausible range (1 to 4096)",
                     std::to_string(h.gpus_per_node), "use the GPUs that share one scale-up domain (e.g. 8, or 72)");
    return h;
}

HardwareProfile load_hardware(const std::string& name_or_path) {
    std::string path = resolve_config("hardware", name_or_path, "--hardware");
    return hardware_from_json(load_json_file(path, kMaxConfigBytes), path);
}

json hardware_to_json(const HardwareProfile& h) {
    return json{{"schema", "moebench.hardware/1"},
                {"name", h.name},
                {"display_name", h.display_name},
                {"comment", h.comment},
                {"memory_bytes", h.memory_bytes},
                {"memory_bw_gbps", h.memory_bw_bytes_per_s / kGB},
                {"bf16_tflops", h.bf16_flops / kTera},
                {"fp8_tflops", h.fp8_flops / kTera},
                {"fp32_tflops", h.fp32_flops / kTera},
                {"int4_tops", h.int4_flops / kTera},
                {"scaleup_name", h.scaleup_name},
                {"scaleup_bw_gbps", h.scaleup_bw_bytes_per_s / kGB},
                {"scaleup_links", h.scaleup_links},
                {"pcie_bw_gbps", h.pcie_bw_bytes_per_s / kGB},
                {"network_bw_gbps", h.network_bw_bytes_per_s / kGB},
                {"gpus_per_node", h.gpus_per_node}};
}

}  // namespace moebench
