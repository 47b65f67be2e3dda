// SPDX-License-Identifier: Apache-2.0
// Number formats, and the precision of each tensor class of a run: one value that plan, run, sweep, the sim and the
// counted work all read. A new format is one row of the dtype table (precision.cpp); what a run asks for is resolved in
// config/precision_request.cpp, and what a backend computes is in its traits.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moebench {

/// A storage format of weights, KV cache or activations.
enum class DType { fp32, bf16, fp8, fp8_block, nvfp4, mxfp4, int4, count_ };
inline constexpr int kNumDTypes = static_cast<int>(DType::count_);

/// Which peak rate of a hardware profile a matrix product in this format runs at (model/decode_floor.hpp names the
/// profile's field of each; a profile without it refuses the format).
enum class ComputeRate { fp32, bf16, fp8, fp4 };

/// One row of the dtype table. Storage per element = one value plus its share of the block scales:
/// value_bytes + scale_bytes / block_elems (per-tensor scales, one number per tensor, are not counted).
struct DTypeInfo {
    DType dtype;
    std::string_view name;       // as flags, configs and reports spell it
    double value_bytes;          // one element's value: 4, 2, 1 (8 bits), 0.5 (4 bits)
    int64_t block_elems;         // elements sharing one scale; 0: no block scales
    double scale_bytes;          // one block's scale: fp32 4, bf16 2, fp8 e4m3 or e8m0 1
    ComputeRate weight_compute;  // a linear layer whose weights are stored so: the rate it computes at (int4 is
                                 // weight-only: dequantised to bf16)
    bool weights;                // allowed for weights
    bool kv_cache;               // allowed for the KV cache
    bool dispatch;               // allowed on the expert-parallel wire (dispatch rows)
    std::string_view meaning;    // for --help and docs
    /// Storage per element, block scales included.
    constexpr double bytes_per_elem() const {
        return value_bytes + (block_elems > 0 ? scale_bytes / static_cast<double>(block_elems) : 0.0);
    }
};
const DTypeInfo& dtype_info(DType d);
const std::array<DTypeInfo, kNumDTypes>& dtype_table();
std::string_view to_string(DType d);
/// nullopt for an unknown name.
std::optional<DType> dtype_named(std::string_view name);

/// Block conventions of the block-scaled formats (the rows of precision.cpp use them).
inline constexpr int64_t kInt4GroupSize = 128;   // int4: symmetric groups of 128 weights, one bf16 scale each
inline constexpr int64_t kFp8WeightBlock = 128;  // fp8-block: 128 x 128 weight tiles, one fp32 scale each
inline constexpr int64_t kNvfp4Block = 16;       // nvfp4: 16 elements, one fp8 e4m3 scale
inline constexpr int64_t kMxfp4Block = 32;       // mxfp4 (OCP MX): 32 elements, one e8m0 (power of two) scale

/// The tensor classes of a run, each with its own format.
enum class TensorClass { dense_weights, expert_weights, kv_cache, activations, dispatch, combine, count_ };
inline constexpr int kNumTensorClasses = static_cast<int>(TensorClass::count_);
std::string_view to_string(TensorClass c);

/// The precision of one run, resolved: every class has its format. Dense weights are every linear layer but the
/// routed experts (attention, dense MLP, shared experts); embedding, LM head, norms and router stay in high precision
/// (high_precision_dtype). Activations and the combine rows are in the activation format.
struct Precision {
    DType dense_weights = DType::bf16;
    DType expert_weights = DType::bf16;
    DType kv_cache = DType::bf16;
    DType activations = DType::bf16;
    DType dispatch = DType::bf16;
    DType combine = DType::bf16;

    DType of(TensorClass c) const;
    /// Bytes per element of each class.
    double dense_weight_bytes() const { return dtype_info(dense_weights).bytes_per_elem(); }
    double expert_weight_bytes() const { return dtype_info(expert_weights).bytes_per_elem(); }
    double kv_bytes() const { return dtype_info(kv_cache).bytes_per_elem(); }
    double act_bytes() const { return dtype_info(activations).bytes_per_elem(); }
    /// Embedding, LM head, norms and router: fp32 when the dense weights are fp32, else bf16.
    DType high_precision_dtype() const { return dense_weights == DType::fp32 ? DType::fp32 : DType::bf16; }
    double high_precision_bytes() const { return dtype_info(high_precision_dtype()).bytes_per_elem(); }
    /// "bf16 weights, fp8 experts, fp8 KV cache, bf16 activations, fp8 dispatch": for reports and terminal lines.
    std::string describe() const;
    bool operator==(const Precision&) const = default;
};

/// One format for every class (the backends' native precision: cpu fp32, cuda and sim bf16).
Precision uniform_precision(DType d);
/// The activation format that goes with dense weights of `dense`: fp32 with fp32 weights, else bf16 (fp8 and int4
/// GEMMs quantise their inputs on the fly (fp8-block: 1 x 128 groups; the fp8 dispatch rows are that form on the
/// wire); the residual stream and the combine rows stay bf16).
DType activation_dtype_for(DType dense);

/// "fp32 | bf16 | fp8 | fp8-block | nvfp4 | mxfp4 | int4": the formats allowed for a class, for help texts and errors.
std::string dtype_names_for(TensorClass c, std::string_view separator = " | ");

}  // namespace moebench
