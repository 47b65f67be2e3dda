// SPDX-License-Identifier: Apache-2.0
#include "core/precision.hpp"

#include <fmt/format.h>

namespace moebench {

namespace {

// The one table of number formats: a new format is a row here (and, for the sim and plan's floor, the peak rate it
// computes at: model/decode_floor.cpp maps each ComputeRate to the profile's field).
// columns: dtype, name, value bytes, block elements, scale bytes, compute rate, weights, KV cache, dispatch, meaning
constexpr std::array<DTypeInfo, kNumDTypes> kDTypes = {{
    {DType::fp32, "fp32", 4.0, 0, 0.0, ComputeRate::fp32, true, true, true, "IEEE single precision"},
    {DType::bf16, "bf16", 2.0, 0, 0.0, ComputeRate::bf16, true, true, true, "bfloat16"},
    {DType::fp8, "fp8", 1.0, 0, 0.0, ComputeRate::fp8, true, true, true,
     "fp8 e4m3 with per-tensor scales (not counted); as dispatch rows one fp32 scale per 128 channels, counted"},
    {DType::fp8_block, "fp8-block", 1.0, kFp8WeightBlock* kFp8WeightBlock, 4.0, ComputeRate::fp8, true, false, false,
     "fp8 e4m3 weights in 128 x 128 blocks with one fp32 scale each (DeepSeek-V3's checkpoints), the GEMM inputs "
     "quantised on the fly in 1 x 128 groups (on the wire: dispatch_dtype fp8); fp8 rate"},
    {DType::nvfp4, "nvfp4", 0.5, kNvfp4Block, 1.0, ComputeRate::fp4, true, false, false,
     "4-bit e2m1 weights in blocks of 16 with one fp8 e4m3 scale each (the per-tensor fp32 scale not counted), "
     "inputs quantised alike; fp4 tensor-core rate"},
    {DType::mxfp4, "mxfp4", 0.5, kMxfp4Block, 1.0, ComputeRate::fp4, true, false, false,
     "4-bit e2m1 weights in blocks of 32 with one e8m0 scale each (OCP MX; gpt-oss's checkpoints); fp4 tensor-core "
     "rate"},
    {DType::int4, "int4", 0.5, kInt4GroupSize, 2.0, ComputeRate::bf16, true, false, false,
     "4-bit weights in groups of 128 with one bf16 scale each, weight-only: computed in bf16 after dequantisation"},
}};

constexpr bool table_in_enum_order() {
    for (int i = 0; i < kNumDTypes; ++i)
        if (static_cast<int>(kDTypes[static_cast<size_t>(i)].dtype) != i) return false;
    return true;
}
static_assert(table_in_enum_order(), "kDTypes rows must follow enum DType");

}  // namespace

const std::array<DTypeInfo, kNumDTypes>& dtype_table() { return kDTypes; }
const DTypeInfo& dtype_info(DType d) { return kDTypes[static_cast<size_t>(d)]; }
std::string_view to_string(DType d) { return dtype_info(d).name; }

std::optional<DType> dtype_named(std::string_view name) {
    for (const DTypeInfo& i : kDTypes)
        if (i.name == name) return i.dtype;
    return std::nullopt;
}

std::string_view to_string(TensorClass c) {
    switch (c) {
        case TensorClass::dense_weights: return "dense weights";
        case TensorClass::expert_weights: return "expert weights";
        case TensorClass::kv_cache: return "KV cache";
        case TensorClass::activations: return "activations";
        case TensorClass::dispatch: return "dispatch";
        case TensorClass::combine: return "combine";
        case TensorClass::count_: break;
    }
    return "?";
}

DType Precision::of(TensorClass c) const {
    switch (c) {
        case TensorClass::dense_weights: return dense_weights;
        case TensorClass::expert_weights: return expert_weights;
        case TensorClass::kv_cache: return kv_cache;
        case TensorClass::activations: return activations;
        case TensorClass::dispatch: return dispatch;
        case TensorClass::combine: return combine;
        case TensorClass::count_: break;
    }
    return activations;
}

std::string Precision::describe() const {
    if (*this == uniform_precision(dense_weights))
        return fmt::format("{} weights and activations", to_string(dense_weights));
    std::string s = fmt::format("{} weights", to_string(dense_weights));
    if (expert_weights != dense_weights) s += fmt::format(", {} experts", to_string(expert_weights));
    s += fmt::format(", {} KV cache, {} activations", to_string(kv_cache), to_string(activations));
    if (dispatch != activations) s += fmt::format(", {} dispatch", to_string(dispatch));
    return s;
}

Precision uniform_precision(DType d) { return Precision{d, d, d, d, d, d}; }

DType activation_dtype_for(DType dense) { return dense == DType::fp32 ? DType::fp32 : DType::bf16; }

std::string dtype_names_for(TensorClass c, std::string_view separator) {
    std::string s;
    for (const DTypeInfo& i : kDTypes) {
        const bool allowed = c == TensorClass::kv_cache   ? i.kv_cache
                             : c == TensorClass::dispatch ? i.dispatch
                             : c == TensorClass::dense_weights || c == TensorClass::expert_weights
                                 ? i.weights
                                 : i.dtype == DType::fp32 || i.dtype == DType::bf16;
        if (allowed) s += (s.empty() ? "" : std::string(separator)) + std::string(i.name);
    }
    return s;
}

}  // namespace moebench
