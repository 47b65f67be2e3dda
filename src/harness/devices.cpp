// SPDX-License-Identifier: Apache-2.0
#include "harness/devices.hpp"

#include "backends/registry.hpp"
#include "backends/sim/sim_backend.hpp"
#include "common/host_cpus.hpp"
#include "common/host_memory.hpp"
#include "config/hardware_fields.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>

namespace moebench {

namespace {

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
        j["host"] = {
            {"hostname", u.nodename}, {"kernel", std::string(u.sysname) + " " + u.release}, {"arch", u.machine}};
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

}  // namespace

json devices_document(bool measure) {
    json j = host_json();
    j["schema"] = "moebench.devices/1";
    j["gpus"] = accelerator_devices_json(measure);
    return j;
}

json hardware_fields_document() {
    return {{"profile", json::parse(hardware_fields_table("json"))}, {"sim", json::parse(sim_fields_table("json"))}};
}

}  // namespace moebench
