// SPDX-License-Identifier: Apache-2.0
// A small persistent thread pool for the CPU backend's row-parallel phases and its own small-row GEMM kernels
// (large GEMMs go to OpenBLAS, which has its own threads).
#pragma once
#include "common/host_cpus.hpp"
#include "config/run_config.hpp"

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
    /// The run config's bound (config/run_config.hpp), checked here too for every other caller (bench moe) before
    /// thousands of stacks are asked for.
    static constexpr int64_t kMaxThreads = ::moebench::kMaxThreads;

    /// Starts one worker thread; a test seam (the default is std::thread) so that a failure at thread k can be
    /// injected where RLIMIT_NPROC cannot bite (root).
    using ThreadStarter = std::function<std::thread(std::function<void()>)>;

    /// num_threads <= 0: usable_cpus(). More than kMaxThreads, or a thread the system refuses to start (RLIMIT_NPROC,
    /// cgroup pids.max, kernel threads-max) -> ConfigError naming --threads, how many threads could be started and
    /// the limits in force; the threads already started are joined first, so nothing hangs or leaks.
    explicit ThreadPool(int64_t num_threads, const ThreadStarter& start = {});
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int64_t size() const { return num_threads_; }

    /// Whether idle workers (and the waiting caller) spin briefly before sleeping: only while the pool has no more
    /// threads than usable CPUs; oversubscribed, a spinning thread would steal the core of one with work.
    bool spins() const { return spin_; }

    /// Calls fn(begin, end) over disjoint chunks covering [0, n); returns when all are done. The caller's thread
    /// takes part. `min_chunk` avoids waking threads for tiny ranges; `max_chunk` (> 0) caps the chunk (default
    /// ~n / (4 x threads that can run at once)) for items so large and uneven that a thread left with the last big
    /// chunk would idle the others. Exceptions in fn are rethrown here.
    void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t min_chunk = 1,
                      int64_t max_chunk = 0);

private:
    void start_workers(const ThreadStarter& start);
    void stop_workers();
    void worker();
    void work_on(uint64_t generation);
    // Claims and runs chunks of the current job until none is left; called with `lk` held, returns with it held.
    void run_chunks(std::unique_lock<std::mutex>& lk);

    int64_t num_threads_ = 1;
    int64_t parallelism_ = 1;  // threads that can run at once: min(threads, usable CPUs); sizes the chunks
    bool spin_ = true;
    std::vector<std::thread> threads_;
    std::mutex mu_;
    std::condition_variable cv_work_, cv_done_;
    // Written under mu_; atomic so that a spinning worker (or the spinning caller) can watch them without it.
    std::atomic<uint64_t> generation_{0};
    std::atomic<int64_t> active_workers_{0};  // workers inside the current job; the caller waits for these only
    std::atomic<bool> stop_{false};
    // current job
    const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
    int64_t n_ = 0, chunk_ = 1, next_ = 0;
    std::exception_ptr error_;
};

}  // namespace moebench::cpu
