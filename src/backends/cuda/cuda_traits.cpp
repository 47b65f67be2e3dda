// SPDX-License-Identifier: Apache-2.0
// What the cuda backend is and accepts. Plain C++, compiled also without the CUDA toolkit, so that a build without
// it can still say which backend an option belongs to.
#include "backends/cuda/cuda_backend.hpp"

namespace moebench {

BackendTraits cuda_backend_traits() {
    BackendTraits t;
    t.name = "cuda";
    t.native_precision = uniform_precision(DType::bf16);  // bf16 storage, fp32 accumulation
    t.weight_dtypes = {DType::bf16};
    t.kv_dtypes = {DType::bf16};
    t.dispatch_dtypes = {DType::bf16};
    t.capabilities = {Capability::ceilings, Capability::tensors, Capability::device_counters};
    t.expert_gemm = {"auto", "gemv", "tiled", "grouped", "loop"};
    t.attention_kernel = {"auto", "split", "flash", "latent"};
    t.switches = {"cuda_graph", "cold_l2", "expert_times"};
    t.check = {1e-2, 1e-3};  // bf16 against the fp32 reference
    return t;
}

}  // namespace moebench
