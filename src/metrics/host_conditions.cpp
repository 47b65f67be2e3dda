// SPDX-License-Identifier: Apache-2.0
// Host counters around the measured steps; see host_conditions.hpp.
#include "metrics/host_conditions.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace moebench {

namespace fs = std::filesystem;

namespace {

// The first whitespace-separated number of a small kernel file; false when missing or unreadable.
template <class T>
bool read_number(const fs::path& p, T* out) {
    std::ifstream in(p);
    return in && (in >> *out);
}

// The aggregate line of /proc/stat (its label is "cpu", no number): user nice system idle iowait irq softirq steal
// guest guest_nice.
constexpr const char* kProcStatAllCpus = "cpu";
void read_proc_stat(const fs::path& proc, HostSample& s) {
    std::ifstream in(proc / "stat");
    std::string label;
    if (!in || !(in >> label) || label != kProcStatAllCpus) return;
    uint64_t v[10] = {};
    int n = 0;
    while (n < 10 && (in >> v[n])) ++n;
    if (n < 8) return;
    s.busy_ticks = v[0] + v[1] + v[2] + v[5] + v[6];
    s.steal_ticks = v[7];
    s.total_ticks = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];  // guest time is already in user
    s.have_stat = true;
}

void read_cpus(const fs::path& sys, HostSample& s) {
    std::error_code ec;
    const fs::path cpus = sys / "devices/system/cpu";
    int64_t events = 0;
    bool have_events = false;
    double mhz_sum = 0;
    int mhz_n = 0;
    for (const auto& entry : fs::directory_iterator(cpus, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind("cpu", 0) != 0 || name.size() < 4 ||
            name.find_first_not_of("0123456789", 3) != std::string::npos)
            continue;
        int64_t count = 0;
        for (const char* f : {"thermal_throttle/core_throttle_count", "thermal_throttle/package_throttle_count"})
            if (read_number(entry.path() / f, &count)) {
                events += count;
                have_events = true;
            }
        double khz = 0;
        if (read_number(entry.path() / "cpufreq/scaling_cur_freq", &khz) && khz > 0) {
            mhz_sum += khz / 1000.0;
            ++mhz_n;
        }
    }
    if (have_events) s.throttle_events = events;
    if (mhz_n > 0) s.cpu_mhz_mean = mhz_sum / mhz_n;
}

// Top-level package zones only (intel-rapl:N, not the intel-rapl:N:M subzones they contain).
void read_rapl(const fs::path& sys, HostSample& s) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(sys / "class/powercap", ec)) {
        const std::string dir = entry.path().filename().string();
        if (dir.rfind("intel-rapl:", 0) != 0 || dir.find(':', 11) != std::string::npos) continue;
        RaplZone z;
        std::ifstream name(entry.path() / "name");
        if (!name || !std::getline(name, z.name) || z.name.rfind("package", 0) != 0) continue;
        if (!read_number(entry.path() / "energy_uj", &z.energy_uj)) continue;  // root-only on recent kernels
        read_number(entry.path() / "max_energy_range_uj", &z.max_energy_range_uj);
        s.rapl.push_back(z);
    }
}

double self_cpu_seconds() {
    rusage ru{};
    if (::getrusage(RUSAGE_SELF, &ru) != 0) return -1;
    const auto sec = [](const timeval& t) {
        return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
    };
    return sec(ru.ru_utime) + sec(ru.ru_stime);
}

}  // namespace

HostSample sample_host(const std::string& sys_root, const std::string& proc_root) {
    HostSample s;
    s.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    const fs::path sys = sys_root.empty() ? fs::path("/sys") : fs::path(sys_root);
    const fs::path proc = proc_root.empty() ? fs::path("/proc") : fs::path(proc_root);
    read_proc_stat(proc, s);
    read_number(proc / "loadavg", &s.loadavg_1m);
    s.self_cpu_s = self_cpu_seconds();
    read_cpus(sys, s);
    read_rapl(sys, s);
    return s;
}

