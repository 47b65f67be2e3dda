// SPDX-License-Identifier: Apache-2.0
// Row-major wrappers over cublasGemmEx / cublasGemmStridedBatchedEx / cublasGemmGroupedBatchedEx.
// Row-major Y[m,n] = X[m,k] W[n,k]^T is column-major Y^T[n,m] = W^T... i.e. cuBLAS (op_A = T on W, op_B = N on X).
#include "backends/cuda/gemm.hpp"

namespace moebench {
namespace {
int to_i(int64_t v) {
    MOEBENCH_CHECK(v >= 0 && v <= INT32_MAX, "GEMM dimension {} does not fit cuBLAS's int", v);
    return static_cast<int>(v);
}
}  // namespace

void gemm_xwt(cublasHandle_t h, int64_t m, int64_t n, int64_t k, const bf16* x, int64_t ldx, const bf16* w, int64_t ldw,
              void* y, cudaDataType_t y_type, int64_t ldy, float beta) {
    if (m <= 0 || n <= 0) return;
    const float alpha = 1.0f;
    MOEBENCH_CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, to_i(n), to_i(m), to_i(k), &alpha, w, CUDA_R_16BF,
                                       to_i(ldw), x, CUDA_R_16BF, to_i(ldx), &beta, y, y_type, to_i(ldy),
                                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void gemm_batched(cublasHandle_t h, bool w_transposed, int64_t m, int64_t n, int64_t k, const bf16* x, int64_t ldx,
                  int64_t stride_x, const bf16* w, int64_t ldw, int64_t stride_w, bf16* y, int64_t ldy,
                  int64_t stride_y, int64_t batch) {
    if (m <= 0 || n <= 0 || batch <= 0) return;
    const float alpha = 1.0f, beta = 0.0f;
    // W_b [n, k] row-major is column-major [k, n]: op T gives [n, k]. W_b [k, n] row-major is column-major [n, k]: op
    // N.
    MOEBENCH_CUBLAS_CHECK(cublasGemmStridedBatchedEx(h, w_transposed ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, to_i(n),
                                                     to_i(m), to_i(k), &alpha, w, CUDA_R_16BF, to_i(ldw), stride_w, x,
                                                     CUDA_R_16BF, to_i(ldx), stride_x, &beta, y, CUDA_R_16BF, to_i(ldy),
                                                     stride_y, to_i(batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void expert_gemm_loop(cublasHandle_t h, cudaStream_t stream, const ExpertGemmArgs& a,
                      std::vector<CudaEvent>* expert_events, std::vector<int>* event_experts, bool capturing) {
    if (event_experts) event_experts->clear();
    size_t ev = 0;
    auto record = [&] {
        if (!expert_events) return;
        MOEBENCH_CHECK(ev < expert_events->size(), "expert event pool too small ({})", expert_events->size());
        MOEBENCH_CUDA_CHECK(cudaEventRecordWithFlags((*expert_events)[ev++].get(), stream,
                                                     capturing ? cudaEventRecordExternal : cudaEventRecordDefault));
    };
    for (int64_t e = 0; e < a.num_experts; ++e) {
        const int64_t rows = a.counts_host[e];
        if (rows <= 0) continue;
        record();
        if (event_experts) event_experts->push_back(static_cast<int>(e));
        const int64_t off = a.offsets_host[e];
        gemm_xwt(h, rows, a.n, a.k, a.x + off * a.k, a.k, a.w + e * a.n * a.k, a.k, a.y + off * a.n, CUDA_R_16BF, a.n);
    }
    if (event_experts && !event_experts->empty()) record();
}

void expert_gemm_grouped(cublasHandle_t h, cudaStream_t stream, const ExpertGemmArgs& a, const void** ptr_host,
                         const void** ptr_dev) {
    // One group per active expert (group_size 1): the shapes differ by the token count only.
    std::vector<cublasOperation_t> ta, tb;
    std::vector<int> m, n, k, lda, ldb, ldc, group_size;
    std::vector<float> alpha, beta;
    int g = 0;
    for (int64_t e = 0; e < a.num_experts; ++e) {
        const int64_t rows = a.counts_host[e];
        if (rows <= 0) continue;
        const int64_t off = a.offsets_host[e];
        ta.push_back(CUBLAS_OP_T);
        tb.push_back(CUBLAS_OP_N);
        m.push_back(to_i(a.n));
        n.push_back(to_i(rows));
        k.push_back(to_i(a.k));
        lda.push_back(to_i(a.k));
        ldb.push_back(to_i(a.k));
        ldc.push_back(to_i(a.n));
        alpha.push_back(1.0f);
        beta.push_back(0.0f);
        group_size.push_back(1);
        ptr_host[g] = a.w + e * a.n * a.k;
        ptr_host[a.num_experts + g] = a.x + off * a.k;
        ptr_host[2 * a.num_experts + g] = a.y + off * a.n;
        ++g;
    }
    if (g == 0) return;
    // The pointer arrays must be in device memory (shared notes 1.3): one H2D copy of the 3 x E table.
    MOEBENCH_CUDA_CHECK(
        cudaMemcpyAsync(ptr_dev, ptr_host, 3 * a.num_experts * sizeof(void*), cudaMemcpyHostToDevice, stream));
    MOEBENCH_CUBLAS_CHECK(cublasGemmGroupedBatchedEx(
        h, ta.data(), tb.data(), m.data(), n.data(), k.data(), alpha.data(), ptr_dev, CUDA_R_16BF, lda.data(),
        ptr_dev + a.num_experts, CUDA_R_16BF, ldb.data(), beta.data(), const_cast<void**>(ptr_dev + 2 * a.num_experts),
        CUDA_R_16BF, ldc.data(), g, group_size.data(), CUBLAS_COMPUTE_32F));
}

}  // namespace moebench
