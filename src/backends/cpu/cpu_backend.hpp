// SPDX-License-Identifier: Apache-2.0
// The CPU reference backend: every phase in fp32 on the host, OpenBLAS GEMMs, multithreaded.
#pragma once
#include "engine/backend.hpp"

#include <memory>

namespace moebench {

std::unique_ptr<Backend> make_cpu_backend();

}  // namespace moebench
