// SPDX-License-Identifier: Apache-2.0
#include "common/human_units.hpp"

#include <fmt/format.h>

#include <cmath>

namespace moebench {

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
}

std::string human_count(double v) {
    double a = std::fabs(v);
    if (a >= 1e12) return fmt::format("{:.3f} T", v / 1e12);
    if (a >= 1e9) return fmt::format("{:.2f} B", v / 1e9);
    if (a >= 1e6) return fmt::format("{:.2f} M", v / 1e6);
    if (a >= 1e3) return fmt::format("{:.2f} K", v / 1e3);
    return fmt::format("{:.0f}", v);
}

std::string human_bytes(double v) {
    double a = std::fabs(v);
    if (a >= 1024.0 * kGiB) return fmt::format("{:.2f} TiB", v / (1024.0 * kGiB));
    if (a >= kGiB) return fmt::format("{:.2f} GiB", v / kGiB);
    if (a >= 1024.0 * 1024.0) return fmt::format("{:.2f} MiB", v / (1024.0 * 1024.0));
    if (a >= 1024.0) return fmt::format("{:.2f} KiB", v / 1024.0);
    return fmt::format("{:.0f} B", v);
}

std::string human_flops(double v) {
    double a = std::fabs(v);
    if (a >= 1e12) return fmt::format("{:.2f} TFLOP", v / 1e12);
    if (a >= 1e9) return fmt::format("{:.2f} GFLOP", v / 1e9);
    if (a >= 1e6) return fmt::format("{:.2f} MFLOP", v / 1e6);
    return fmt::format("{:.0f} FLOP", v);
}

std::string human_time_us(double us) {
    if (us >= 1e6) return fmt::format("{:.2f} s", us / 1e6);
    if (us >= 1e3) return fmt::format("{:.2f} ms", us / 1e3);
    return fmt::format("{:.1f} µs", us);
}

std::string percent(double fraction) { return fmt::format("{:.1f}%", 100.0 * fraction); }

}  // namespace moebench
