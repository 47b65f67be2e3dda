// SPDX-License-Identifier: Apache-2.0
// FNV-1a 64 of bytes, text or a file's content: how moebench tells inputs apart by what they hold, not by their path
// (a sweep journal's fingerprint, the ranks' settings check). A difference detector, not a defence against anyone.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace moebench {

inline constexpr uint64_t kFnv1a64Offset = 14695981039346656037ull;

/// FNV-1a 64 of `n` bytes, continuing from `h` (the offset basis for a fresh hash).
uint64_t fnv1a64(const void* data, size_t n, uint64_t h = kFnv1a64Offset);
/// 16 hex digits of FNV-1a 64 of `text`.
std::string fnv1a64_hex(std::string_view text);
/// 16 hex digits of FNV-1a 64 of the file's bytes, read in blocks (a trace may be gigabytes); "" when it cannot be
/// read.
std::string file_fnv1a64_hex(const std::string& path);

}  // namespace moebench
