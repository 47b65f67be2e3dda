// SPDX-License-Identifier: Apache-2.0
// The host's memory as /proc/meminfo reports it (Linux): for preflights and the devices listing.
#pragma once
#include <cstdint>
#include <string>

namespace moebench {

/// A "/proc/meminfo" field ("MemTotal", "MemAvailable", ...) in bytes; -1 when absent or unreadable.
int64_t meminfo_bytes(const std::string& key);
/// MemAvailable in bytes; 0 when unreadable (callers then skip their preflight).
int64_t mem_available_bytes();

}  // namespace moebench
