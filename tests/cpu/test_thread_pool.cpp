// SPDX-License-Identifier: Apache-2.0
// The CPU thread pool under the conditions of issue 14: a thread the system refuses (a clean ConfigError, the
// started threads joined, no hang), absurd thread counts, and oversubscription (no spinning, still every index once).
#include "backends/cpu/thread_pool.hpp"
#include "common/error.hpp"
#include "common/host_cpus.hpp"
#include "error_helpers.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

using moebench::ConfigError;
using moebench::usable_cpus;
using moebench::cpu::ThreadPool;
using moebench::test::config_error_of;

namespace {

// A starter that refuses the thread at call `fail_at` (1-based) as pthread_create does at RLIMIT_NPROC, and counts
// the workers that have started and ended.
struct FailingStarter {
    int fail_at;
    std::atomic<int> calls{0}, running{0}, ended{0};
    ThreadPool::ThreadStarter starter() {
        return [this](std::function<void()> body) {
            if (++calls == fail_at) throw std::system_error(EAGAIN, std::generic_category(), "pthread_create");
            ++running;
            return std::thread([this, body] {
                body();
                ++ended;
            });
        };
    }
};

}  // namespace

TEST_CASE("thread pool: a refused thread is a ConfigError naming --threads and how many started, none left running",
          "[thread_pool][hardening]") {
    for (int fail_at : {1, 4}) {
        FailingStarter fs{fail_at};
        const auto t0 = std::chrono::steady_clock::now();
        const std::string msg = config_error_of([&] { ThreadPool pool(8, fs.starter()); });
        INFO(msg);
        // The caller's thread plus the workers started before the refusal.
        const int started = fail_at;
        CHECK_THAT(msg, Catch::StartsWith("--threads: the system refused to start thread " +
                                          std::to_string(started + 1) + " of 8"));
        CHECK_THAT(msg, Catch::Contains("Resource temporarily unavailable"));
        CHECK_THAT(msg, Catch::Contains("limits: "));
        CHECK_THAT(msg, Catch::Contains("(got 8)"));
        CHECK_THAT(msg, Catch::Contains(std::to_string(started) + " thread(s) could be started: use --threads " +
                                        std::to_string(started) + " or fewer"));
        // Every worker that started has ended (joined) by the time the constructor has thrown.
        CHECK(fs.running.load() == fail_at - 1);
        CHECK(fs.ended.load() == fs.running.load());
        CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
    }
}

TEST_CASE("thread pool: more than 4096 threads is refused before any is started", "[thread_pool][hardening]") {
    FailingStarter fs{1 << 30};
    const std::string msg = config_error_of([&] { ThreadPool pool(100000, fs.starter()); });
    CHECK_THAT(msg, Catch::StartsWith("--threads: is beyond 4096 threads (got 100000)"));
    CHECK(fs.calls.load() == 0);
}

TEST_CASE("thread pool: spins only when it has no more threads than usable CPUs", "[thread_pool][hardening]") {
    const int64_t cpus = usable_cpus();
    REQUIRE(cpus >= 1);
    CHECK(cpus <= static_cast<int64_t>(std::max(1u, std::thread::hardware_concurrency())));
    CHECK(ThreadPool(0).size() == cpus);  // 0 = every usable CPU
    CHECK(ThreadPool(cpus).spins());
    CHECK_FALSE(ThreadPool(cpus + 1).spins());
}

TEST_CASE("thread pool: oversubscribed (sleeping workers), every index once and exceptions rethrown",
          "[thread_pool][hardening]") {
    ThreadPool pool(usable_cpus() * 8 + 1);
    REQUIRE_FALSE(pool.spins());
    std::vector<int> hits(2000);
    // Many small jobs back to back: a worker woken late for one job must neither run a chunk of it after the
    // caller has returned nor miss the next one; a few jobs with fewer chunks than threads, some after a pause.
    for (int round = 0; round < 300; ++round) {
        if (round % 50 == 49) std::this_thread::sleep_for(std::chrono::milliseconds(2));
        const int64_t n = 1 + (round * 131) % 2000;
        std::fill(hits.begin(), hits.end(), 0);
        pool.parallel_for(
            n,
            [&](int64_t b, int64_t e) {
                for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
            },
            1 + round % 5, round % 7 == 0 ? 3 : 0);
        for (int64_t i = 0; i < 2000; ++i) REQUIRE(hits[static_cast<size_t>(i)] == (i < n ? 1 : 0));
    }
    CHECK_THROWS_WITH(pool.parallel_for(256,
                                        [](int64_t b, int64_t) {
                                            if (b >= 128) throw std::runtime_error("chunk failed");
                                        }),
                      "chunk failed");
    std::atomic<int64_t> sum{0};
    pool.parallel_for(
        1000,
        [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) sum += i;
        },
        1, 1);  // one index per chunk: far more chunks than threads
    CHECK(sum == 499500);
}