double rapl_joules(const HostSample& before, const HostSample& after) {
    double uj = 0;
    bool any = false;
    for (const RaplZone& b : before.rapl)
        for (const RaplZone& a : after.rapl) {
            if (a.name != b.name) continue;
            uint64_t delta = a.energy_uj - b.energy_uj;
            if (a.energy_uj < b.energy_uj) {  // wrapped once (a window of seconds cannot wrap twice)
                if (a.max_energy_range_uj == 0) return -1;
                delta = a.max_energy_range_uj - b.energy_uj + a.energy_uj;
            }
            uj += static_cast<double>(delta);
            any = true;
        }
    return any ? uj * 1e-6 : -1;
}

json host_conditions(const HostSample& before, const HostSample& after, int64_t tokens, long clk_tck) {
    if (clk_tck <= 0) clk_tck = ::sysconf(_SC_CLK_TCK);
    json j = {{"source", "counter"}, {"window_s", after.wall_s - before.wall_s}};
    std::vector<std::string> why;
    bool contended = false;
    if (before.have_stat && after.have_stat && after.total_ticks > before.total_ticks && clk_tck > 0) {
        const double total_s = static_cast<double>(after.total_ticks - before.total_ticks) / clk_tck;
        const double steal = static_cast<double>(after.steal_ticks - before.steal_ticks) / clk_tck / total_s;
        j["steal_share"] = steal;
        if (steal > kContendedStealShare)
            why.push_back(fmt::format("the hypervisor stole {:.1f}% of CPU time", 100 * steal));
        if (before.self_cpu_s >= 0 && after.self_cpu_s >= 0) {
            const double busy_s = static_cast<double>(after.busy_ticks - before.busy_ticks) / clk_tck;
            // Tick accounting is coarse (USER_HZ) while getrusage is exact, so a quiet host can read slightly negative.
            const double other = std::max(0.0, (busy_s - (after.self_cpu_s - before.self_cpu_s)) / total_s);
            j["other_processes_cpu_share"] = other;
            if (other > kContendedOtherShare)
                why.push_back(fmt::format("other processes used {:.0f}% of all CPU time", 100 * other));
        }
        contended = !why.empty();
        j["contended"] = contended;
    } else {
        j["contended"] = nullptr;
        why.push_back("/proc/stat not readable: contention unknown");
    }
    j["loadavg_1m_start"] = before.loadavg_1m >= 0 ? json(before.loadavg_1m) : json(nullptr);
    j["loadavg_1m_end"] = after.loadavg_1m >= 0 ? json(after.loadavg_1m) : json(nullptr);
    if (before.cpu_mhz_mean > 0 && after.cpu_mhz_mean > 0)
        j["cpu_mhz_mean"] = {{"start", before.cpu_mhz_mean}, {"end", after.cpu_mhz_mean}};
    else
        j["cpu_mhz_mean"] = "not available: no cpufreq in /sys";
    if (before.throttle_events >= 0 && after.throttle_events >= 0) {
        const int64_t events = after.throttle_events - before.throttle_events;
        j["thermal_throttle_events"] = events;
        j["throttled"] = events > 0;
        if (events > 0) why.push_back(fmt::format("{} thermal throttling events", events));
    } else {
        j["throttled"] = nullptr;  // unknown: the kernel exposes no throttle counter here (e.g. most VMs)
    }
    j["note"] = why.empty() ? "quiet: no steal, other processes or throttling above the thresholds"
                            : fmt::format("{}", fmt::join(why, "; "));
    const double joules = rapl_joules(before, after);
    if (joules >= 0 && tokens > 0)
        j["energy"] = {{"source", "counter"},
                       {"scope", "RAPL package zones: the whole CPU package(s), other processes included"},
                       {"joules", joules},
                       {"joules_per_token", joules / static_cast<double>(tokens)}};
    else
        j["energy"] = {{"available", false},
                       {"reason", before.rapl.empty() ? "no readable RAPL package zone in /sys/class/powercap"
                                                      : "RAPL counter could not be paired"}};
    return j;
}

}  // namespace moebench
