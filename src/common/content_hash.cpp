// SPDX-License-Identifier: Apache-2.0
#include "common/content_hash.hpp"

#include <fmt/format.h>

#include <fstream>
#include <vector>

namespace moebench {

uint64_t fnv1a64(const void* data, size_t n, uint64_t h) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

std::string fnv1a64_hex(std::string_view text) { return fmt::format("{:016x}", fnv1a64(text.data(), text.size())); }

std::string file_fnv1a64_hex(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return "";
    std::vector<char> buf(1 << 20);
    uint64_t h = kFnv1a64Offset;
    while (in) {
        in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        h = fnv1a64(buf.data(), static_cast<size_t>(in.gcount()), h);
    }
    if (in.bad()) return "";
    return fmt::format("{:016x}", h);
}

}  // namespace moebench
