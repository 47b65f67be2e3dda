// SPDX-License-Identifier: Apache-2.0
// `moebench devices`: the GPUs found (or plainly why none), the CPU and host memory (from /proc), and, in CUDA builds,
// the toolkit/runtime/driver versions, as the document "moebench.devices/1". Its views are the format table's.
#pragma once
#include "common/json_util.hpp"

namespace moebench {

/// The moebench.devices/1 document; `measure`: also each GPU's copy/read bandwidth and bf16 GEMM rate (~1 s each).
json devices_document(bool measure);

/// `devices --hardware-fields`: {"profile": the hardware profile's fields, "sim": its sim object's fields}, one object
/// per field, from their tables (config/hardware_fields.hpp, backends/sim/sim_backend.hpp).
json hardware_fields_document();

}  // namespace moebench
