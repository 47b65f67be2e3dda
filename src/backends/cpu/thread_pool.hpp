// SPDX-License-Identifier: Apache-2.0
// A small persistent thread pool for the CPU backend's row-parallel phases and its own small-row GEMM kernels
// (large GEMMs go to OpenBLAS, which has its own threads).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace moebench::cpu {

class ThreadPool {
public:
    /// num_threads <= 0: std::thread::hardware_concurrency().
    explicit ThreadPool(int64_t num_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int64_t size() const { return num_threads_; }

    /// Calls fn(begin, end) over disjoint chunks covering [0, n); returns when all are done. The caller's thread
    /// takes part. `min_chunk` avoids waking threads for tiny ranges; `max_chunk` (> 0) caps the chunk (default
    /// ~n / (4 x threads)) for items so large and uneven that a thread left with the last big chunk would idle
    /// the others. Exceptions in fn are rethrown here.
    void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t min_chunk = 1,
                      int64_t max_chunk = 0);

private:
    void worker(int64_t idx);
    void run_chunks();

    int64_t num_threads_ = 1;
    std::vector<std::thread> threads_;
    std::mutex mu_;
    std::condition_variable cv_work_, cv_done_;
    // Written under mu_; atomic so that a spinning worker (or the spinning caller) can watch them without it.
    std::atomic<uint64_t> generation_{0};
    std::atomic<int64_t> pending_workers_{0};
    std::atomic<bool> stop_{false};
    // current job
    const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
    int64_t n_ = 0, chunk_ = 1, next_ = 0;
    std::exception_ptr error_;
};

}  // namespace moebench::cpu
