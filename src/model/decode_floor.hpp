// SPDX-License-Identifier: Apache-2.0
// Roofline floor of one decode step: bytes every GPU must read (weights touched + KV) and FLOPs it must do, against the
// hardware profile's bandwidth and peak. A lower bound ("modeled"): no communication, launch or activation traffic.
#pragma once
#include "model/memory_plan.hpp"

#include <map>
#include <string>
#include <string_view>

namespace moebench {

/// Expected number of distinct experts hit by `batch` tokens that each pick `top_k` of `num_experts` experts uniformly
/// without replacement: E * (1 - (1 - k/E)^B). (Each expert is missed by one token with probability 1 - k/E.)
double expected_unique_experts(int64_t num_experts, int64_t top_k, int64_t batch);

/// The hardware profile's field that holds the dense peak of a compute rate ("fp8_tflops", "fp4_tflops", ...), and
/// that peak in FLOP/s: 0 where the profile does not give it (the GPU has no such units, or the profile is silent).
std::string_view rate_field(ComputeRate r);
double profile_rate(const HardwareProfile& hw, ComputeRate r);

/// FLOP/s of a matrix product in format `d` (dtype_info(d).weight_compute): fp32 -> fp32 peak; bf16 -> bf16 peak;
/// fp8 and fp8-block -> fp8 peak; nvfp4 and mxfp4 -> fp4 peak; int4 -> bf16 peak (weight-only W4A16: weights are
/// dequantised, the math runs in bf16). A profile without that rate refuses the format: ConfigError naming `field`
/// (the run field that chose the format), the format, the profile and its rate field, with the formats it does
/// compute as the fix. No fallback: fp8 weights on a GPU without fp8 units run weight-only, which is int4's or bf16's
/// row, not fp8's.
double peak_flops_for(const HardwareProfile& hw, DType d, const std::string& field = "dtype");

/// The peak of every format whose matrix products a step under `p` runs (the phase table's matmul operands: dense
/// and expert weights, the high-precision and activation formats). A format the profile has no rate for is refused
/// as peak_flops_for refuses it, naming --expert-dtype for the experts' format and --dtype for the others.
std::map<DType, double> compute_peaks(const HardwareProfile& hw, const Precision& p);

struct DecodeFloor {
    int64_t batch = 0;
    int64_t context = 0;
    double unique_experts_per_layer = 0;  // expected, over the global batch
    int64_t num_moe_layers = 0;
    // Per GPU (balanced: experts and sequences spread evenly; every attention replica reads its own copy of the
    // non-expert weights).
    double weight_bytes_per_gpu = 0;  // non-expert weights + embedding rows + shared experts
    double expert_bytes_per_gpu = 0;  // touched routed experts
    double kv_bytes_per_gpu = 0;      // KV of this GPU's sequences at `context`
    double bytes_per_gpu = 0;
    double flops_per_gpu = 0;
    // Whole step, all GPUs together.
    double bytes_per_step = 0;
    double flops_per_step = 0;
    double mem_bw_bytes_per_s = 0;
    std::map<std::string, double> peak_flops_by_format;  // the peak of each format the step computes in
    double peak_flops = 0;                               // effective: flops_per_gpu / compute time
    double memory_time_us = 0;                           // bytes_per_gpu / mem_bw
    double compute_time_us = 0;                          // each part's FLOPs per GPU at its format's peak, summed
    double time_us = 0;                                  // max of the two
    std::string bound;                                   // "memory" or "compute"
};

/// Refuses a precision whose formats the profile has no rate for (compute_peaks). The MTP module is not part
/// of a decode step here (it is a speculative-decoding draft), whatever in.include_mtp says.
DecodeFloor decode_floor(const ModelConfig& m, const HardwareProfile& hw, const PlanInput& in);

}  // namespace moebench
