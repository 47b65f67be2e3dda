// SPDX-License-Identifier: Apache-2.0
// `moebench devices`: the GPUs found (or plainly why none), the CPU and host memory (from /proc), and, in CUDA builds,
// the toolkit/runtime/driver versions. JSON schema "moebench.devices/1".
#include "backends/registry.hpp"
#include "backends/sim/sim_backend.hpp"
#include "cli/commands.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/host_cpus.hpp"
#include "common/host_memory.hpp"
#include "common/json_util.hpp"
#include "config/hardware_fields.hpp"

#include <fmt/format.h>
#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <thread>

namespace moebench::cli {

namespace {

struct DevicesArgs {
    std::string format = "text";
    bool measure = false;
    bool hardware_fields = false;
    std::string out;
};

std::string trim(const std::string& s) {
    size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t\r\n");
    return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// First "key: value" line of a /proc file whose key matches.
std::string proc_value(const std::string& file, const std::string& key) {
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line)) {
        auto colon = line.find(':');
        if (colon != std::string::npos && trim(line.substr(0, colon)) == key) return trim(line.substr(colon + 1));
    }
    return "";
}

json host_json() {
    json j;
    utsname u{};
    if (::uname(&u) == 0) {
        j["host"] = {{"hostname", u.nodename}, {"kernel", std::string(u.sysname) + " " + u.release}, {"arch", u.machine}};
    }
    std::string model = proc_value("/proc/cpuinfo", "model name");
    if (model.empty()) model = proc_value("/proc/cpuinfo", "Model");  // some ARM kernels
    const int64_t usable = usable_cpus();
    j["cpu"] = {{"model", model.empty() ? "unknown (no model name in /proc/cpuinfo)" : model},
                {"logical_cpus_online", int64_t(::sysconf(_SC_NPROCESSORS_ONLN))},
                {"usable_cpus", usable},
                {"source", "/proc/cpuinfo, sysconf, sched_getaffinity"}};
    j["memory"] = {{"total_bytes", meminfo_bytes("MemTotal")},
                   {"available_bytes", meminfo_bytes("MemAvailable")},
                   {"source", "/proc/meminfo"}};
    return j;
}

std::string str_or(const json& j, const char* key, const std::string& dflt = "?") {
    if (!j.contains(key) || j.at(key).is_null()) return dflt;
    return j.at(key).is_string() ? j.at(key).get<std::string>() : j.at(key).dump();
}

std::string devices_text(const json& j) {
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

// The fields a hardware profile may hold, and those of its `sim` object, from their tables: the help for writing a
// profile, and (--format md) the tables of docs/hardware-schema.md and docs/sim-backend.md.
std::string hardware_fields_text(const std::string& format) {
    if (format == "json")
        return json{{"profile", json::parse(hardware_fields_table("json"))},
                    {"sim", json::parse(sim_fields_table("json"))}}.dump(2) + "\n";
    if (format == "md")
        return "## Hardware profile fields (docs/hardware-schema.md)\n\n" + hardware_fields_table("md") +
               "\n## The `sim` object's fields (docs/sim-backend.md)\n\n" + sim_fields_table("md");
    return "Hardware profile fields (configs/hardware/*.json; docs/hardware-schema.md):\n" +
           hardware_fields_table("text") + "\nThe \"sim\" object's fields (docs/sim-backend.md):\n" +
           sim_fields_table("text");
}

void run_devices(const DevicesArgs& a) {
    std::string text;
    if (a.hardware_fields) {
        if (a.format != "text" && a.format != "json" && a.format != "md")
            config_error("--format", "unknown output format for --hardware-fields", a.format, "use text, md or json");
        if (a.measure)
            config_error("--measure", "measures GPUs; --hardware-fields lists the fields of a profile", "",
                         "give one of --measure and --hardware-fields");
        text = hardware_fields_text(a.format);
    } else {
        if (a.format != "text" && a.format != "json")
            config_error("--format", "unknown output format", a.format, "use text or json");
        json j = host_json();
        j["schema"] = "moebench.devices/1";
        j["gpus"] = accelerator_devices_json(a.measure);
        text = a.format == "json" ? j.dump(2) + "\n" : devices_text(j);
    }
    if (a.out.empty() || a.out == "-") std::cout << text;
    else write_file_atomic(a.out, text);
}

}  // namespace

void add_devices_command(CLI::App& app) {
    auto args = std::make_shared<DevicesArgs>();
    auto* cmd = app.add_subcommand("devices", "GPUs found (or why none), CPU, host memory and CUDA library versions");
    cmd->add_option("--format", args->format, "Output: text|json (default text); with --hardware-fields also md");
    cmd->add_flag("--measure", args->measure, "Also measure copy/read bandwidth and bf16 GEMM rate on each GPU (~1 s each)");
    cmd->add_flag("--hardware-fields", args->hardware_fields,
                  "List the fields of a hardware profile (configs/hardware/*.json) and of its sim object: key, unit, "
                  "required or default, plausible range, meaning");
    cmd->add_option("--out", args->out, "Write the output to FILE instead of stdout");
    cmd->callback([args] { run_devices(*args); });
}

}  // namespace moebench::cli
