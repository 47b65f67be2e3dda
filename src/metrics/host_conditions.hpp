// SPDX-License-Identifier: Apache-2.0
// Was the host quiet while the steps were measured? Kernel counters read just before and just after the measured
// steps: CPU time stolen by the hypervisor, CPU time used by other processes, load, clock throttling events, and
// the RAPL energy counters of the CPU packages (energy per token). Every figure is a "counter"; what the kernel does
// not expose is reported as not available, never guessed.
#pragma once
#include "common/json_util.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace moebench {

/// One RAPL powercap zone (a CPU package): /sys/class/powercap/intel-rapl:N (AMD too, despite the name).
struct RaplZone {
    std::string name;        // "package-0"
    uint64_t energy_uj = 0;  // cumulative, wraps at max_energy_range_uj
    uint64_t max_energy_range_uj = 0;
};

struct HostSample {
    double wall_s = 0;             // steady clock
    bool have_stat = false;        // /proc/stat readable
    uint64_t busy_ticks = 0;       // all CPUs: user + nice + system + irq + softirq (USER_HZ ticks)
    uint64_t steal_ticks = 0;      // all CPUs: time the hypervisor ran something else
    uint64_t total_ticks = 0;      // all CPUs: every column of the "cpu" line except guest (already in user)
    double self_cpu_s = -1;        // this process, user + system (getrusage); -1 unreadable
    double loadavg_1m = -1;        // -1 unreadable
    int64_t throttle_events = -1;  // sum of thermal_throttle core/package counts over CPUs; -1 unreadable
    double cpu_mhz_mean = 0;       // mean scaling_cur_freq over CPUs; 0 unreadable
    std::vector<RaplZone> rapl;    // empty: no readable package zone
};

/// Reads the counters. `sys_root` / `proc_root` prefix "/sys" and "/proc" (tests point them at a fake tree).
HostSample sample_host(const std::string& sys_root = "", const std::string& proc_root = "");

/// Thresholds of the verdicts (docs/report-schema.md, "conditions").
inline constexpr double kContendedStealShare = 0.02;  // of all CPU time in the window
inline constexpr double kContendedOtherShare = 0.10;  // CPU time of other processes, of all CPU time in the window

/// The report's conditions.host block from two samples around the measured steps, and the tokens they processed
/// (for energy per token). `clk_tck`: USER_HZ (sysconf(_SC_CLK_TCK) when 0).
json host_conditions(const HostSample& before, const HostSample& after, int64_t tokens, long clk_tck = 0);

/// RAPL energy between two samples in joules (counter wrap handled), summed over the zones present in both;
/// negative when unavailable.
double rapl_joules(const HostSample& before, const HostSample& after);

}  // namespace moebench
