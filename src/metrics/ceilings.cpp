// SPDX-License-Identifier: Apache-2.0
// Measured ceilings: streaming read bandwidth (vector loads over a buffer larger than the LLC, split over threads)
// and OpenBLAS sgemm rate (square product); the roofline floor against them.
#include "metrics/ceilings.hpp"

#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "common/host_cpus.hpp"

#include <cblas.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace moebench {

namespace {

using Clock = std::chrono::steady_clock;

#pragma GCC diagnostic ignored "-Wpsabi"  // the vector type stays inside the ISA clones
typedef float v16f __attribute__((vector_size(64)));

// Software prefetch distance of the prefetched read passes: 4 KiB, as the CPU backend's weight kernels use.
constexpr int64_t kReadPrefetchFloats = 1024;

// Sums [p, p + n) with four independent 16-lane accumulators so that loads, not adds, limit the loop. `prefetch`
// adds a software prefetch 4 KiB ahead into L2, as the CPU backend's weight kernels issue: on a quiet AMD EPYC
// guest the plain loop read faster (64-72 against 58 GB/s), on the same guest under a neighbour's memory load the
// prefetching kernels out-read it (39 against 34-38 GB/s), so the ceiling is the best of both.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
float stream_sum(const float* p, int64_t n, bool prefetch) {
    v16f a0{}, a1{}, a2{}, a3{};
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        if (prefetch)
            for (int64_t line = 0; line < 64; line += 16) __builtin_prefetch(p + i + kReadPrefetchFloats + line, 0, 2);
        v16f v0, v1, v2, v3;
        __builtin_memcpy(&v0, p + i, 64);
        __builtin_memcpy(&v1, p + i + 16, 64);
        __builtin_memcpy(&v2, p + i + 32, 64);
        __builtin_memcpy(&v3, p + i + 48, 64);
        a0 += v0;
        a1 += v1;
        a2 += v2;
        a3 += v3;
    }
    v16f a = (a0 + a1) + (a2 + a3);
    float s = 0;
    for (int l = 0; l < 16; ++l) s += a[l];
    for (; i < n; ++i) s += p[i];
    return s;
}

// A ceiling is the machine's rate: more threads than usable CPUs only take turns, so they are capped there.
int64_t resolve_threads(int64_t n) { return n > 0 ? std::min(n, usable_cpus()) : usable_cpus(); }

// Runs fn(t) on threads 0..n-1 (thread 0 is the caller) and waits. A thread the system refuses to start is a
// ConfigError naming --threads, after the started ones are joined (a std::thread destroyed unjoined aborts).
template <typename F>
void on_threads(int64_t n, F&& fn) {
    std::vector<std::thread> ts;
    try {
        for (int64_t t = 1; t < n; ++t) ts.emplace_back([&fn, t] { fn(t); });
    } catch (const std::system_error& e) {
        for (auto& t : ts) t.join();
        config_error(flag_of("threads"),
                     fmt::format("the system refused to start thread {} of {} for a ceiling measurement ({})",
                                 ts.size() + 1, n, e.what()),
                     std::to_string(n),
                     fmt::format("use {} {} or fewer, or raise the process limit", flag_of("threads"), ts.size()));
    }
    fn(0);
    for (auto& t : ts) t.join();
}

int64_t parse_cache_size(const std::string& s) {  // "260M", "36608K", "1048576"
    if (s.empty()) return 0;
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    const char u = end && *end ? *end : ' ';
    const double mult = u == 'K' ? 1024.0 : u == 'M' ? 1024.0 * 1024.0 : u == 'G' ? 1024.0 * 1024.0 * 1024.0 : 1.0;
    return static_cast<int64_t>(v * mult);
}

}  // namespace

