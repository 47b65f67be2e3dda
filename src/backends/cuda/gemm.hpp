// SPDX-License-Identifier: Apache-2.0
// cuBLAS GEMMs in row-major terms (PyTorch Linear layout: W is [out, in]), bf16 inputs, fp32 accumulation; and the
// expert GEMMs: a per-expert cublasGemmEx loop (baseline) or one cublasGemmGroupedBatchedEx call (device pointer
// arrays).
#pragma once
#include "backends/cuda/device_buffer.hpp"
#include "kernels/launch.hpp"

#include <cublas_v2.h>

#include <cstdint>
#include <string>
#include <vector>

namespace moebench {

using kernels::bf16;

/// Y[m, n] = X[m, k] . W[n, k]^T + beta * Y. Y is bf16 (y_type CUDA_R_16BF) or fp32 (CUDA_R_32F). Leading dimensions
/// are row strides in elements. Synchronous only in the stream sense (enqueued on the handle's stream).
void gemm_xwt(cublasHandle_t h, int64_t m, int64_t n, int64_t k, const bf16* x, int64_t ldx, const bf16* w, int64_t ldw,
              void* y, cudaDataType_t y_type, int64_t ldy, float beta = 0.0f);

/// Batched over `batch` heads with element strides between consecutive heads:
/// Y_b[m, n] = X_b[m, k] . W_b^T (w_transposed = true, W_b is [n, k]) or X_b . W_b (false, W_b is [k, n]).
void gemm_batched(cublasHandle_t h, bool w_transposed, int64_t m, int64_t n, int64_t k, const bf16* x, int64_t ldx,
                  int64_t stride_x, const bf16* w, int64_t ldw, int64_t stride_w, bf16* y, int64_t ldy,
                  int64_t stride_y, int64_t batch);

/// The expert GEMMs of one layer: for every expert e with counts[e] > 0,
/// Y[off_e : off_e + counts[e], :n] = X[off_e : ..., :k] . W_e^T, W_e = w + e * n * k ([n, k]).
/// Rows of X and Y are contiguous (ld = k and n). `grouped` = one cublasGemmGroupedBatchedEx call (its matrix pointer
/// arrays go to the device through `ptr_host` (pinned, 3*E) and `ptr_dev` (3*E)); else one cublasGemmEx per expert,
/// with an event before each expert and after the last when `expert_events` is non-null (per-expert times).
struct ExpertGemmArgs {
    const int32_t* counts_host = nullptr;   // [E]
    const int32_t* offsets_host = nullptr;  // [E+1]
    int64_t num_experts = 0, n = 0, k = 0;
    const bf16* x = nullptr;
    const bf16* w = nullptr;
    bf16* y = nullptr;
};
void expert_gemm_loop(cublasHandle_t h, cudaStream_t stream, const ExpertGemmArgs& a,
                      std::vector<CudaEvent>* expert_events, std::vector<int>* event_experts, bool capturing);
void expert_gemm_grouped(cublasHandle_t h, cudaStream_t stream, const ExpertGemmArgs& a, const void** ptr_host,
                         const void** ptr_dev);

}  // namespace moebench
