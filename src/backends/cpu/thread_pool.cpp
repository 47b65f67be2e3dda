// SPDX-License-Identifier: Apache-2.0
// ThreadPool: workers sleep on a condition variable between jobs, so they never compete with OpenBLAS threads.
#include "backends/cpu/thread_pool.hpp"

#include <algorithm>
#include <exception>

namespace moebench::cpu {

ThreadPool::ThreadPool(int64_t num_threads) {
    if (num_threads <= 0) num_threads = std::max<int64_t>(1, std::thread::hardware_concurrency());
    num_threads_ = num_threads;
    for (int64_t i = 1; i < num_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
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
        {
            std::unique_lock<std::mutex> lk(mu_);
            cv_work_.wait(lk, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
        }
        run_chunks();
        {
            std::lock_guard<std::mutex> lk(mu_);
            if (--pending_workers_ == 0) cv_done_.notify_one();
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
        pending_workers_ = static_cast<int64_t>(threads_.size());
        error_ = nullptr;
        ++generation_;
    }
    cv_work_.notify_all();
    run_chunks();
    std::exception_ptr err;
    {
        std::unique_lock<std::mutex> lk(mu_);
        cv_done_.wait(lk, [&] { return pending_workers_ == 0; });
        err = error_;
        fn_ = nullptr;
    }
    if (err) std::rethrow_exception(err);
}

}  // namespace moebench::cpu
