// SPDX-License-Identifier: Apache-2.0
// What `moebench devices` and the report's environment block say about the GPUs. Plain C++ header (no CUDA types),
// so callers compiled without the CUDA toolkit headers can include it; defined only when MOEBENCH_HAS_CUDA.
#pragma once
#include "common/json_util.hpp"

namespace moebench {

/// The CUDA devices and libraries of this machine. Never throws for "no GPU"; shape:
/// {
///   "available": bool, "reason": "1 GPU(s)" | "no usable GPU: <CUDA error>",
///   "device_count": N,
///   "libraries": {"cuda_runtime": "13.0", "cuda_runtime_compiled": "13.0", "cuda_driver_api": "13.0" | "none (no
///   driver)",
///                 "driver_version": "<NVML string>" | "not available: ...", "cublas": "13.1.0", "cublaslt": "130100",
///                 "nccl": "2.28.9"},
///   "nvml": {"available": bool, "reason": ...},
///   "devices": [{"index", "name", "pci_bus_id", "compute_capability": "9.0", "sms", "memory_total_bytes",
///                "memory_free_bytes", "l2_cache_bytes", "sm_clock_max_mhz", "memory_clock_max_mhz",
///                "memory_bus_width_bits", "memory_bw_theoretical_bytes_per_s" (counted from clock x bus width x 2),
///                "nvml": {...} (counter), "measured": {...} (with measure only: "copy_bw_bytes_per_s",
///                "read_bw_bytes_per_s",
///                             "bf16_gemm_flops", shapes, repetitions; "source": "measured")}]
/// }
/// measure = true runs the copy, read and bf16 GEMM measurements on every device (about a second per device).
json cuda_devices_json(bool measure);

/// Measured ceilings of device `index` (same block as devices[i].measured). Throws CudaError on CUDA failures.
json measure_device_ceilings(int index);

}  // namespace moebench
