// SPDX-License-Identifier: Apache-2.0
// Move-only RAII owners of CUDA resources: device memory, pinned host memory, events, streams, cuBLAS handles.
// Destructors never throw (the _NOEXCEPT macros log instead).
#pragma once
#include "kernels/cuda_check.hpp"

#include <cublas_v2.h>

#include <cstddef>
#include <cstdint>
#include <utility>

namespace moebench {

namespace cuda_detail {

// Where an array's memory comes from. host_visible: the host may index it directly.
struct DeviceMemory {
    static constexpr bool host_visible = false;
    static void* allocate(size_t bytes) {
        void* p = nullptr;
        MOEBENCH_CUDA_CHECK(cudaMalloc(&p, bytes));
        return p;
    }
    static void release(void* p) noexcept { MOEBENCH_CUDA_CHECK_NOEXCEPT(cudaFree(p)); }
};
struct PinnedMemory {
    static constexpr bool host_visible = true;
    static void* allocate(size_t bytes) {
        void* p = nullptr;
        MOEBENCH_CUDA_CHECK(cudaMallocHost(&p, bytes));
        return p;
    }
    static void release(void* p) noexcept { MOEBENCH_CUDA_CHECK_NOEXCEPT(cudaFreeHost(p)); }
};

/// Move-only array of `size()` T in `Memory` (no construction of elements).
template <typename T, typename Memory>
class CudaArray {
public:
    CudaArray() = default;
    explicit CudaArray(int64_t count) { resize(count); }
    ~CudaArray() { release(); }
    CudaArray(const CudaArray&) = delete;
    CudaArray& operator=(const CudaArray&) = delete;
    CudaArray(CudaArray&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), count_(std::exchange(o.count_, 0)) {}
    CudaArray& operator=(CudaArray&& o) noexcept {
        if (this != &o) {
            release();
            ptr_ = std::exchange(o.ptr_, nullptr);
            count_ = std::exchange(o.count_, 0);
        }
        return *this;
    }
    /// Discards the contents; count 0 frees.
    void resize(int64_t count) {
        release();
        if (count <= 0) return;
        ptr_ = static_cast<T*>(Memory::allocate(static_cast<size_t>(count) * sizeof(T)));
        count_ = count;
    }
    T* get() const { return ptr_; }
    T& operator[](int64_t i) const requires Memory::host_visible { return ptr_[i]; }
    int64_t size() const { return count_; }
    size_t bytes() const { return static_cast<size_t>(count_) * sizeof(T); }

private:
    void release() noexcept {
        if (ptr_) Memory::release(ptr_);
        ptr_ = nullptr;
        count_ = 0;
    }
    T* ptr_ = nullptr;
    int64_t count_ = 0;
};

}  // namespace cuda_detail

/// cudaMalloc'd array (no managed memory).
template <typename T>
using DeviceBuffer = cuda_detail::CudaArray<T, cuda_detail::DeviceMemory>;
/// cudaMallocHost'd array (page-locked, for asynchronous copies).
template <typename T>
using PinnedBuffer = cuda_detail::CudaArray<T, cuda_detail::PinnedMemory>;

class CudaEvent {
public:
    CudaEvent() { MOEBENCH_CUDA_CHECK(cudaEventCreate(&ev_)); }
    ~CudaEvent() {
        if (ev_) MOEBENCH_CUDA_CHECK_NOEXCEPT(cudaEventDestroy(ev_));
    }
    CudaEvent(const CudaEvent&) = delete;
    CudaEvent& operator=(const CudaEvent&) = delete;
    CudaEvent(CudaEvent&& o) noexcept : ev_(std::exchange(o.ev_, nullptr)) {}
    CudaEvent& operator=(CudaEvent&& o) noexcept {
        std::swap(ev_, o.ev_);
        return *this;
    }
    cudaEvent_t get() const { return ev_; }

private:
    cudaEvent_t ev_ = nullptr;
};

class CudaStream {
public:
    CudaStream() { MOEBENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
    ~CudaStream() {
        if (s_) MOEBENCH_CUDA_CHECK_NOEXCEPT(cudaStreamDestroy(s_));
    }
    CudaStream(const CudaStream&) = delete;
    CudaStream& operator=(const CudaStream&) = delete;
    cudaStream_t get() const { return s_; }

private:
    cudaStream_t s_ = nullptr;
};

/// cuBLAS handle bound to one stream.
class CublasHandle {
public:
    explicit CublasHandle(cudaStream_t stream) {
        MOEBENCH_CUBLAS_CHECK(cublasCreate(&h_));
        MOEBENCH_CUBLAS_CHECK(cublasSetStream(h_, stream));
    }
    ~CublasHandle() {
        if (h_) MOEBENCH_CUBLAS_CHECK_NOEXCEPT(cublasDestroy(h_));
    }
    CublasHandle(const CublasHandle&) = delete;
    CublasHandle& operator=(const CublasHandle&) = delete;
    cublasHandle_t get() const { return h_; }

private:
    cublasHandle_t h_ = nullptr;
};

}  // namespace moebench
