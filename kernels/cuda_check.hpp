// SPDX-License-Identifier: Apache-2.0
// Error macros for CUDA runtime, cuBLAS and NCCL calls (style.md 2.7): throw with file:line and the library's message;
// the _NOEXCEPT twins log to stderr and never throw (for destructors).
#pragma once
#include "common/error.hpp"

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#if MOEBENCH_HAS_NCCL  // NCCL is optional in the build (cmake/MoebenchNccl.cmake)
#include <nccl.h>
#endif

#include <cstdio>
#include <string>

namespace moebench {

/// A CUDA runtime or cuBLAS failure. Exit 1.
class CudaError : public Error {
public:
    using Error::Error;
};

/// An NCCL failure. Exit 1.
class NcclError : public Error {
public:
    using Error::Error;
};

namespace cuda_detail {

[[noreturn]] inline void throw_cuda(const char* file, int line, const char* call, cudaError_t err) {
    cudaGetLastError();  // reset the sticky per-thread error so later calls report their own status
    throw CudaError(
        fmt::format("{}:{}: {} failed: {} ({})", file, line, call, cudaGetErrorString(err), cudaGetErrorName(err)));
}

[[noreturn]] inline void throw_cublas(const char* file, int line, const char* call, cublasStatus_t st) {
    throw CudaError(
        fmt::format("{}:{}: {} failed: {} ({})", file, line, call, cublasGetStatusString(st), static_cast<int>(st)));
}

#if MOEBENCH_HAS_NCCL
[[noreturn]] inline void throw_nccl(const char* file, int line, const char* call, ncclResult_t r, ncclComm_t comm) {
    const char* last = comm ? ncclGetLastError(comm) : ncclGetLastError(nullptr);
    throw NcclError(fmt::format("{}:{}: {} failed: {}{}{}", file, line, call, ncclGetErrorString(r),
                                (last && *last) ? ": " : "", last ? last : ""));
}
#endif

}  // namespace cuda_detail
}  // namespace moebench

#define MOEBENCH_CUDA_CHECK(call)                                                          \
    do {                                                                                   \
        const cudaError_t moebench_err_ = (call);                                          \
        if (moebench_err_ != cudaSuccess)                                                  \
            ::moebench::cuda_detail::throw_cuda(__FILE__, __LINE__, #call, moebench_err_); \
    } while (false)

#define MOEBENCH_CUBLAS_CHECK(call)                                                         \
    do {                                                                                    \
        const cublasStatus_t moebench_st_ = (call);                                         \
        if (moebench_st_ != CUBLAS_STATUS_SUCCESS)                                          \
            ::moebench::cuda_detail::throw_cublas(__FILE__, __LINE__, #call, moebench_st_); \
    } while (false)

#if MOEBENCH_HAS_NCCL
/// `comm` may be nullptr (before a communicator exists).
#define MOEBENCH_NCCL_CHECK(call, comm)                                                           \
    do {                                                                                          \
        const ncclResult_t moebench_nr_ = (call);                                                 \
        if (moebench_nr_ != ncclSuccess)                                                          \
            ::moebench::cuda_detail::throw_nccl(__FILE__, __LINE__, #call, moebench_nr_, (comm)); \
    } while (false)
#endif

#define MOEBENCH_CUDA_CHECK_NOEXCEPT(call)                                                               \
    do {                                                                                                 \
        const cudaError_t moebench_err_ = (call);                                                        \
        if (moebench_err_ != cudaSuccess) {                                                              \
            std::fprintf(stderr, "moebench: warning: %s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, \
                         cudaGetErrorString(moebench_err_));                                             \
            cudaGetLastError();                                                                          \
        }                                                                                                \
    } while (false)

#define MOEBENCH_CUBLAS_CHECK_NOEXCEPT(call)                                                             \
    do {                                                                                                 \
        const cublasStatus_t moebench_st_ = (call);                                                      \
        if (moebench_st_ != CUBLAS_STATUS_SUCCESS)                                                       \
            std::fprintf(stderr, "moebench: warning: %s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, \
                         cublasGetStatusString(moebench_st_));                                           \
    } while (false)

#if MOEBENCH_HAS_NCCL
#define MOEBENCH_NCCL_CHECK_NOEXCEPT(call)                                                               \
    do {                                                                                                 \
        const ncclResult_t moebench_nr_ = (call);                                                        \
        if (moebench_nr_ != ncclSuccess)                                                                 \
            std::fprintf(stderr, "moebench: warning: %s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, \
                         ncclGetErrorString(moebench_nr_));                                              \
    } while (false)
#endif
