// SPDX-License-Identifier: Apache-2.0
// Expert-load and routing statistics against hand-computed small cases.
#include "metrics/expert_load.hpp"
#include "metrics/routing_stats.hpp"

#include <catch2/catch.hpp>

#include <cmath>

using namespace moebench;
using Catch::Detail::Approx;

TEST_CASE("load statistics of [0,0,0,4] by hand", "[expert_load]") {
    ExpertLoad l = expert_load_from_counts({0, 0, 0, 4});
    CHECK(l.num_assignments == 4);
    CHECK(l.mean == Approx(1.0));
    CHECK(l.max == 4);
    CHECK(l.max_over_mean == Approx(4.0));
    // sum_ij |xi - xj| = 2 * 3 * 4 = 24; / (2 * 4^2 * 1) = 0.75
    CHECK(l.gini == Approx(0.75));
    // variance = (1 + 1 + 1 + 9) / 4 = 3
    CHECK(l.cv == Approx(std::sqrt(3.0)));
    CHECK(l.top3_share == Approx(1.0));
    CHECK(l.idle_experts == 3);
    CHECK(l.entropy_bits == Approx(0.0).margin(1e-12));
    CHECK(l.entropy_norm == Approx(0.0).margin(1e-12));
}

TEST_CASE("load statistics of even and graded loads", "[expert_load]") {
    ExpertLoad even = expert_load_from_counts({5, 5, 5, 5});
    CHECK(even.gini == Approx(0.0).margin(1e-12));
    CHECK(even.cv == Approx(0.0).margin(1e-12));
    CHECK(even.max_over_mean == Approx(1.0));
    CHECK(even.entropy_bits == Approx(2.0));
    CHECK(even.entropy_norm == Approx(1.0));
    CHECK(even.top3_share == Approx(0.75));
    CHECK(even.idle_experts == 0);

    // [1,2,3,4]: ordered-pair differences sum to 20; / (2 * 16 * 2.5) = 0.25
    ExpertLoad graded = expert_load_from_counts({4, 1, 3, 2});
    CHECK(graded.gini == Approx(0.25));
    CHECK(graded.max_over_mean == Approx(4.0 / 2.5));
    CHECK(graded.top3_share == Approx(9.0 / 10.0));
    // variance = (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25
    CHECK(graded.cv == Approx(std::sqrt(1.25) / 2.5));
    double h = 0;
    for (double c : {1.0, 2.0, 3.0, 4.0}) h -= c / 10 * std::log2(c / 10);
    CHECK(graded.entropy_bits == Approx(h));

    ExpertLoad empty = expert_load_from_counts({0, 0, 0});
    CHECK(empty.max_over_mean == 0);
    CHECK(empty.idle_experts == 3);
}

TEST_CASE("counting ids: -1 is a dropped selection", "[expert_load]") {
    const int32_t ids[] = {0, 1, 1, -1, 2, 1};  // 3 tokens, k = 2
    ExpertLoad l = expert_load(ids, 3, 2, 4);
    CHECK(l.tokens_per_expert == std::vector<int64_t>{1, 3, 1, 0});
    CHECK(l.dropped == 1);
    CHECK(l.num_assignments == 5);
    CHECK(l.idle_experts == 1);
}

TEST_CASE("load over windows", "[expert_load]") {
    const int32_t ids[] = {0, 0, 1, 1, 1};  // k = 1
    LoadWindows w = load_windows(ids, 5, 1, 2, 2);
    REQUIRE(w.counts.size() == 3);
    CHECK(w.counts[0] == std::vector<int64_t>{2, 0});
    CHECK(w.counts[1] == std::vector<int64_t>{0, 2});
    CHECK(w.counts[2] == std::vector<int64_t>{0, 1});
    CHECK(w.start_token == std::vector<int64_t>{0, 2, 4});
    CHECK(w.num_tokens == std::vector<int64_t>{2, 2, 1});
    CHECK(w.max_over_mean[0] == Approx(2.0));
    CHECK(w.max_over_mean[2] == Approx(2.0));
}

TEST_CASE("co-activation counts and top pairs", "[expert_load]") {
    const int32_t ids[] = {0, 1, 1, 0, 2, 3, 3, 3, 0, -1};  // k = 2; a repeated id and a -1 make no pair
    auto m = coactivation_counts(ids, 5, 2, 4);
    CHECK(m[0 * 4 + 1] == 2);
    CHECK(m[1 * 4 + 0] == 2);
    CHECK(m[2 * 4 + 3] == 1);
    CHECK(m[3 * 4 + 3] == 0);
    int64_t total = 0;
    for (int64_t v : m) total += v;
    CHECK(total == 6);
    auto top = top_coactivation_pairs(ids, 5, 2, 5);
    REQUIRE(top.size() == 2);
    CHECK((top[0].a == 0 && top[0].b == 1 && top[0].count == 2));
    CHECK((top[1].a == 2 && top[1].b == 3 && top[1].count == 1));
    CHECK(top_coactivation_pairs(ids, 5, 2, 1).size() == 1);
    // Ties by (a, b); the pairs equal the dense matrix's at any expert count.
    const int32_t many[] = {7, 3, 3, 9000, 9000, 7, 5, 1};  // {3,7} {3,9000} {7,9000} {1,5}
    auto tied = top_coactivation_pairs(many, 4, 2, 10);
    REQUIRE(tied.size() == 4);
    CHECK((tied[0].a == 1 && tied[0].b == 5));
    CHECK((tied[1].a == 3 && tied[1].b == 7));
    CHECK((tied[2].a == 3 && tied[2].b == 9000));
    CHECK((tied[3].a == 7 && tied[3].b == 9000));
}

