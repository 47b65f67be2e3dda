// SPDX-License-Identifier: Apache-2.0
// Host conditions around the measured steps from a fake /proc and /sys, with every figure computed by hand.
#include "metrics/host_conditions.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>
#include <filesystem>
#include <fstream>

using namespace moebench;
namespace fs = std::filesystem;

namespace {

struct FakeHost {
    fs::path root = fs::temp_directory_path() / ("moebench-fakehost-" + std::to_string(::getpid()));
    FakeHost() { fs::remove_all(root); }
    ~FakeHost() { fs::remove_all(root); }
    void put(const std::string& rel, const std::string& text) {
        const fs::path p = root / rel;
        fs::create_directories(p.parent_path());
        std::ofstream(p) << text << "\n";
    }
    HostSample sample(double self_cpu_s) {
        HostSample s = sample_host((root / "sys").string(), (root / "proc").string());
        s.self_cpu_s = self_cpu_s;
        return s;
    }
};

}  // namespace

TEST_CASE("host conditions: steal, other processes, throttling and RAPL energy by hand", "[conditions]") {
    FakeHost h;
    h.put("proc/loadavg", "0.50 0.40 0.30 1/100 4242");
    h.put("sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq", "2000000");
    h.put("sys/class/powercap/intel-rapl:0/name", "package-0");
    h.put("sys/class/powercap/intel-rapl:0/max_energy_range_uj", "1000000");
    h.put("sys/class/powercap/intel-rapl:0:0/name", "core");  // a subzone: inside package-0, never added twice
    h.put("sys/class/powercap/intel-rapl:0:0/energy_uj", "123");
    h.put("sys/class/powercap/intel-rapl:1/name", "package-1");
    h.put("sys/class/powercap/intel-rapl:1/max_energy_range_uj", "262143328850");

    // before: user nice system idle iowait irq softirq steal guest guest_nice
    h.put("proc/stat", "cpu  100 0 50 800 10 5 5 30 0 0\ncpu0 1 2 3");
    h.put("sys/devices/system/cpu/cpu0/thermal_throttle/core_throttle_count", "3");
    h.put("sys/class/powercap/intel-rapl:0/energy_uj", "999000");
    h.put("sys/class/powercap/intel-rapl:1/energy_uj", "5000000");
    HostSample before = h.sample(1.0);

    h.put("proc/stat", "cpu  300 0 100 1400 10 5 5 60 0 0");
    h.put("proc/loadavg", "1.50 0.40 0.30 1/100 4242");
    h.put("sys/devices/system/cpu/cpu0/thermal_throttle/core_throttle_count", "5");
    h.put("sys/class/powercap/intel-rapl:0/energy_uj", "1000");  // wrapped at 1e6 uJ
    h.put("sys/class/powercap/intel-rapl:1/energy_uj", "7000000");
    HostSample after = h.sample(2.0);

    REQUIRE(before.have_stat);
    CHECK(before.busy_ticks == 160);    // 100 + 0 + 50 + 5 + 5
    CHECK(before.total_ticks == 1000);  // every column but guest
    CHECK(before.rapl.size() == 2);
    CHECK(before.cpu_mhz_mean == Approx(2000.0));

    // package-0: 1e6 - 999000 + 1000 = 2000 uJ; package-1: 2e6 uJ.
    CHECK(rapl_joules(before, after) == Approx(2.002));

    json c = host_conditions(before, after, 1000, 100);
    // 880 ticks = 8.8 s of CPU time; 30 of them stolen; busy 250 ticks = 2.5 s, of which 1.0 s was this process.
    CHECK(c["steal_share"].get<double>() == Approx(30.0 / 880.0));
    CHECK(c["other_processes_cpu_share"].get<double>() == Approx(1.5 / 8.8));
    CHECK(c["contended"] == true);
    CHECK(c["thermal_throttle_events"] == 2);
    CHECK(c["throttled"] == true);
    CHECK(c["loadavg_1m_start"].get<double>() == Approx(0.5));
    CHECK(c["loadavg_1m_end"].get<double>() == Approx(1.5));
    CHECK(c["energy"]["joules_per_token"].get<double>() == Approx(2.002 / 1000));
    CHECK(c["energy"]["source"] == "counter");
    CHECK(c["note"].get<std::string>().find("stole 3.4%") != std::string::npos);
}

TEST_CASE("host conditions: a quiet host, and counters the kernel does not expose", "[conditions]") {
    FakeHost h;
    h.put("proc/stat", "cpu  100 0 50 850 0 0 0 0 0 0");
    HostSample before = h.sample(0.0);
    h.put("proc/stat", "cpu  300 0 50 850 0 0 0 0 0 0");  // 2 s busy, all of it this process
    HostSample after = h.sample(2.0);
    json c = host_conditions(before, after, 10, 100);
    CHECK(c["contended"] == false);
    CHECK(c["other_processes_cpu_share"].get<double>() == Approx(0.0));
    CHECK(c["throttled"].is_null());  // no thermal_throttle counters: unknown, not "no"
    CHECK(c["energy"]["available"] == false);
    CHECK(c["cpu_mhz_mean"].is_string());

    HostSample none_before = sample_host("/nonexistent-sys", "/nonexistent-proc");
    HostSample none_after = sample_host("/nonexistent-sys", "/nonexistent-proc");
    json u = host_conditions(none_before, none_after, 10, 100);
    CHECK(u["contended"].is_null());
    CHECK(u["loadavg_1m_start"].is_null());
}
