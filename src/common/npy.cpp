// SPDX-License-Identifier: Apache-2.0
// A hand-written .npy reader (no dependency in Debian's C++ set reads it): header and raw integer array only.
#include "common/npy.hpp"

#include "common/error.hpp"

#include <cstring>

namespace moebench {

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";

[[noreturn]] void npy_error(const std::string& where, const std::string& what, const std::string& value) {
    config_error(where, what, value,
                 "give the .npy an engine wrote (np.save of an integer array [tokens, layers, k], C order), or "
                 "re-save it with numpy: np.save(f, np.ascontiguousarray(a).astype('<i4'))");
}

// The value text of `key` in the header's dict literal: after "'key':" up to the next ',' at depth 0 or the closing
// '}' (the shape tuple is kept whole).
std::string dict_value(std::string_view header, std::string_view key, const std::string& where) {
    const std::string quoted = "'" + std::string(key) + "'";
    const size_t at = header.find(quoted);
    if (at == std::string_view::npos) npy_error(where, "header has no " + quoted + " entry", std::string(header));
    size_t i = header.find(':', at + quoted.size());
    if (i == std::string_view::npos) npy_error(where, "header entry " + quoted + " has no value", std::string(header));
    ++i;
    int depth = 0;
    size_t end = i;
    for (; end < header.size(); ++end) {
        const char c = header[end];
        if (c == '(')
            ++depth;
        else if (c == ')')
            --depth;
        else if ((c == ',' && depth == 0) || (c == '}' && depth <= 0))
            break;
        if (depth < 0) break;
    }
    std::string v(header.substr(i, end - i));
    const size_t b = v.find_first_not_of(" "), e = v.find_last_not_of(" ");
    return b == std::string::npos ? std::string() : v.substr(b, e - b + 1);
}

struct Dtype {
    int64_t bytes = 0;
    bool is_signed = false;
};

Dtype dtype_of(const std::string& descr, const std::string& where) {
    // Quoted as in the header: '|u1'. One-byte types may say '|' or '<' or '>'; wider ones must be little-endian.
    static const struct {
        const char* name;
        Dtype t;
    } known[] = {{"'|u1'", {1, false}}, {"'<u1'", {1, false}}, {"'|i1'", {1, true}},
                 {"'<i1'", {1, true}},  {"'<u2'", {2, false}}, {"'<i2'", {2, true}},
                 {"'<u4'", {4, false}}, {"'<i4'", {4, true}},  {"'<i8'", {8, true}}};
    for (const auto& k : known)
        if (descr == k.name) return k.t;
    npy_error(where + ": descr", "is not a little-endian integer type this reader takes (|u1 |i1 <u2 <i2 <u4 <i4 <i8)",
              descr);
}

}  // namespace

bool is_npy(std::string_view bytes) { return bytes.substr(0, kMagic.size()) == kMagic; }