TEST_CASE("switch rate between consecutive tokens of a sequence", "[expert_load]") {
    const int32_t ids[] = {0, 1, 1, 0, 1, 2, 2, 1};  // sets {0,1} {0,1} {1,2} {1,2}
    SwitchStats one = switch_stats(ids, 4, 2, {});
    CHECK(one.num_pairs == 3);
    CHECK(one.num_switches == 1);
    CHECK(one.switch_rate == Approx(1.0 / 3.0));
    CHECK(one.mean_overlap == Approx((1.0 + 0.5 + 1.0) / 3.0));
    // Two sequences [0, 2) and [2, 4): the pair across the boundary does not count.
    SwitchStats two = switch_stats(ids, 4, 2, {0, 2});
    CHECK(two.num_pairs == 2);
    CHECK(two.num_switches == 0);
    CHECK(two.switch_rate == 0);
}

TEST_CASE("router entropy, top-1 probability and logit range", "[expert_load]") {
    const float flat[] = {0, 0, 0, 0};
    RouterStats f = router_stats(flat, 1, 4);
    CHECK(f.entropy_bits_mean == Approx(2.0));
    CHECK(f.entropy_norm_mean == Approx(1.0));
    CHECK(f.top1_prob_mean == Approx(0.25));
    CHECK(f.logit_range_mean == Approx(0.0));

    // Token 0 flat; token 1 logits [ln 4, 0, 0, 0] -> p = [4/7, 1/7, 1/7, 1/7].
    const float two[] = {0, 0, 0, 0, static_cast<float>(std::log(4.0)), 0, 0, 0};
    RouterStats r = router_stats(two, 2, 4);
    double h1 = -(4.0 / 7 * std::log2(4.0 / 7) + 3.0 / 7 * std::log2(1.0 / 7));
    CHECK(r.entropy_bits_mean == Approx((2.0 + h1) / 2).epsilon(1e-6));
    CHECK(r.entropy_bits_p95 == Approx(h1 + 0.95 * (2.0 - h1)).epsilon(1e-6));  // linear between the two
    CHECK(r.top1_prob_mean == Approx((0.25 + 4.0 / 7) / 2).epsilon(1e-6));
    CHECK(r.logit_min == Approx(0.0));
    CHECK(r.logit_max == Approx(std::log(4.0)).epsilon(1e-6));
    CHECK(r.logit_range_mean == Approx(std::log(4.0) / 2).epsilon(1e-6));
}

TEST_CASE("balance metrics engines log, by hand", "[expert_load][balance]") {
    // Layer A: ranks [4, 0] (mean 2, max 4); layer B: [2, 2] (mean 2, max 2); layer C idle, left out.
    const LoadBalance b = load_balance({{4, 0}, {2, 2}, {0, 0}});
    CHECK(b.layers == 2);
    CHECK(b.balancedness == Approx((0.5 + 1.0) / 2));                 // mean of mean/max per layer
    CHECK(b.sum_mean_over_sum_max == Approx((2.0 + 2.0) / (4 + 2)));  // sum of means / sum of maxima
    CHECK(b.imbalance_mean == Approx((1.0 + 0.0) / 2));               // (max - mean) / mean, averaged
    CHECK(b.imbalance_max == Approx(1.0));
    CHECK(b.imbalance_max_layer == 0);
    // One busy unit of N: 1/N, 1/N, N - 1.
    const LoadBalance one = load_balance({{0, 0, 9, 0, 0}});
    CHECK(one.balancedness == Approx(0.2));
    CHECK(one.sum_mean_over_sum_max == Approx(0.2));
    CHECK(one.imbalance_max == Approx(4.0));
    CHECK(load_balance({}).layers == 0);
}

TEST_CASE("rank loads: an expert's assignments on its rank, replicas splitting them evenly", "[expert_load][balance]") {
    // Experts 0,1 on rank 0, experts 2,3 on rank 1, expert 0 also replicated on rank 1.
    const std::vector<std::vector<int32_t>> ranks_of_expert = {{0, 1}, {0}, {1}, {1}};
    const std::vector<double> load = rank_loads({6, 1, 2, 3}, ranks_of_expert, 2);
    REQUIRE(load.size() == 2);
    CHECK(load[0] == Approx(3 + 1));
    CHECK(load[1] == Approx(3 + 2 + 3));
}

TEST_CASE("routing-decision cache: repeats of a token's expert set within a window of its sequence, by hand",
          "[routing_cache]") {
    // Sequence A: {1,2} {2,1} {3,4} {1,2} {-1,3}; sequence B: {1,2} {1,2}.
    const std::vector<int32_t> ids = {1, 2, 2, 1, 3, 4, 1, 2, -1, 3, 1, 2, 1, 2};
    // W = 2: t1 hits t0 (the same set in another order), t3 hits t1 (2 back), t4 is not looked up (missing), t5
    // starts B (miss), t6 hits t5: 3 hits of 6 lookups.
    RoutingCacheStats w2 = routing_cache_stats(ids.data(), 7, 2, {0, 5}, 2);
    CHECK(w2.lookups == 6);
    CHECK(w2.hits == 3);
    CHECK(w2.hit_rate == Approx(0.5));
    // W = 1: t3's repeat is 2 tokens back, out of the window.
    RoutingCacheStats w1 = routing_cache_stats(ids.data(), 7, 2, {0, 5}, 1);
    CHECK(w1.hits == 2);
    CHECK(w1.hit_rate == Approx(2.0 / 6.0));
    // One sequence: t5 now hits t3 (2 back) under W = 2.
    CHECK(routing_cache_stats(ids.data(), 7, 2, {0}, 2).hits == 4);
    CHECK(routing_cache_stats(ids.data(), 7, 2, {0}, 0).lookups == 0);
}
