// SPDX-License-Identifier: Apache-2.0
#include "common/host_cpus.hpp"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace moebench {

int64_t usable_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    return std::max<int64_t>(1, std::thread::hardware_concurrency());
}

}  // namespace moebench
