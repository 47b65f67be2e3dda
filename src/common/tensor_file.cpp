// SPDX-License-Identifier: Apache-2.0
// safetensors read/write: 8-byte little-endian header length, a JSON header, then the raw tensor bytes.
// Reading is strict: every offset, size, dtype and shape is checked, and each problem names the file.
#include "common/tensor_file.hpp"

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/host_memory.hpp"
#include "common/json_util.hpp"
#include "common/read_file.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>

namespace moebench {

namespace {

static_assert(sizeof(float) == 4, "float must be IEEE binary32");

// NOTE: moebench only runs on little-endian hosts (x86-64, aarch64), so raw copies are little-endian.
int64_t dtype_size_bytes(const std::string& dtype) {
    static const std::pair<const char*, int64_t> kSizes[] = {
        {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
        {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"I64", 8},     {"U64", 8}, {"F64", 8},
    };
    for (const auto& [name, size] : kSizes)
        if (dtype == name) return size;
    return 0;
}

[[noreturn]] void bad_file(const std::string& path, const std::string& what) {
    // printable: tensor names and parser messages come from the file and may hold any bytes.
    config_error(path, "not a valid safetensors file: " + printable(what), "",
                 "write it with moebench or the Python `safetensors` package (docs/trace-format.md)");
}

int64_t checked_numel(const std::vector<int64_t>& shape, const std::string& path, const std::string& name) {
    int64_t n = 1;
    for (int64_t d : shape) {
        if (d < 0) bad_file(path, "tensor '" + name + "' has a negative dimension");
        if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
            bad_file(path, "tensor '" + name + "' shape overflows");
        n *= d;
    }
    return n;
}

template <typename T>
NamedTensor make_tensor(std::string name, const char* dtype, std::vector<int64_t> shape, const T* values) {
    NamedTensor t;
    t.name = std::move(name);
    t.dtype = dtype;
    t.shape = std::move(shape);
    int64_t n = t.numel();
    t.data.resize(static_cast<size_t>(n) * sizeof(T));
    if (n > 0) std::memcpy(t.data.data(), values, t.data.size());
    return t;
}

template <typename T>
std::vector<T> raw_values(const NamedTensor& t) {
    std::vector<T> out(t.data.size() / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), t.data.data(), out.size() * sizeof(T));
    return out;
}

}  // namespace

int64_t NamedTensor::numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

NamedTensor NamedTensor::f32(std::string name, std::vector<int64_t> shape, const float* values) {
    return make_tensor(std::move(name), "F32", std::move(shape), values);
}
NamedTensor NamedTensor::i32(std::string name, std::vector<int64_t> shape, const int32_t* values) {
    return make_tensor(std::move(name), "I32", std::move(shape), values);
}
NamedTensor NamedTensor::i64(std::string name, std::vector<int64_t> shape, const int64_t* values) {
    return make_tensor(std::move(name), "I64", std::move(shape), values);
}

std::vector<float> NamedTensor::as_f32() const {
    if (dtype != "F32") config_error("tensor " + name, "expected dtype F32", dtype, "store this tensor as float32");
    return raw_values<float>(*this);
}

std::vector<int32_t> NamedTensor::as_i32() const {
    if (dtype == "I32") return raw_values<int32_t>(*this);
    if (dtype == "I64") {
        std::vector<int32_t> out;
        out.reserve(data.size() / 8);
        for (int64_t v : raw_values<int64_t>(*this)) {
            if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
                config_error("tensor " + name, "value does not fit in int32", std::to_string(v),
                             "store values within the int32 range");
            out.push_back(static_cast<int32_t>(v));
        }
        return out;
    }
    config_error("tensor " + name, "expected dtype I32 or I64", dtype, "store this tensor as int32");
}

std::vector<int64_t> NamedTensor::as_i64() const {
    if (dtype == "I64") return raw_values<int64_t>(*this);
    if (dtype == "I32") {
        std::vector<int64_t> out;
        for (int32_t v : raw_values<int32_t>(*this)) out.push_back(v);
        return out;
    }
    config_error("tensor " + name, "expected dtype I64 or I32", dtype, "store this tensor as int64");
}

const NamedTensor* TensorFile::find(const std::string& name) const {
    for (const auto& t : tensors)
        if (t.name == name) return &t;
    return nullptr;
}

void write_safetensors(const std::string& path, const TensorFile& file) {
    json header = json::object();
    std::set<std::string> names;
    uint64_t offset = 0;
    for (const auto& t : file.tensors) {
        MOEBENCH_CHECK(!t.name.empty() && t.name != "__metadata__", "bad tensor name '{}'", t.name);
        MOEBENCH_CHECK(names.insert(t.name).second, "duplicate tensor name '{}'", t.name);
        int64_t elem = dtype_size_bytes(t.dtype);
        MOEBENCH_CHECK(elem > 0, "unknown dtype '{}' for tensor '{}'", t.dtype, t.name);
        MOEBENCH_CHECK(static_cast<int64_t>(t.data.size()) == t.numel() * elem,
                       "tensor '{}': {} bytes for shape of {} elements of {}", t.name, t.data.size(), t.numel(),
                       t.dtype);
        header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.data.size()}}};
        offset += t.data.size();
    }
    if (!file.metadata.empty()) header["__metadata__"] = file.metadata;
    std::string header_text = header.dump();
    // Pad with spaces so the data section starts 8-byte aligned (allowed by the format).
    while ((header_text.size() % 8) != 0) header_text.push_back(' ');

    std::string content;
    content.reserve(8 + header_text.size() + offset);
    uint64_t header_len = header_text.size();
    content.append(reinterpret_cast<const char*>(&header_len), 8);
    content += header_text;
    for (const auto& t : file.tensors) content.append(reinterpret_cast<const char*>(t.data.data()), t.data.size());
    write_file_atomic(path, content);
}

