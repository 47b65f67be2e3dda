// SPDX-License-Identifier: Apache-2.0
// The NumPy .npy container as far as routing dumps need it: the header (magic, version 1-3, a Python dict literal of
// descr, fortran_order and shape) and a C-order integer array after it. Written for untrusted bytes: every length is
// checked against what is there, sizes cannot overflow, and anything else (floats, Fortran order, objects, a shape that
// does not match the bytes) is a ConfigError naming `where`, the field and the fix.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace moebench {

struct NpyArray {
    std::string descr;  // as written: |u1, |i1, <u2, <i2, <u4, <i4, <i8
    std::vector<int64_t> shape;
    std::vector<int64_t> values;  // C order, widened to int64
};

/// Largest element count a dump may hold (2^31: far beyond any request's routing; keeps the widened copy < 16 GiB).
inline constexpr int64_t kMaxNpyElements = int64_t{1} << 31;

/// Parses a whole .npy file image; `where` names it in errors ("dump.npy", "r.json: choices[0].routed_experts").
NpyArray parse_npy(std::string_view bytes, const std::string& where);

/// True when `bytes` starts with the .npy magic ("\x93NUMPY").
bool is_npy(std::string_view bytes);

/// Standard base64 (RFC 4648, '=' padding optional, no line breaks); anything else is a ConfigError naming `where`.
std::string decode_base64(std::string_view text, const std::string& where);

}  // namespace moebench
