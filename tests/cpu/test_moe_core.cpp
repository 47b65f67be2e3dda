// SPDX-License-Identifier: Apache-2.0
// The shared host/device core (core/moe_core.cuh): tie-break, top-k insertion, capacity drops, the permutation
// map, activations and the seeded RNG, against hand-computed cases.
#include "core/moe_core.cuh"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

using namespace moebench::core;

TEST_CASE("tie-break: higher score wins, equal scores go to the lower id", "[moe_core]") {
    CHECK(topk_better(2.0f, 5, 1.0f, 0));
    CHECK_FALSE(topk_better(1.0f, 0, 2.0f, 5));
    CHECK(topk_better(1.0f, 2, 1.0f, 3));
    CHECK_FALSE(topk_better(1.0f, 3, 1.0f, 2));
    CHECK_FALSE(topk_better(1.0f, 3, 1.0f, 3));
    // NaN ranks as -inf: below every number, tied with -inf (lower id first), so the order stays total.
    const float nan = std::nanf("");
    CHECK(topk_better(-1e30f, 7, nan, 0));
    CHECK_FALSE(topk_better(nan, 0, -1e30f, 7));
    CHECK(topk_better(nan, 1, nan, 2));
    CHECK_FALSE(topk_better(nan, 2, nan, 1));
    CHECK(topk_better(-INFINITY, 1, nan, 2));
    CHECK(topk_better(nan, 1, -INFINITY, 2));
}

TEST_CASE("topk_row equals a stable sort by (score desc, id asc)", "[moe_core]") {
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> val(0, 5);  // few distinct values: many ties
    for (int trial = 0; trial < 200; ++trial) {
        const int n = 1 + trial % 40, k = 1 + trial % std::min(n, 9);
        std::vector<float> s(static_cast<size_t>(n));
        for (auto& x : s) x = static_cast<float>(val(rng));
        std::vector<int> order(static_cast<size_t>(n));
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return s[a] > s[b]; });
        std::vector<float> bs(static_cast<size_t>(k));
        std::vector<int> bi(static_cast<size_t>(k));
        REQUIRE(topk_row(s.data(), n, k, nullptr, bs.data(), bi.data()) == k);
        for (int j = 0; j < k; ++j) {
            CHECK(bi[j] == order[j]);
            CHECK(bs[j] == s[order[j]]);
        }
    }
}

TEST_CASE("capacity: ceil(cf*T*k/E), drops in arrival order, counted; dropless at cf 0", "[moe_core]") {
    CHECK(expert_capacity(0.0, 4, 2, 4) == -1);
    CHECK(expert_capacity(1.0, 4, 2, 4) == 2);
    CHECK(expert_capacity(1.25, 4, 2, 4) == 3);  // ceil(2.5)
    CHECK(expert_capacity(1.0, 16, 2, 8) == 4);  // exact, no spurious +1
    CHECK(expert_capacity(1.0, 1, 2, 64) == 1);  // ceil(0.03125)
    CHECK(expert_capacity(1e30, 4, 2, 4) == 8);  // capped at every assignment of the step (was an overflowing cast)
    CHECK(expert_capacity(4.0, 4, 2, 4) == 8);   // exactly all
    CHECK(expert_capacity(3.9, 4, 2, 4) == 8);   // ceil(7.8)
    // T=4, k=2, E=4, capacity 2. Arrivals for expert 0: t0, t1, t2 (dropped), t3 slot 1 (dropped);
    // expert 1: t0, t2, t3 slot 0 (dropped).
    std::vector<int32_t> ids = {0, 1, 0, 2, 0, 1, 1, 0};
    std::vector<float> w(8, 0.5f);
    std::vector<int64_t> counts(4);
    const int64_t dropped = apply_capacity(ids.data(), w.data(), 4, 2, 4, 2, counts.data());
    CHECK(dropped == 3);
    CHECK(ids == std::vector<int32_t>{0, 1, 0, 2, -1, 1, -1, -1});
    CHECK(w == std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f, 0.0f, 0.5f, 0.0f, 0.0f});
    CHECK(counts == std::vector<int64_t>{2, 2, 1, 0});
    // Dropless keeps everything.
    std::vector<int32_t> ids2 = {0, 1, 0, 2, 0, 1, 1, 0};
    CHECK(apply_capacity(ids2.data(), w.data(), 4, 2, 4, -1, counts.data()) == 0);
    CHECK(counts == std::vector<int64_t>{4, 3, 1, 0});
}

