// SPDX-License-Identifier: Apache-2.0
#include "common/host_memory.hpp"

#include <fstream>
#include <sstream>

namespace moebench {

int64_t meminfo_bytes(const std::string& key) {
    std::ifstream in("/proc/meminfo");
    std::string line;
    while (std::getline(in, line)) {
        const auto colon = line.find(':');
        if (colon == std::string::npos || line.compare(0, colon, key) != 0 || colon != key.size()) continue;
        std::istringstream is(line.substr(colon + 1));
        int64_t kib = -1;  // values are "<n> kB" (kibibytes)
        if (!(is >> kib)) return -1;
        return kib * 1024;
    }
    return -1;
}

int64_t mem_available_bytes() {
    const int64_t b = meminfo_bytes("MemAvailable");
    return b > 0 ? b : 0;
}

}  // namespace moebench
