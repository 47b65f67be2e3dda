// SPDX-License-Identifier: Apache-2.0
// Roofline floor of one decode step: bytes every GPU must read (weights touched + KV) and FLOPs it must do, against the
// hardware profile's bandwidth and peak. A lower bound ("modeled"): no communication, launch or activation traffic.
#pragma once
#include "model/memory_plan.hpp"

#include <string>

namespace moebench {

/// Expected number of distinct experts hit by `batch` tokens that each pick `top_k` of `num_experts` experts uniformly
/// without replacement: E * (1 - (1 - k/E)^B). (Each expert is missed by one token with probability 1 - k/E.)
double expected_unique_experts(int64_t num_experts, int64_t top_k, int64_t batch);

/// FLOP/s of a matrix product whose weights are stored in `d` (dtype_info(d).weight_compute): bf16 -> bf16 peak; fp8 ->
/// fp8 peak (bf16 where the GPU has no fp8, i.e. weight-only); int4 -> bf16 peak (weight-only W4A16: weights are
/// dequantised, the math runs in bf16); fp32 -> fp32 peak (bf16 where the profile gives none).
double peak_flops_for(const HardwareProfile& hw, DType d);

struct DecodeFloor {
    int64_t batch = 0;
    int64_t context = 0;
    double unique_experts_per_layer = 0;    // expected, over the global batch
    int64_t num_moe_layers = 0;
    // Per GPU (balanced: experts and sequences spread evenly; every attention replica reads its own copy of the
    // non-expert weights).
    double weight_bytes_per_gpu = 0;        // non-expert weights + embedding rows + shared experts
    double expert_bytes_per_gpu = 0;        // touched routed experts
    double kv_bytes_per_gpu = 0;            // KV of this GPU's sequences at `context`
    double bytes_per_gpu = 0;
    double flops_per_gpu = 0;
    // Whole step, all GPUs together.
    double bytes_per_step = 0;
    double flops_per_step = 0;
    double mem_bw_bytes_per_s = 0;
    double peak_flops = 0;
    double memory_time_us = 0;              // bytes_per_gpu / mem_bw
    double compute_time_us = 0;             // flops_per_gpu / peak
    double time_us = 0;                     // max of the two
    std::string bound;                      // "memory" or "compute"
};

/// The MTP module is not part of a decode step here (it is a speculative-decoding draft), whatever in.include_mtp says.
DecodeFloor decode_floor(const ModelConfig& m, const HardwareProfile& hw, const PlanInput& in);

}  // namespace moebench
