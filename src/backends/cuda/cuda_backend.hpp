// SPDX-License-Identifier: Apache-2.0
// The CUDA backend (built only with MOEBENCH_HAS_CUDA; its traits always): bf16 weights, cuBLAS GEMMs, own kernels,
// CUDA events per phase.
#pragma once
#include "engine/backend.hpp"

#include <memory>
#include <string>

namespace moebench {

/// True when a usable GPU is present; `reason` says what was found (or why not: no driver, no device).
/// Never throws; maps cudaErrorNoDevice / cudaErrorInsufficientDriver to "no GPU".
bool cuda_available(std::string* reason);

/// What the cuda backend is and accepts (cuda_traits.cpp: also in builds without CUDA).
BackendTraits cuda_backend_traits();
/// Only with MOEBENCH_HAS_CUDA.
std::unique_ptr<Backend> make_cuda_backend();

}  // namespace moebench
