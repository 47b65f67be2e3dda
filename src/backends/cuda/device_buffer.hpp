// SPDX-License-Identifier: Apache-2.0
// Move-only RAII owners of CUDA resources: device memory, pinned host memory, events, streams, cuBLAS handles.
// Destructors never throw (the _NOEXCEPT macros log instead).
#pragma once
#include "backends/cuda/cuda_check.hpp"

#include <cublas_v2.h>

#include <cstddef>
#include <cstdint>
#include <utility>

namespace moebench {

/// cudaMalloc'd array of `size()` T (no managed memory, no construction of elements).
template <typename T>
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(int64_t count) { resize(count); }
    ~DeviceBuffer() { release(); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), count_(std::exchange(o.count_, 0)) {}
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
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
        void* p = nullptr;
        MOEBENCH_CUDA_CHECK(cudaMalloc(&p, static_cast<size_t>(count) * sizeof(T)));
        ptr_ = static_cast<T*>(p);
        count_ = count;
    }
    T* get() const { return ptr_; }
    int64_t size() const { return count_; }
    size_t bytes() const { return static_cast<size_t>(count_) * sizeof(T); }

private:
    void release() noexcept {
        if (ptr_) MOEBENCH_CUDA_CHECK_NOEXCEPT(cudaFree(ptr_));
        ptr_ = nullptr;
        count_ = 0;
    }
    T* ptr_ = nullptr;
    int64_t count_ = 0;
};

/// cudaMallocHost'd array (page-locked, for asynchronous copies).
template <typename T>
class PinnedBuffer {
public:
    PinnedBuffer() = default;
    explicit PinnedBuffer(int64_t count) { resize(count); }
    ~PinnedBuffer() { release(); }
    PinnedBuffer(const PinnedBuffer&) = delete;
    PinnedBuffer& operator=(const PinnedBuffer&) = delete;
    PinnedBuffer(PinnedBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), count_(std::exchange(o.count_, 0)) {}
    PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
        if (this != &o) {
            release();
            ptr_ = std::exchange(o.ptr_, nullptr);
            count_ = std::exchange(o.count_, 0);
        }
        return *this;
    }
    void resize(int64_t count) {
        release();
        if (count <= 0) return;
        void* p = nullptr;
        MOEBENCH_CUDA_CHECK(cudaMallocHost(&p, static_cast<size_t>(count) * sizeof(T)));
        ptr_ = static_cast<T*>(p);
        count_ = count;
    }
    T* get() const { return ptr_; }
    T& operator[](int64_t i) const { return ptr_[i]; }
    int64_t size() const { return count_; }

private:
    void release() noexcept {
        if (ptr_) MOEBENCH_CUDA_CHECK_NOEXCEPT(cudaFreeHost(ptr_));
        ptr_ = nullptr;
        count_ = 0;
    }
    T* ptr_ = nullptr;
    int64_t count_ = 0;
};

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
