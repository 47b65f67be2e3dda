// SPDX-License-Identifier: Apache-2.0
// This machine's CPU as a hardware profile (`moebench devices --cpu-profile`): what the sim models a cpu run with,
// and what `moebench calibrate` fits to this machine's cpu reports (docs/calibration.md).
#pragma once
#include "common/json_util.hpp"

#include <string>

namespace moebench {

/// A moebench.hardware/1 document named `name`, measured now with the cpu backend's own ceilings (its
/// --measure-ceilings, twice, the higher of each kept: streaming read bandwidth and the OpenBLAS sgemm rate, fp32, on
/// all hardware threads), the machine it was measured on (`machine`), and a `sim` object for the cpu backend's
/// fp32 arithmetic. Checked as a profile before it is returned.
json measure_cpu_profile(const std::string& name);

}  // namespace moebench
