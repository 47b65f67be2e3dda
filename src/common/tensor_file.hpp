// SPDX-License-Identifier: Apache-2.0
// safetensors read/write (https://github.com/huggingface/safetensors format: u64 header length, JSON header, raw data).
// Used for routing traces and --dump-tensors, so both are readable from Python without moebench.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace moebench {

/// One tensor: dtype is a safetensors dtype string ("F32", "I32", "I64", "BF16"); data is little-endian raw bytes.
struct NamedTensor {
    std::string name;
    std::string dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> data;

    int64_t numel() const;
    static NamedTensor f32(std::string name, std::vector<int64_t> shape, const float* values);
    static NamedTensor i32(std::string name, std::vector<int64_t> shape, const int32_t* values);
    static NamedTensor i64(std::string name, std::vector<int64_t> shape, const int64_t* values);
    std::vector<float> as_f32() const;    // F32 only (else ConfigError)
    std::vector<int32_t> as_i32() const;  // I32 or I64 (checked range)
    std::vector<int64_t> as_i64() const;  // I32 or I64
};

struct TensorFile {
    std::vector<NamedTensor> tensors;
    std::map<std::string, std::string> metadata;  // safetensors "__metadata__" (string -> string)
    const NamedTensor* find(const std::string& name) const;
};

/// The largest header read (the `safetensors` Python package's own cap): a corrupt length is refused, not allocated.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

/// True when `head` (the first bytes of a file of `file_bytes` bytes, at least 9) starts like a safetensors file:
/// a little-endian header length that fits in the file, then '{'.
bool looks_like_safetensors(const std::string& head, int64_t file_bytes);

/// Writes atomically (temporary file + rename).
void write_safetensors(const std::string& path, const TensorFile& file);
/// Reads and checks the format (offsets, sizes, dtypes); any problem -> ConfigError naming the file and what is wrong.
/// Every allocation is bounded by the file's size, and a file the host cannot hold (about three copies at the peak)
/// is refused before it is read.
TensorFile read_safetensors(const std::string& path);

}  // namespace moebench
