// SPDX-License-Identifier: Apache-2.0
// ThreadPool: between jobs a worker spins briefly, then sleeps on a condition variable, so that back-to-back
// phases do not pay a wake-up each while idle workers never compete with OpenBLAS threads for long. With more
// threads than usable CPUs nothing spins: a spinning thread would hold the core that the thread with work needs
// (64 threads on 2 cores took 30-120 s for a 0.5 s run).
#include "backends/cpu/thread_pool.hpp"

#include "common/error.hpp"
#include "common/flag_names.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <fstream>
#include <string>
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

// The cgroup's pids.max ("max" when unlimited), v2 or v1; "" where it cannot be read.
std::string cgroup_pids_max() {
    std::ifstream cg("/proc/self/cgroup");
    std::string line;
    while (std::getline(cg, line)) {
        // "0::/user.slice/..." (v2) or "5:pids:/..." (v1)
        const auto a = line.find(':'), b = line.find(':', a + 1);
        if (a == std::string::npos || b == std::string::npos) continue;
        const std::string ctl = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
        const std::string dir = ctl.empty() ? "/sys/fs/cgroup" : ctl == "pids" ? "/sys/fs/cgroup/pids" : "";
        if (dir.empty()) continue;
        std::ifstream f(dir + path + "/pids.max");
        std::string v;
        if (f >> v) return v;
    }
    return "";
}

// The limits on threads in force, for the message of a refused thread: "ulimit -u 50, cgroup pids.max 100".
std::string thread_limits_text() {
    std::string out;
    const auto add = [&](const std::string& s) { out += (out.empty() ? "" : ", ") + s; };
    rlimit rl{};
    if (::getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        add(fmt::format("per-user process limit (ulimit -u) {}", static_cast<uint64_t>(rl.rlim_cur)));
    if (const std::string pids = cgroup_pids_max(); !pids.empty() && pids != "max") add("cgroup pids.max " + pids);
    std::ifstream tm("/proc/sys/kernel/threads-max");
    if (std::string v; tm >> v) add("kernel threads-max " + v);
    return out.empty() ? "no limit readable" : out;
}

}  // namespace

ThreadPool::ThreadPool(int64_t num_threads, const ThreadStarter& start) {
    const int64_t cpus = usable_cpus();
    if (num_threads > kMaxThreads)
        config_error(flag_of("threads"), fmt::format("is beyond {} threads", kMaxThreads), std::to_string(num_threads),
                     fmt::format("use 0 for all {} usable CPUs, or at most {}", cpus, kMaxThreads));
    num_threads_ = num_threads <= 0 ? cpus : num_threads;
    parallelism_ = std::min(num_threads_, cpus);
    spin_ = num_threads_ <= cpus;
    start_workers(start);
}

void ThreadPool::start_workers(const ThreadStarter& start) {
    threads_.reserve(static_cast<size_t>(num_threads_ - 1));
    std::string why;
    try {
        for (int64_t i = 1; i < num_threads_; ++i) {
            auto body = [this] { worker(); };
            threads_.push_back(start ? start(body) : std::thread(body));
        }
        return;
    } catch (const std::exception& e) {  // std::system_error (EAGAIN) from pthread_create, or bad_alloc
        why = e.what();
    }
    // Join what was started before throwing: the destructor does not run for a half-built object, and destroying
    // a condition variable that workers still wait on blocks forever (the hang this replaces).
    const auto started = static_cast<int64_t>(threads_.size()) + 1;  // the caller's thread counts
    stop_workers();
    threads_.clear();
    config_error(flag_of("threads"),
                 fmt::format("the system refused to start thread {} of {} ({}; limits: {})", started + 1, num_threads_,
                             why, thread_limits_text()),
                 std::to_string(num_threads_),
                 fmt::format("{} thread(s) could be started: use {} {} or fewer, or raise the limit", started,
                             flag_of("threads"), started));
}

void ThreadPool::stop_workers() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_.store(true);
    }
    cv_work_.notify_all();
    for (auto& t : threads_)
        if (t.joinable()) t.join();
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::run_chunks(std::unique_lock<std::mutex>& lk) {
    while (next_ < n_) {
        const int64_t b = next_, e = std::min(n_, next_ + chunk_);
        next_ = e;
        lk.unlock();
        try {
            (*fn_)(b, e);
        } catch (...) {
            lk.lock();
            if (!error_) error_ = std::current_exception();
            next_ = n_;  // the rest is abandoned
            continue;
        }
        lk.lock();
    }
}

// A worker joins the job only while it still has unclaimed chunks, and the caller waits only for workers that
// joined: a worker woken late (oversubscribed, it may not run for a whole time slice) costs the caller nothing.
void ThreadPool::work_on(uint64_t generation) {
    std::unique_lock<std::mutex> lk(mu_);
    if (generation_.load() != generation || next_ >= n_) return;
    active_workers_.fetch_add(1);
    run_chunks(lk);
    // The caller's predicate is checked under mu_, which is held here, so no wake-up is lost.
    if (active_workers_.fetch_sub(1) == 1) cv_done_.notify_one();
}

void ThreadPool::worker() {
    uint64_t seen = 0;
    for (;;) {
        const auto ready = [&] {
            return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen;
        };
        if (!spin_ || !spin_until(ready)) {
            std::unique_lock<std::mutex> lk(mu_);
            cv_work_.wait(lk, ready);
        }
        if (stop_.load()) return;
        seen = generation_.load(std::memory_order_acquire);
        work_on(seen);
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
    std::unique_lock<std::mutex> lk(mu_);
    fn_ = &fn;
    n_ = n;
    next_ = 0;
    // ~4 chunks per thread that can run at once balances uneven rows without much locking; more chunks than
    // that on an oversubscribed pool would only wake more threads to share the same cores.
    chunk_ = std::max(min_chunk, (n + parallelism_ * 4 - 1) / (parallelism_ * 4));
    if (max_chunk > 0) chunk_ = std::max(min_chunk, std::min(chunk_, max_chunk));
    error_ = nullptr;
    generation_.fetch_add(1, std::memory_order_release);  // publishes the job to spinning workers
    // Wake only as many sleepers as there are chunks and free CPUs for (the caller holds one): a wake-up costs
    // ~20 us, and more runnable threads than CPUs only take turns. Spinning workers see the generation anyway.
    const int64_t helpers =
        std::min({(n + chunk_ - 1) / chunk_ - 1, parallelism_ - 1, static_cast<int64_t>(threads_.size())});
    lk.unlock();
    if (helpers >= static_cast<int64_t>(threads_.size()))
        cv_work_.notify_all();
    else
        for (int64_t i = 0; i < helpers; ++i) cv_work_.notify_one();
    lk.lock();
    run_chunks(lk);
    const auto all_done = [&] { return active_workers_.load(std::memory_order_acquire) == 0; };
    if (!all_done() && spin_) {
        lk.unlock();
        spin_until(all_done);
        lk.lock();
    }
    cv_done_.wait(lk, all_done);
    // next_ >= n_ and no worker inside: no one can touch fn_ after this.
    std::exception_ptr err = error_;
    fn_ = nullptr;
    n_ = 0;
    error_ = nullptr;
    lk.unlock();
    if (err) std::rethrow_exception(err);
}

}  // namespace moebench::cpu
