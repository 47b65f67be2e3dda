// SPDX-License-Identifier: Apache-2.0
// PLACEHOLDER: replaced by the real CUDA backend.
#include "backends/cuda/cuda_backend.hpp"

#include "common/error.hpp"

#include <cuda_runtime_api.h>

namespace moebench {

bool cuda_available(std::string* reason) {
    int count = 0;  // not written on failure
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        if (reason) *reason = std::string("no usable GPU: ") + cudaGetErrorString(err);
        cudaGetLastError();
        return false;
    }
    if (count == 0) {
        if (reason) *reason = "no GPU found";
        return false;
    }
    if (reason) *reason = std::to_string(count) + " GPU(s)";
    return true;
}

std::unique_ptr<Backend> make_cuda_backend() { throw UnsupportedError("cuda backend: not implemented yet"); }

}  // namespace moebench
