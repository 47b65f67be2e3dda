// SPDX-License-Identifier: Apache-2.0
// The environment block of reports; see host_environment.hpp.
#include "common/host_environment.hpp"

#include "build_info.hpp"
#include "common/blas_kernels.hpp"

#include <cblas.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#ifndef MOEBENCH_CXX_FLAGS
#define MOEBENCH_CXX_FLAGS "unknown"
#endif

namespace moebench {

namespace {

std::string first_line(const char* path) {
    std::ifstream in(path);
    std::string line;
    return in && std::getline(in, line) ? line : "";
}

std::string cpu_model_name() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) == 0) {
            auto colon = line.find(':');
            if (colon != std::string::npos) {
                std::string v = line.substr(colon + 1);
                v.erase(0, v.find_first_not_of(" \t"));
                return v;
            }
        }
    }
    return "unknown";
}

std::string blas_name(const char* config) {
    std::string c = config ? config : "";
    return c.rfind("OpenBLAS", 0) == 0 ? c : "OpenBLAS " + c;
}

std::string os_pretty_name() {
    std::ifstream in("/etc/os-release");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("PRETTY_NAME=", 0) == 0) {
            std::string v = line.substr(12);
            if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
            return v;
        }
    return "unknown";
}

std::string compiler() {
#if defined(__clang__)
    return std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
    return std::string("gcc ") + __VERSION__;
#else
    return "unknown";
#endif
}

json openblas_block() {
    const char* coretype_env = std::getenv("OPENBLAS_CORETYPE");
    const char* reexec_from = std::getenv(kReexecutedForCoretype);
    json b = {{"core", openblas_get_corename()},
              {"coretype_env", coretype_env ? json(coretype_env) : json(nullptr)},
              {"reexecuted", reexec_from != nullptr}};
    if (reexec_from)
        b["reexecuted_note"] = std::string("OpenBLAS had picked its ") + reexec_from +
                               " kernels; moebench re-executed itself with OPENBLAS_CORETYPE set";
    return b;
}

}  // namespace

json loadavg_now() {
    std::ifstream in("/proc/loadavg");
    double one = 0;
    return in && (in >> one) ? json(one) : json(nullptr);
}

json environment_block() {
    char host[256] = {0};
    if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = 0;
    long pages = ::sysconf(_SC_PHYS_PAGES), page_size = ::sysconf(_SC_PAGE_SIZE);
    utsname u{};
    const bool have_uname = ::uname(&u) == 0;
    const std::string governor = first_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor");
    return json{{"host", host},
                {"cpu_model", cpu_model_name()},
                {"num_cpus", static_cast<int64_t>(std::thread::hardware_concurrency())},
                {"memory_bytes", pages > 0 && page_size > 0 ? static_cast<int64_t>(pages) * page_size : 0},
                {"os", os_pretty_name()},
                {"kernel", have_uname ? std::string(u.sysname) + " " + u.release + " " + u.machine : "unknown"},
                {"compiler", compiler()},
                {"compiler_flags", std::string(MOEBENCH_CXX_FLAGS)},
                {"threads", openblas_get_num_threads()},
                {"blas", blas_name(openblas_get_config())},
                {"openblas", openblas_block()},
                {"cpu_governor", governor.empty() ? json(nullptr) : json(governor)},
                {"loadavg_1m_start", loadavg_now()},
                {"gpus", json::array()}};
}

std::string machine_identity(const json& env) {
    auto text = [&](const char* key) -> std::string {
        if (!env.is_object() || !env.contains(key)) return "";
        const json& v = env.at(key);
        return v.is_string() ? v.get<std::string>() : v.is_number_integer() ? std::to_string(v.get<int64_t>()) : "";
    };
    const std::string host = text("host"), cpu = text("cpu_model"), cpus = text("num_cpus");
    if (host.empty() && cpu.empty() && cpus.empty()) return "";
    return "host " + (host.empty() ? "unknown" : host) + ", CPU " + (cpu.empty() ? "unknown" : cpu) + ", " +
           (cpus.empty() ? "unknown" : cpus) + " CPUs";
}

}  // namespace moebench
