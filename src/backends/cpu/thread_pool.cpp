// SPDX-License-Identifier: Apache-2.0
// ThreadPool: between jobs a worker spins briefly, then sleeps on a condition variable, so that back-to-back
// phases do not pay a wake-up each while idle workers never compete with OpenBLAS threads for long.
#include "backends/cpu/thread_pool.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace moebench::cpu {

namespace {

// How long a worker waiting for the next job, and the caller waiting for the workers, poll before sleeping.
// A condition-variable wake-up costs ~22 us on the 2-vCPU KVM guests of results/ (~100 us after 1 ms idle, when
// the vCPU has halted), and a decode step runs several pool jobs per phase a few microseconds apart: spinning
// through those gaps took the fork-join of an empty job from 22 us to ~1 us.
constexpr auto kSpinTime = std::chrono::microseconds(200);

inline void cpu_relax() {
#if defined(__x86_64__)
    _mm_pause();
#else
    std::this_thread::yield();
#endif
}

// Polls done() until it holds or kSpinTime has passed; returns whether it holds.
template <class Done>
bool spin_until(const Done& done) {
    const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
    for (int i = 0;; ++i) {
        if (done()) return true;
        for (int r = 0; r < 16; ++r) cpu_relax();
        if ((i & 63) == 63 && std::chrono::steady_clock::now() > deadline) return done();
    }
}

}  // namespace

ThreadPool::ThreadPool(int64_t num_threads) {
    if (num_threads <= 0) num_threads = std::max<int64_t>(1, std::thread::hardware_concurrency());
    num_threads_ = num_threads;
    for (int64_t i = 1; i < num_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_.store(true);
    }
    cv_work_.notify_all();
    for (auto& t : threads_) t.join();
}

void ThreadPool::run_chunks() {
    for (;;) {
        int64_t b;
        {
            std::lock_guard<std::mutex> lk(mu_);
            if (next_ >= n_) return;
            b = next_;
            next_ = std::min(n_, next_ + chunk_);
        }
        try {
            (*fn_)(b, std::min(n_, b + chunk_));
        } catch (...) {
            std::lock_guard<std::mutex> lk(mu_);
            if (!error_) error_ = std::current_exception();
            next_ = n_;
        }
    }
}

void ThreadPool::worker(int64_t) {
    uint64_t seen = 0;
    for (;;) {
        const auto ready = [&] {
            return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen;
        };
        if (!spin_until(ready)) {
            std::unique_lock<std::mutex> lk(mu_);
            cv_work_.wait(lk, ready);
        }
        if (stop_.load()) return;
        seen = generation_.load(std::memory_order_acquire);
        run_chunks();
        // The caller's predicate is checked under mu_, so taking it here before notifying loses no wake-up.
        if (pending_workers_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            std::lock_guard<std::mutex> lk(mu_);
            cv_done_.notify_one();
        }
    }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t min_chunk,
                              int64_t max_chunk) {
    if (n <= 0) return;
    min_chunk = std::max<int64_t>(1, min_chunk);
    if (threads_.empty() || n <= min_chunk) {
        fn(0, n);
        return;
    }
    {
        std::lock_guard<std::mutex> lk(mu_);
        fn_ = &fn;
        n_ = n;
        next_ = 0;
        // ~4 chunks per thread balances uneven rows without much locking.
        chunk_ = std::max(min_chunk, (n + num_threads_ * 4 - 1) / (num_threads_ * 4));
        if (max_chunk > 0) chunk_ = std::max(min_chunk, std::min(chunk_, max_chunk));
        pending_workers_.store(static_cast<int64_t>(threads_.size()));
        error_ = nullptr;
        generation_.fetch_add(1, std::memory_order_release);  // publishes the job to spinning workers
    }
    cv_work_.notify_all();
    run_chunks();
    std::exception_ptr err;
    const auto all_done = [&] { return pending_workers_.load(std::memory_order_acquire) == 0; };
    if (!spin_until(all_done)) {
        std::unique_lock<std::mutex> lk(mu_);
        cv_done_.wait(lk, all_done);
    }
    {
        std::lock_guard<std::mutex> lk(mu_);
        err = error_;
        fn_ = nullptr;
    }
    if (err) std::rethrow_exception(err);
}

}  // namespace moebench::cpu
