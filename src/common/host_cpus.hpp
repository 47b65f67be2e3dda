// SPDX-License-Identifier: Apache-2.0
// How many CPUs this process may run on: the count every thread pool and BLAS thread setting is held to.
#pragma once
#include <cstdint>

namespace moebench {

/// CPUs in this process's affinity mask (sched_getaffinity: taskset, cpusets), not the machine's count; at least 1.
int64_t usable_cpus();

}  // namespace moebench