NpyArray parse_npy(std::string_view bytes, const std::string& where) {
    if (!is_npy(bytes))
        npy_error(where, "does not start with the .npy magic \\x93NUMPY", std::to_string(bytes.size()) + " bytes");
    if (bytes.size() < 10) npy_error(where, "ends inside the .npy preamble", std::to_string(bytes.size()) + " bytes");
    const auto major = static_cast<unsigned char>(bytes[6]);
    size_t header_len = 0, header_at = 0;
    if (major == 1) {
        header_len =
            static_cast<unsigned char>(bytes[8]) | (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
        header_at = 10;
    } else if (major == 2 || major == 3) {
        if (bytes.size() < 12)
            npy_error(where, "ends inside the .npy preamble", std::to_string(bytes.size()) + " bytes");
        header_len = 0;
        for (int b = 3; b >= 0; --b)
            header_len = (header_len << 8) | static_cast<unsigned char>(bytes[8 + static_cast<size_t>(b)]);
        header_at = 12;
    } else {
        npy_error(where + ": version", "is not 1, 2 or 3", std::to_string(major));
    }
    if (header_len > bytes.size() - header_at)
        npy_error(where + ": header length", "runs past the end of the file",
                  std::to_string(header_len) + " bytes with " + std::to_string(bytes.size() - header_at) + " left");
    const std::string_view header = bytes.substr(header_at, header_len);
    const std::string descr = dict_value(header, "descr", where);
    const Dtype dt = dtype_of(descr, where);
    const std::string fortran = dict_value(header, "fortran_order", where);
    if (fortran != "False")
        npy_error(where + ": fortran_order", "is not False (this reader takes C-order arrays)", fortran);
    const std::string shape_text = dict_value(header, "shape", where);
    if (shape_text.size() < 2 || shape_text.front() != '(' || shape_text.back() != ')')
        npy_error(where + ": shape", "is not a tuple", shape_text);
    NpyArray a;
    a.descr = descr.substr(1, descr.size() - 2);
    int64_t count = 1;
    size_t i = 1;
    while (i + 1 < shape_text.size()) {
        while (i + 1 < shape_text.size() && (shape_text[i] == ' ' || shape_text[i] == ',')) ++i;
        if (i + 1 >= shape_text.size()) break;
        int64_t dim = 0;
        size_t digits = 0;
        while (i + 1 < shape_text.size() && shape_text[i] >= '0' && shape_text[i] <= '9') {
            if (dim > kMaxNpyElements) npy_error(where + ": shape", "has a dimension beyond 2^31", shape_text);
            dim = dim * 10 + (shape_text[i] - '0');
            ++i, ++digits;
        }
        if (digits == 0) npy_error(where + ": shape", "is not a tuple of whole numbers", shape_text);
        if (dim > kMaxNpyElements) npy_error(where + ": shape", "has a dimension beyond 2^31", shape_text);
        a.shape.push_back(dim);
        count = dim == 0 ? 0 : (count > kMaxNpyElements / dim ? kMaxNpyElements + 1 : count * dim);
        if (a.shape.size() > 32) npy_error(where + ": shape", "has more than 32 dimensions", shape_text);
    }
    if (count > kMaxNpyElements) npy_error(where + ": shape", "holds more than 2^31 elements", shape_text);
    const std::string_view data = bytes.substr(header_at + header_len);
    if (static_cast<int64_t>(data.size()) != count * dt.bytes)
        npy_error(where + ": data", "does not match the shape and dtype",
                  fmt::format("{} bytes after the header, {} x {} expected", data.size(), count, dt.bytes));
    a.values.resize(static_cast<size_t>(count));
    for (int64_t e = 0; e < count; ++e) {
        const auto* p = reinterpret_cast<const unsigned char*>(data.data()) + e * dt.bytes;
        uint64_t u = 0;
        for (int64_t b = dt.bytes - 1; b >= 0; --b) u = (u << 8) | p[b];
        int64_t v = static_cast<int64_t>(u);
        if (dt.is_signed && dt.bytes < 8 && (u >> (8 * dt.bytes - 1)) & 1) v -= int64_t{1} << (8 * dt.bytes);
        a.values[static_cast<size_t>(e)] = v;
    }
    return a;
}

std::string decode_base64(std::string_view text, const std::string& where) {
    const auto value_of = [](char c) -> int {
        if (c >= 'A' && c <= 'Z') return c - 'A';
        if (c >= 'a' && c <= 'z') return c - 'a' + 26;
        if (c >= '0' && c <= '9') return c - '0' + 52;
        if (c == '+') return 62;
        if (c == '/') return 63;
        return -1;
    };
    while (!text.empty() && text.back() == '=') text.remove_suffix(1);
    if (text.size() % 4 == 1)
        config_error(where, "is not base64: its length cannot be", std::to_string(text.size()) + " characters",
                     "give the field as the engine wrote it (base64 of the array's bytes)");
    std::string out;
    out.reserve(text.size() / 4 * 3 + 3);
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < text.size(); ++i) {
        const int v = value_of(text[i]);
        if (v < 0)
            config_error(where, "is not base64",
                         fmt::format("character {} at offset {}", printable(std::string(1, text[i])), i),
                         "give the field as the engine wrote it (base64 of the array's bytes)");
        acc = (acc << 6) | static_cast<uint32_t>(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out.push_back(static_cast<char>((acc >> bits) & 0xff));
        }
    }
    return out;
}

}  // namespace moebench
