// SPDX-License-Identifier: Apache-2.0
// HardwareProfile: datasheet figures of one GPU and its links (configs/hardware/*.json), used for floors and the sim
// backend. The file's fields are one table (config/hardware_fields.cpp): a new field is a member here and a row there.
#pragma once
#include "common/json_util.hpp"

#include <string>
#include <vector>

namespace moebench {

struct HardwareProfile {
    std::string name;                  // short name, e.g. "h200-sxm"
    std::string display_name;          // "NVIDIA H200 SXM 141GB"
    std::string source;                // file
    std::string comment;               // datasheet citations
    double memory_bytes = 0;           // device memory capacity
    double memory_bw_bytes_per_s = 0;  // HBM bandwidth
    double bf16_flops = 0;             // dense (no sparsity) peak FLOP/s
    double fp8_flops = 0;              // 0 = no fp8 units (fp8 and fp8-block weights refused)
    double fp4_flops = 0;              // NVFP4 / MXFP4 tensor peak; 0 = no fp4 units (nvfp4, mxfp4 refused)
    double fp32_flops = 0;
    double int4_flops = 0;              // 0 = not supported natively
    double scaleup_bw_bytes_per_s = 0;  // per GPU, per direction (NVLink / Infinity Fabric)
    int64_t scaleup_links = 0;
    std::string scaleup_name;           // "NVLink4", ...
    double pcie_bw_bytes_per_s = 0;     // per direction
    double network_bw_bytes_per_s = 0;  // scale-out per GPU per direction
    int64_t gpus_per_node = 8;
    double tdp_w = 0;               // board power (TDP / TGP / TBP), watts; 0 = not given
    double price_per_gpu_hour = 0;  // USD per GPU-hour, a stated default; 0 = none public
    std::string price_source;       // where the price comes from, and its date
    std::string machine;            // the machine a measured profile was measured on ("" = a datasheet profile)
};

/// The one default profile: what plan reads and the sim backend models when no hardware is given. cpu and cuda run
/// on this machine and take none unless given (their roofline then has measured ceilings or none).
inline constexpr const char* kDefaultHardware = "h200-sxm";

/// Loads configs/hardware/<name>.json or a path. Unknown name -> ConfigError listing the available profiles.
HardwareProfile load_hardware(const std::string& name_or_path);
HardwareProfile hardware_from_json(const json& j, const std::string& path);
json hardware_to_json(const HardwareProfile& h);

}  // namespace moebench
