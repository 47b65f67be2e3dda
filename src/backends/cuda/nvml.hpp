// SPDX-License-Identifier: Apache-2.0
// NVML through dlopen("libnvidia-ml.so.1"): no nvml.h on the build machine, and the binary must start without a driver.
// Declarations transcribed from NVML 13.0 (see shared notes cuda-13.md section 3); every call degrades to "not
// available".
#pragma once
#include "common/json_util.hpp"

#include <cstdint>
#include <string>

namespace moebench {

/// Reads what NVML offers for the GPU at `pci_bus_id` (as cudaDeviceGetPCIBusId writes it): clocks, power, temperature,
/// NVLink link count and cumulative NVLink throughput counters. Every value is labelled "counter"; a missing library,
/// symbol or unsupported field becomes {"available": false, "reason": ...} or a per-field "not available: <why>".
json nvml_device_json(const std::string& pci_bus_id);

/// A reading for the conditions around the measured steps: SM clock (MHz), the clock-event (throttle) reason
/// bitmask, cumulative energy (mJ), temperature (C); {"available": false, "reason"} without NVML.
json nvml_counters(const std::string& pci_bus_id);

/// conditions.device from two nvml_counters() readings: SM clock before/after, the throttle reasons seen (power
/// cap, thermal, hardware slowdown: "throttled"), energy and energy per token (counter).
json nvml_conditions(const json& before, const json& after, int64_t tokens);

/// Driver version string from NVML ("" when NVML is absent); `why` receives the reason when it is.
std::string nvml_driver_version(std::string* why);

}  // namespace moebench
