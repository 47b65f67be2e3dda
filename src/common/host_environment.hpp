// SPDX-License-Identifier: Apache-2.0
// What a report needs to be reproduced or explained: the machine, OS and kernel, the compiler and its flags, the
// BLAS and the kernels it runs, the CPU governor and the load when the run started.
#pragma once
#include "common/json_util.hpp"

namespace moebench {

/// The report's environment block: host, CPU model, CPU count, memory, OS and kernel, compiler and flags,
/// OpenBLAS threads, config and core type (and whether moebench re-executed itself to choose it), CPU governor,
/// load average now. Unreadable facts are "unknown" / null, never guessed.
json environment_block();

/// The machine of an environment block (a report's, or environment_block() now), in one line: "host H, CPU M,
/// N CPUs". What `moebench calibrate` compares between reports and with a measured profile's `machine`; "" when the
/// block records none of them.
std::string machine_identity(const json& environment);

/// The 1-minute load average now; null where /proc/loadavg is unreadable.
json loadavg_now();

}  // namespace moebench
