// SPDX-License-Identifier: Apache-2.0
// Ceilings (measured read bandwidth, sgemm rate) give positive finite values; the floor arithmetic matches hand
// computation; the batched expert GEMM equals a naive product. No timed assertions.
#include "backends/cpu/cpu_ops.hpp"
#include "metrics/ceilings.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

using namespace moebench;

TEST_CASE("measured read bandwidth and sgemm rate are positive and finite", "[ceilings]") {
    ReadBuffer buf(64 << 20, 2);  // small buffer: the test checks the mechanics, not the machine
    CHECK(buf.bytes() >= (64 << 20));
    // Cache-line aligned: unaligned 64-byte loads straddle lines and measure the split (45 against 64-72 GB/s).
    CHECK(reinterpret_cast<uintptr_t>(buf.data()) % 64 == 0);
    const Ceiling bw = measure_read_bandwidth(buf, 2);
    CHECK(std::isfinite(bw.value));
    CHECK(bw.value > 0);
    CHECK(bw.source == "measured");
    CHECK(bw.unit == "bytes/s");
    const Ceiling g = measure_sgemm_rate(256, 2, 2);
    CHECK(std::isfinite(g.value));
    CHECK(g.value > 0);
    CHECK(g.source == "measured");
    CHECK(g.unit == "flop/s");
    CHECK(llc_bytes() >= 0);
}

TEST_CASE("a time below the floor is flagged, naming the ceiling that bounds it", "[ceilings]") {
    const Floor mem = physical_floor(1e9, 1e9, 50e9, 200e9);  // memory 20000 us, compute 5000 us
    CHECK(below_floor_warning(mem, 20000.0).empty());
    CHECK(below_floor_warning(mem, 25000.0).empty());
    const std::string w = below_floor_warning(mem, 15000.0);
    CHECK(w.find("read-bandwidth") != std::string::npos);
    CHECK(w.find("0.75x") != std::string::npos);
    const Floor cmp = physical_floor(1e8, 2e12, 50e9, 200e9);  // compute 10000 us
    const char* old = std::getenv("OPENBLAS_CORETYPE");
    const std::string saved = old ? old : "";
    ::setenv("OPENBLAS_CORETYPE", "Haswell", 1);
    const std::string wc = below_floor_warning(cmp, 6000.0);
    if (old)
        ::setenv("OPENBLAS_CORETYPE", saved.c_str(), 1);
    else
        ::unsetenv("OPENBLAS_CORETYPE");
    CHECK(wc.find("sgemm") != std::string::npos);
    CHECK(wc.find("OPENBLAS_CORETYPE=Haswell") != std::string::npos);
}

TEST_CASE("physical floor = max(bytes / bandwidth, flops / rate), hand-computed", "[ceilings]") {
    // OLMoE-like decode: 10 experts of 3 x 1024 x 2048 fp32 = 251,658,240 bytes at 20 GB/s = 12,582.912 us;
    // 10 tokens, 2 * 10 * 3 * 1024 * 2048 = 125,829,120 flops at 250 GFLOP/s = 503.31648 us -> memory-bound.
    const double bytes = 10.0 * 3 * 1024 * 2048 * 4, flops = 2.0 * 10 * 3 * 1024 * 2048;
    const Floor f = physical_floor(bytes, flops, 20e9, 250e9);
    CHECK(f.memory_us == Approx(12582.912));
    CHECK(f.compute_us == Approx(503.31648));
    CHECK(f.floor_us == Approx(12582.912));
    CHECK(f.bound == "memory");
    // 4096 tokens through the same 10 experts: 51,539,607,552 flops -> 206,158.43 us, compute-bound.
    const Floor g = physical_floor(bytes, flops * 409.6, 20e9, 250e9);
    CHECK(g.compute_us == Approx(206158.430208));
    CHECK(g.floor_us == Approx(206158.430208));
    CHECK(g.bound == "compute");
    // A missing rate leaves its term out.
    CHECK(physical_floor(bytes, flops, 0, 250e9).floor_us == Approx(503.31648));
}

TEST_CASE("gemm_xwt_many equals the naive product for mixed small and large row counts", "[ceilings][cpu_phases]") {
    cpu::ThreadPool pool(2);
    const int64_t n = 23, k = 133;
    const std::vector<int64_t> ms = {1, 3, 0, 8, 17, 5, 40};
    std::vector<std::vector<float>> xs, ws, ys;
    std::vector<cpu::XwtProblem> probs;
    uint32_t s = 12345;
    auto rnd = [&] {
        s = s * 1664525u + 1013904223u;
        return static_cast<float>((s >> 8) & 0xffff) / 32768.0f - 1.0f;
    };
    for (int64_t m : ms) {
        xs.emplace_back(static_cast<size_t>(std::max<int64_t>(1, m) * k));
        ws.emplace_back(static_cast<size_t>(n * k));
        ys.emplace_back(static_cast<size_t>(std::max<int64_t>(1, m) * n), 0.0f);
        for (auto& v : xs.back()) v = rnd();
        for (auto& v : ws.back()) v = rnd();
    }
    for (size_t p = 0; p < ms.size(); ++p) {
        cpu::XwtProblem q;
        q.m = ms[p];
        q.n = n;
        q.k = k;
        q.x = xs[p].data();
        q.w = ws[p].data();
        q.y = ys[p].data();
        probs.push_back(q);
    }
    std::vector<double> us(ms.size(), -1.0);
    cpu::gemm_xwt_many(pool, probs.data(), static_cast<int64_t>(probs.size()), 0.0f, us.data());
    for (size_t p = 0; p < ms.size(); ++p) {
        double max_err = 0;
        for (int64_t i = 0; i < ms[p]; ++i)
            for (int64_t j = 0; j < n; ++j) {
                double ref = 0;
                for (int64_t c = 0; c < k; ++c) ref += static_cast<double>(xs[p][i * k + c]) * ws[p][j * k + c];
                max_err = std::max(max_err, std::fabs(ref - ys[p][i * n + j]));
            }
        CHECK(max_err < 1e-4);
        CHECK(us[p] >= 0.0);
        if (ms[p] == 0) CHECK(us[p] == 0.0);
    }
}
