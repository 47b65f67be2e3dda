// SPDX-License-Identifier: Apache-2.0
// The CPU reference backend: every phase in fp32 on the host, OpenBLAS GEMMs, multithreaded.
#pragma once
#include "engine/backend.hpp"

#include <memory>

namespace moebench {

/// What the cpu backend is and accepts (registry and CpuBackend::traits()).
BackendTraits cpu_backend_traits();
std::unique_ptr<Backend> make_cpu_backend();

}  // namespace moebench