bool looks_like_safetensors(const std::string& head, int64_t file_bytes) {
    if (head.size() < 9 || file_bytes < 9) return false;
    uint64_t header_len = 0;
    std::memcpy(&header_len, head.data(), 8);
    return header_len >= 2 && header_len <= static_cast<uint64_t>(file_bytes) - 8 && head[8] == '{';
}

// The file whole, refused first when the host could not hold it: the bytes, the tensors copied out of them and the
// caller's converted values are about three copies at the peak.
static std::string read_whole_checked(const std::string& path) {
    const int64_t size_bytes = file_size_bytes(path);
    const int64_t avail_bytes = mem_available_bytes();
    if (avail_bytes > 0 && 3.0 * static_cast<double>(size_bytes) > 0.85 * static_cast<double>(avail_bytes))
        config_error(path,
                     fmt::format("is {}; reading it needs about {}, more than the {} of memory available",
                                 human_bytes_iec(double(size_bytes)), human_bytes_iec(3.0 * double(size_bytes)),
                                 human_bytes_iec(double(avail_bytes))),
                     "", "use a smaller file (a routing trace replays cyclically: fewer tokens do)");
    return read_file_bytes(path, std::numeric_limits<int64_t>::max(), "a safetensors file");
}

namespace {

// One byte range of the data section and the tensor that owns it.
struct Span {
    uint64_t begin, end;
    std::string name;
};

// The header of a whole file `content`: its length checked against the file and the format's cap, parsed with the
// nesting bound; `header_len` receives its length.
json read_header(const std::string& content, const std::string& path, uint64_t& header_len) {
    if (content.size() < 8) bad_file(path, "shorter than the 8-byte header length");
    std::memcpy(&header_len, content.data(), 8);
    if (header_len > content.size() - 8)
        bad_file(path, "header length " + std::to_string(header_len) + " exceeds the file size " +
                           std::to_string(content.size()));
    if (header_len > kMaxSafetensorsHeaderBytes)
        bad_file(path, "header length " + std::to_string(header_len) + " is beyond the format's cap of " +
                           std::to_string(kMaxSafetensorsHeaderBytes) + " bytes");
    std::string header_text = content.substr(8, header_len);
    if (header_text.empty() || header_text[0] != '{') bad_file(path, "header does not start with '{'");
    if (json_nesting_depth(header_text) > kMaxJsonDepth)
        bad_file(path, "header nesting too deep (more than " + std::to_string(kMaxJsonDepth) + " levels)");
    json header;
    try {
        header = json::parse(header_text);
    } catch (const json::exception& e) {
        bad_file(path, std::string("header is not valid JSON: ") + e.what());
    }
    if (!header.is_object()) bad_file(path, "header is not a JSON object");
    return header;
}

// Header entry `name` -> its tensor, with dtype, shape and offsets checked against the data section.
NamedTensor read_entry(const std::string& name, const json& v, const char* data, uint64_t data_bytes,
                       const std::string& path, Span& span) {
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
        bad_file(path, "entry '" + name + "' needs dtype, shape and data_offsets");
    if (!v["dtype"].is_string()) bad_file(path, "dtype of '" + name + "' is not a string");
    NamedTensor t;
    t.name = name;
    t.dtype = v["dtype"].get<std::string>();
    int64_t elem = dtype_size_bytes(t.dtype);
    if (elem == 0) bad_file(path, "tensor '" + name + "' has unknown dtype '" + t.dtype + "'");
    if (!v["shape"].is_array()) bad_file(path, "shape of '" + name + "' is not an array");
    for (const auto& d : v["shape"]) {
        if (!d.is_number_integer()) bad_file(path, "shape of '" + name + "' holds a non-integer");
        t.shape.push_back(d.get<int64_t>());
    }
    int64_t numel = checked_numel(t.shape, path, name);
    const json& offs = v["data_offsets"];
    if (!offs.is_array() || offs.size() != 2 || !offs[0].is_number_unsigned() || !offs[1].is_number_unsigned())
        bad_file(path, "data_offsets of '" + name + "' must be two non-negative integers");
    uint64_t begin = offs[0].get<uint64_t>(), end = offs[1].get<uint64_t>();
    if (begin > end || end > data_bytes)
        bad_file(path, "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] of '" + name +
                           "' fall outside the " + std::to_string(data_bytes) + "-byte data section");
    if (numel > static_cast<int64_t>(data_bytes / static_cast<uint64_t>(elem)) ||
        end - begin != static_cast<uint64_t>(numel * elem))
        bad_file(path, "tensor '" + name + "' spans " + std::to_string(end - begin) + " bytes but its shape needs " +
                           std::to_string(numel) + " x " + std::to_string(elem));
    t.data.assign(reinterpret_cast<const uint8_t*>(data + begin), reinterpret_cast<const uint8_t*>(data + end));
    span = {begin, end, name};
    return t;
}

// The format requires tensors to tile the data section exactly: no overlaps, no holes. Sorts `spans`.
void check_tiling(std::vector<Span>& spans, uint64_t data_bytes, const std::string& path) {
    std::sort(spans.begin(), spans.end(),
              [](const Span& a, const Span& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
    uint64_t covered = 0;
    for (const auto& s : spans) {
        if (s.begin != covered)
            bad_file(path, "tensor '" + s.name + "' starts at byte " + std::to_string(s.begin) + ", expected " +
                               std::to_string(covered) + " (overlap or hole in the data section)");
        covered = s.end;
    }
    if (covered != data_bytes)
        bad_file(path, std::to_string(data_bytes - covered) + " trailing bytes after the last tensor");
}

}  // namespace

TensorFile read_safetensors(const std::string& path) {
    const std::string content = read_whole_checked(path);
    uint64_t header_len = 0;
    const json header = read_header(content, path, header_len);
    const uint64_t data_bytes = content.size() - 8 - header_len;
    const char* data = content.data() + 8 + header_len;
    TensorFile out;
    std::vector<Span> spans;
    for (auto it = header.begin(); it != header.end(); ++it) {
        const json& v = it.value();
        if (it.key() == "__metadata__") {
            if (!v.is_object()) bad_file(path, "__metadata__ is not an object");
            for (auto m = v.begin(); m != v.end(); ++m) {
                if (!m.value().is_string()) bad_file(path, "__metadata__ value of '" + m.key() + "' is not a string");
                out.metadata[m.key()] = m.value().get<std::string>();
            }
            continue;
        }
        Span span;
        out.tensors.push_back(read_entry(it.key(), v, data, data_bytes, path, span));
        spans.push_back(span);
    }
    check_tiling(spans, data_bytes, path);
    // Keep the file's data order (the header's JSON order is not meaningful).
    std::stable_sort(out.tensors.begin(), out.tensors.end(), [&](const NamedTensor& a, const NamedTensor& b) {
        auto pos = [&](const std::string& n) {
            for (const auto& s : spans)
                if (s.name == n) return s.begin;
            return uint64_t{0};
        };
        return pos(a.name) < pos(b.name);
    });
    return out;
}

}  // namespace moebench