TEST_CASE("permutation: counts, exclusive offsets, stable token->row map", "[moe_core]") {
    const std::vector<int32_t> ids = {0, 1, 0, 2, -1, 1, -1, -1};  // T=4, k=2, E=4 after drops
    std::vector<int64_t> counts = {2, 2, 1, 0}, offsets(5), cursor(4), slot_of(8);
    std::vector<int32_t> token_of_row(5);
    exclusive_offsets(counts.data(), 4, offsets.data());
    CHECK(offsets == std::vector<int64_t>{0, 2, 4, 5, 5});
    permutation_map(ids.data(), 4, 2, 4, offsets.data(), cursor.data(), slot_of.data(), token_of_row.data());
    CHECK(slot_of == std::vector<int64_t>{0, 2, 1, 4, -1, 3, -1, -1});
    CHECK(token_of_row == std::vector<int32_t>{0, 1, 0, 2, 1});
    for (int64_t a = 0; a < 8; ++a) CHECK(permuted_row(ids.data(), a, offsets.data()) == slot_of[a]);
}

TEST_CASE("activations: silu, gelu (tanh), swiglu, geglu, gpt-oss clamped swiglu", "[moe_core]") {
    CHECK(silu(1.0f) == Approx(0.7310586f).epsilon(1e-6));
    CHECK(silu(0.0f) == 0.0f);
    CHECK(gelu_tanh(1.0f) == Approx(0.8411920f).epsilon(1e-6));
    CHECK(swiglu(1.0f, 3.0f) == Approx(3.0f * 0.7310586f).epsilon(1e-6));
    CHECK(geglu(1.0f, -2.0f) == Approx(-2.0f * 0.8411920f).epsilon(1e-6));
    // gate 10 -> clamped to 7, up 8 -> 7: 7 * sigmoid(1.702 * 7) * (7 + 1)
    CHECK(swiglu_oai(10.0f, 8.0f, 7.0f, 1.702f) == Approx(55.999625f).epsilon(1e-6));
    // no clamp: -2 * sigmoid(-3.404) * (-3 + 1)
    CHECK(swiglu_oai(-2.0f, -3.0f, 7.0f, 1.702f) == Approx(0.1286828f).epsilon(1e-5));
    CHECK(activate(kActSwigluOai, 10.0f, 8.0f, 7.0f) == Approx(55.999625f).epsilon(1e-6));
}

TEST_CASE("weight RNG: deterministic, in [-1, 1), mean ~0 and variance ~1/3, streams differ", "[moe_core]") {
    const uint64_t b1 = rng_base(42, weight_stream(3, kWGate)), b2 = rng_base(42, weight_stream(4, kWGate));
    CHECK(uniform_pm1(b1, 12345) == uniform_pm1(rng_base(42, weight_stream(3, kWGate)), 12345));
    double s = 0, ss = 0;
    int same = 0;
    const int n = 200000;
    for (int i = 0; i < n; ++i) {
        const float u = uniform_pm1(b1, static_cast<uint64_t>(i));
        REQUIRE(u >= -1.0f);
        REQUIRE(u < 1.0f);
        s += u;
        ss += u * u;
        same += uniform_pm1(b2, static_cast<uint64_t>(i)) == u;
    }
    CHECK(std::abs(s / n) < 0.01);
    CHECK(ss / n == Approx(1.0 / 3.0).epsilon(0.02));
    CHECK(same < 100);
}