int64_t llc_bytes() {
    int64_t best = 0;
    for (int idx = 0; idx < 8; ++idx) {
        std::ifstream f(fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/size", idx));
        std::string s;
        if (f >> s) best = std::max(best, parse_cache_size(s));
    }
#ifdef _SC_LEVEL3_CACHE_SIZE
    if (best == 0) best = std::max<int64_t>(0, sysconf(_SC_LEVEL3_CACHE_SIZE));
#endif
    return best;
}

ReadBuffer::ReadBuffer(int64_t bytes, int64_t num_threads) : num_threads_(resolve_threads(num_threads)) {
    if (bytes <= 0) bytes = std::max<int64_t>(4 * llc_bytes(), int64_t(1) << 30);
    num_floats_ = (bytes / 4 + 63) & ~int64_t(63);
    data_ = alloc_aligned_floats(num_floats_);
    // First touch by the thread that will read the slice (NUMA placement), with non-zero data.
    const int64_t nt = num_threads_, n = num_floats_;
    float* d = data_.get();
    on_threads(nt, [&](int64_t t) {
        const int64_t b = n * t / nt, e = n * (t + 1) / nt;
        for (int64_t i = b; i < e; ++i) d[i] = static_cast<float>(i & 1023) * 1e-3f;
    });
}

ReadBuffer::~ReadBuffer() = default;

double ReadBuffer::read_pass() {
    const bool prefetch = (passes_++ % 2) == 1;  // alternate: the best pass of either kind is the ceiling
    const int64_t nt = num_threads_, n = num_floats_;
    const float* d = data_.get();
    std::vector<float> part(static_cast<size_t>(nt), 0.0f);
    const auto t0 = Clock::now();
    on_threads(nt, [&](int64_t t) {
        const int64_t b = (n * t / nt) & ~int64_t(63), e = t + 1 == nt ? n : (n * (t + 1) / nt) & ~int64_t(63);
        part[static_cast<size_t>(t)] = stream_sum(d + b, e - b, prefetch);
    });
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    float total = 0;
    for (float p : part) total += p;
    sink_ = total;
    return s;
}

Ceiling measure_read_bandwidth(ReadBuffer& buf, int repeats) {
    double best_s = INFINITY;
    for (int r = 0; r < std::max(1, repeats); ++r) best_s = std::min(best_s, buf.read_pass());
    Ceiling c;
    c.value = static_cast<double>(buf.bytes()) / best_s;
    c.unit = "bytes/s";
    c.method = read_bandwidth_method(buf, std::max(1, repeats));
    return c;
}

std::string read_bandwidth_method(const ReadBuffer& buf, int64_t passes) {
    return fmt::format(
        "streaming read (plain and prefetched passes) of {:.0f} MiB (LLC {:.0f} MiB) on {} threads, "
        "best of {}",
        buf.bytes() / 1048576.0, llc_bytes() / 1048576.0, buf.num_threads(), passes);
}

Ceiling measure_sgemm_rate(int64_t n, int64_t num_threads, int repeats) {
    if (n < 1) config_error("sgemm size", "must be >= 1", std::to_string(n), "use e.g. 2048");
    const int64_t nt = resolve_threads(num_threads);
    openblas_set_num_threads(static_cast<int>(nt));
    std::vector<float> a(static_cast<size_t>(n * n)), b(static_cast<size_t>(n * n)), c(static_cast<size_t>(n * n));
    for (int64_t i = 0; i < n * n; ++i) {
        a[static_cast<size_t>(i)] = static_cast<float>(i % 97) * 0.01f;
        b[static_cast<size_t>(i)] = static_cast<float>(i % 89) * 0.01f;
    }
    const int ni = static_cast<int>(n);
    double best_s = INFINITY;
    for (int r = 0; r < std::max(1, repeats) + 1; ++r) {  // +1: the first call warms OpenBLAS's threads
        const auto t0 = Clock::now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ni, ni, ni, 1.0f, a.data(), ni, b.data(), ni, 0.0f,
                    c.data(), ni);
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        if (r > 0) best_s = std::min(best_s, s);
    }
    Ceiling out;
    out.value = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / best_s;
    out.unit = "flop/s";
    out.method =
        fmt::format("OpenBLAS sgemm {0}x{0}x{0} (A.B^T) on {1} threads, best of {2}", n, nt, std::max(1, repeats));
    return out;
}

Floor physical_floor(double bytes, double flops, double read_bytes_per_s, double flops_per_s) {
    Floor f;
    f.memory_us = read_bytes_per_s > 0 ? bytes / read_bytes_per_s * 1e6 : 0.0;
    f.compute_us = flops_per_s > 0 ? flops / flops_per_s * 1e6 : 0.0;
    f.floor_us = std::max(f.memory_us, f.compute_us);
    f.bound = f.memory_us >= f.compute_us ? "memory" : "compute";
    return f;
}

std::string below_floor_warning(const Floor& f, double measured_us) {
    if (!(measured_us < f.floor_us)) return "";
    const bool compute = f.bound == "compute";
    const char* coretype = std::getenv("OPENBLAS_CORETYPE");
    return fmt::format("ran below its floor ({:.2f}x): the {} ceiling is under-measured{}", measured_us / f.floor_us,
                       compute ? "sgemm" : "read-bandwidth",
                       compute && coretype ? fmt::format(" (OpenBLAS runs its {} kernels because OPENBLAS_CORETYPE={} "
                                                         "is set; unset it to let OpenBLAS pick this CPU's best)",
                                                         openblas_get_corename(), coretype)
                                           : std::string());
}

}  // namespace moebench
