// SPDX-License-Identifier: Apache-2.0
// The terminal view of a moebench.devices/1 document (harness/devices.hpp).
#include "report/formats.hpp"

#include <fmt/format.h>

namespace moebench::formats_detail {

namespace {

std::string str_or(const json& j, const char* key, const std::string& dflt = "?") {
    if (!j.contains(key) || j.at(key).is_null()) return dflt;
    return j.at(key).is_string() ? j.at(key).get<std::string>() : j.at(key).dump();
}

}  // namespace

std::string render_devices_text(const json& j) {
    std::string s;
    auto line = [&](const std::string& l) { s += l + "\n"; };
    const json& g = j.at("gpus");
    int64_t count = g.value("device_count", int64_t(0));
    if (g.value("available", false) && count > 0) {
        line(fmt::format("GPUs: {} found", count));
        for (const auto& d : g.value("devices", json::array())) {
            double mem = d.value("memory_total_bytes", 0.0);
            line(fmt::format("  [{}] {}  sm_{}  {} SMs  {:.1f} GiB  PCI {}", str_or(d, "index"), str_or(d, "name"),
                             str_or(d, "compute_capability"), str_or(d, "sms"), mem / (1024.0 * 1024 * 1024),
                             str_or(d, "pci_bus_id")));
            if (d.contains("measured") && d.at("measured").is_object()) {
                const json& m = d.at("measured");
                line(fmt::format("      measured: copy {:.0f} GB/s, read {:.0f} GB/s, bf16 GEMM {:.0f} TFLOP/s",
                                 m.value("copy_bw_bytes_per_s", 0.0) / 1e9, m.value("read_bw_bytes_per_s", 0.0) / 1e9,
                                 m.value("bf16_gemm_flops", 0.0) / 1e12));
            }
        }
    } else {
        line("GPUs: none. " + str_or(g, "reason", "no reason given"));
    }
    if (g.contains("libraries") && g.at("libraries").is_object()) {
        std::string libs;
        for (const auto& [k, v] : g.at("libraries").items())
            libs += (libs.empty() ? "" : ", ") + k + " " + (v.is_string() ? v.get<std::string>() : v.dump());
        line("CUDA: " + libs);
    } else if (!g.value("built_with_cuda", false)) {
        line("CUDA: not built in");
    }
    const json& c = j.at("cpu");
    line(fmt::format("CPU: {} ({} logical CPUs online, {} usable by this process)", str_or(c, "model"),
                     str_or(c, "logical_cpus_online"), str_or(c, "usable_cpus")));
    const json& m = j.at("memory");
    line(fmt::format("Memory: {:.1f} GiB total, {:.1f} GiB available (/proc/meminfo)",
                     m.value("total_bytes", 0.0) / (1024.0 * 1024 * 1024),
                     m.value("available_bytes", 0.0) / (1024.0 * 1024 * 1024)));
    if (j.contains("host"))
        line(fmt::format("Host: {} ({}, {})", str_or(j.at("host"), "hostname"), str_or(j.at("host"), "kernel"),
                         str_or(j.at("host"), "arch")));
    return s;
}

}  // namespace moebench::formats_detail
