// SPDX-License-Identifier: Apache-2.0
// Each family's routing (core/moe_core.cuh route_row) against hand-computed cases: small E, explicit logits,
// expected ids and weights worked out by hand (values from the formulas of each family's reference code).
#include "core/moe_core.cuh"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

using namespace moebench::core;

namespace {
struct Routed {
    std::vector<int> ids;
    std::vector<float> w;
};
Routed route(const RouteParams& p, std::vector<float> logits, const float* bias = nullptr,
             const std::vector<unsigned char>& keep = {}) {
    std::vector<float> scratch(static_cast<size_t>(route_scratch_floats(p.num_experts, p.num_groups)));
    Routed r{std::vector<int>(static_cast<size_t>(p.top_k)), std::vector<float>(static_cast<size_t>(p.top_k))};
    route_row(p, logits.data(), bias, scratch.data(), r.ids.data(), r.w.data(), keep.empty() ? nullptr : keep.data());
    return r;
}
RouteParams params(int kind, int E, int k) {
    RouteParams p;
    p.kind = kind;
    p.num_experts = E;
    p.top_k = k;
    return p;
}
}  // namespace

TEST_CASE("softmax_topk (Qwen/OLMoE/DBRX): softmax over all, top-k, optional renormalisation", "[routing]") {
    // softmax([1,2,3,0]) = [0.087144, 0.236883, 0.643914, 0.032059]
    auto p = params(kRouteSoftmaxTopk, 4, 2);
    auto r = route(p, {1, 2, 3, 0});
    CHECK(r.ids == std::vector<int>{2, 1});
    CHECK(r.w[0] == Approx(0.6439143f).epsilon(1e-5));
    CHECK(r.w[1] == Approx(0.2368828f).epsilon(1e-5));
    p.norm_topk_prob = 1;  // Qwen3 / DBRX: renormalised over the two = sigmoid(1), sigmoid(-1)
    r = route(p, {1, 2, 3, 0});
    CHECK(r.ids == std::vector<int>{2, 1});
    CHECK(r.w[0] == Approx(0.7310586f).epsilon(1e-5));
    CHECK(r.w[1] == Approx(0.2689414f).epsilon(1e-5));
}

TEST_CASE("topk_softmax (Mixtral/gpt-oss): top-k of logits, softmax over the k", "[routing]") {
    auto r = route(params(kRouteTopkSoftmax, 4, 2), {1, 2, 3, 0});
    CHECK(r.ids == std::vector<int>{2, 1});
    CHECK(r.w[0] == Approx(0.7310586f).epsilon(1e-5));
    CHECK(r.w[1] == Approx(0.2689414f).epsilon(1e-5));
    // Tie-break: three equal logits, the two lowest ids win, equal weights.
    r = route(params(kRouteTopkSoftmax, 4, 2), {5, 5, 1, 5});
    CHECK(r.ids == std::vector<int>{0, 1});
    CHECK(r.w[0] == Approx(0.5f));
    CHECK(r.w[1] == Approx(0.5f));
}

TEST_CASE("topk_sigmoid (Llama-4): top-1 of logits, sigmoid of the chosen logit; input scaling flagged", "[routing]") {
    auto r = route(params(kRouteTopkSigmoid, 4, 1), {0.5f, -1.0f, 2.0f, 2.0f});
    CHECK(r.ids == std::vector<int>{2});  // tie between 2 and 3: lower id
    CHECK(r.w[0] == Approx(0.8807971f).epsilon(1e-5));
    CHECK(route_scales_input(kRouteTopkSigmoid));
    CHECK_FALSE(route_scales_input(kRouteTopkSoftmax));
}

TEST_CASE("sparsemixer (PhiMoE): top-2 of logits, each weight a softmax over the logits in its band", "[routing]") {
    // router_jitter_noise 0.01: logit l is in the band of m when (m - l) / max(|l|, m) <= 0.02.
    auto p = params(kRouteSparsemixer, 4, 2);
    p.jitter_eps = 0.01f;
    // m1 = 1.0: 0.99 is in its band (0.01), -1 and 0.5 are not: w1 = 1 / (1 + e^-0.01) = 0.5025.
    // m2 = 0.99 (expert 0 left out): alone in its band: w2 = 1 (Mixtral's pair would give 0.4975).
    auto r = route(p, {1.0f, 0.99f, -1.0f, 0.5f});
    CHECK(r.ids == std::vector<int>{0, 1});
    CHECK(r.w[0] == Approx(0.5025000f).epsilon(1e-5));
    CHECK(r.w[1] == Approx(1.0f).epsilon(1e-6));
    // m1 = 2: 1.99 (0.005) and 1.985 (0.0075) in its band: w1 = 1 / (1 + e^-0.01 + e^-0.015) = 0.3361162.
    // m2 = 1.99: 1.985 (0.0025) in its band, 2.0 left out: w2 = 1 / (1 + e^-0.005) = 0.5012500.
    r = route(p, {2.0f, 1.0f, 1.99f, 1.985f});
    CHECK(r.ids == std::vector<int>{0, 2});
    CHECK(r.w[0] == Approx(0.3361162f).epsilon(1e-5));
    CHECK(r.w[1] == Approx(0.5012500f).epsilon(1e-5));
    // Negative logits: the band divides by |l| (m < 0): (-0.5 + 0.505) / 0.505 = 0.0099 in, -0.6 (0.167) out.
    r = route(p, {-0.5f, -0.505f, -3.0f, -0.6f});
    CHECK(r.ids == std::vector<int>{0, 1});
    CHECK(r.w[0] == Approx(0.5012500f).epsilon(1e-5));
    CHECK(r.w[1] == Approx(1.0f).epsilon(1e-6));
}

TEST_CASE("sigmoid_group_topk (DeepSeek-V3): bias for selection only, groups by top-2 sum, renorm, scale",
          "[routing]") {
    // E = 8 in 4 groups of 2, keep 2 groups, top-2, norm_topk_prob, routed_scaling_factor 2.5.
    // s = sigmoid(l) = [.952574 .047426 | .731059 .5 | .880797 .268941 | .622459 .377541]
    // choice = s + bias = [.952574 .047426 | .731059 .8 | .380797 .268941 | .622459 .577541]
    // group scores = [1.0, 1.531059, 0.649738, 1.2] -> groups 1 and 3; expert 0 (best choice) is excluded.
    // top-2 of kept by choice: 3 (0.8), 2 (0.731); weights = s: 0.5, 0.731059 -> /1.231059 * 2.5.
    auto p = params(kRouteSigmoidGroupTopk, 8, 2);
    p.num_groups = 4;
    p.topk_groups = 2;
    p.norm_topk_prob = 1;
    p.routed_scaling_factor = 2.5f;
    const std::vector<float> bias = {0, 0, 0, 0.3f, -0.5f, 0, 0, 0.2f};
    auto r = route(p, {3, -3, 1, 0, 2, -1, 0.5f, -0.5f}, bias.data());
    CHECK(r.ids == std::vector<int>{3, 2});
    CHECK(r.w[0] == Approx(1.0153863f).epsilon(1e-5));
    CHECK(r.w[1] == Approx(1.4846137f).epsilon(1e-5));
    // Without groups the global best (expert 0) is chosen; without renorm the weights are s * scale.
    p.num_groups = 1;
    p.topk_groups = 1;
    p.norm_topk_prob = 0;
    r = route(p, {3, -3, 1, 0, 2, -1, 0.5f, -0.5f}, bias.data());
    CHECK(r.ids == std::vector<int>{0, 3});
    CHECK(r.w[0] == Approx(0.9525741f * 2.5f).epsilon(1e-5));
    CHECK(r.w[1] == Approx(0.5f * 2.5f).epsilon(1e-5));
}

TEST_CASE("softmax_group_greedy (DeepSeek-V2): softmax, groups by max, scale when not renormalised", "[routing]") {
    // softmax([0,1,2,-1,1.5,1.6]) = [.047824 .130000 | .353375 .017594 | .214333 .236875]
    // group maxes: .13, .353, .237 -> group 1 only -> experts 2, 3 (the global second, expert 5, is excluded).
    auto p = params(kRouteSoftmaxGroupGreedy, 6, 2);
    p.num_groups = 3;
    p.topk_groups = 1;
    p.routed_scaling_factor = 16.0f;
    auto r = route(p, {0, 1, 2, -1, 1.5f, 1.6f});
    CHECK(r.ids == std::vector<int>{2, 3});
    CHECK(r.w[0] == Approx(5.6540049f).epsilon(1e-5));
    CHECK(r.w[1] == Approx(0.2814963f).epsilon(1e-5));
    p.norm_topk_prob = 1;  // reference: renormalised, and then NOT scaled
    r = route(p, {0, 1, 2, -1, 1.5f, 1.6f});
    CHECK(r.w[0] == Approx(0.353375f / (0.353375f + 0.0175935f)).epsilon(1e-4));
    CHECK(r.w[0] + r.w[1] == Approx(1.0f));
}

TEST_CASE("soft top-N: softmax over all experts, the N most probable, renormalised", "[routing]") {
    std::vector<float> logits = {1, 2, 3, 0}, scratch(4), w(3);
    std::vector<int> ids(3);
    soft_topn_row(logits.data(), 4, 3, scratch.data(), ids.data(), w.data());
    CHECK(ids == std::vector<int>{2, 1, 0});
    CHECK(w[0] == Approx(0.6652410f).epsilon(1e-5));
    CHECK(w[1] == Approx(0.2447285f).epsilon(1e-5));
    CHECK(w[2] == Approx(0.0900306f).epsilon(1e-5));
}

TEST_CASE("NaN router logits rank last: every kind returns k distinct ids in range", "[routing]") {
    // A NaN logit (a broken checkpoint, an overflow upstream) must not produce id -1 or an out-of-range read: the
    // GPU's warp argmax relies on the same total order (moe_core topk_better).
    const float nan = std::nanf("");
    for (int kind = 0; kind <= 5; ++kind) {
        const int k = kind == kRouteTopkSigmoid ? 1 : 2;
        RouteParams p = params(kind, 8, k);
        if (kind == kRouteSigmoidGroupTopk || kind == kRouteSoftmaxGroupGreedy) {  // 4 groups of 2, the best 2
            p.num_groups = 4;
            p.topk_groups = 2;
        }
        for (const std::vector<float>& logits :
             {std::vector<float>(8, nan), std::vector<float>{nan, 0.5f, nan, 2.0f, -1.0f, nan, 0.25f, nan}}) {
            const Routed r = route(p, logits);
            INFO("kind " << kind);
            for (int j = 0; j < k; ++j) {
                CHECK(r.ids[j] >= 0);
                CHECK(r.ids[j] < 8);
                for (int i = 0; i < j; ++i) CHECK(r.ids[i] != r.ids[j]);
            }
            // Kinds that rank raw logits: the largest finite one wins (a softmax over all first makes every score
            // NaN, and then the lowest ids win).
            const bool ranks_logits =
                kind == kRouteTopkSoftmax || kind == kRouteTopkSigmoid || kind == kRouteSparsemixer;
            if (logits[1] == 0.5f && ranks_logits) CHECK(r.ids[0] == 3);
        }
    }
}

TEST_CASE("pruning: a pruned expert is as if its router row were deleted; weights normalised as the family does",
          "[routing][prune]") {
    // softmax then top-k, expert 2 pruned: softmax over the kept [1, 2, _, 0] = e^1, e^2, e^0 over 11.107337 =
    // [0.244728, 0.665241, -, 0.090031]; the token takes expert 1, then its next best kept, 0.
    auto p = params(kRouteSoftmaxTopk, 4, 2);
    const std::vector<unsigned char> keep = {1, 1, 0, 1};
    auto r = route(p, {1, 2, 3, 0}, nullptr, keep);
    CHECK(r.ids == std::vector<int>{1, 0});
    CHECK(r.w[0] == Approx(0.6652410f).epsilon(1e-5));
    CHECK(r.w[1] == Approx(0.2447285f).epsilon(1e-5));
    p.norm_topk_prob = 1;  // renormalised over the kept top-2: sigmoid(1), sigmoid(-1)
    r = route(p, {1, 2, 3, 0}, nullptr, keep);
    CHECK(r.w[0] == Approx(0.7310586f).epsilon(1e-5));
    CHECK(r.w[1] == Approx(0.2689414f).epsilon(1e-5));
    // Mixtral (top-k of logits, softmax over the k): the same two, softmax over their logits [2, 1].
    r = route(params(kRouteTopkSoftmax, 4, 2), {1, 2, 3, 0}, nullptr, keep);
    CHECK(r.ids == std::vector<int>{1, 0});
    CHECK(r.w[0] == Approx(0.7310586f).epsilon(1e-5));
    // DeepSeek-V3 (sigmoid, 2 groups of 4, 1 group kept, top-2 renormalised): logits [0,0,0,0 | 3,2,1,0]. Unpruned:
    // group 1 (sigmoid(3) + sigmoid(2) = 1.833 > 1.0), experts 4 and 5. Expert 4 pruned: group 1 still leads
    // (sigmoid(2) + sigmoid(1) = 1.612), and the token takes 5 and 6: 0.880797 / 1.611856, 0.731059 / 1.611856.
    RouteParams v3 = params(kRouteSigmoidGroupTopk, 8, 2);
    v3.num_groups = 2;
    v3.topk_groups = 1;
    v3.norm_topk_prob = 1;
    const std::vector<float> logits = {0, 0, 0, 0, 3, 2, 1, 0};
    CHECK(route(v3, logits).ids == std::vector<int>{4, 5});
    r = route(v3, logits, nullptr, {1, 1, 1, 1, 0, 1, 1, 1});
    CHECK(r.ids == std::vector<int>{5, 6});
    CHECK(r.w[0] == Approx(0.5464500f).epsilon(1e-5));
    CHECK(r.w[1] == Approx(0.4535500f).epsilon(1e-5));
    // Every expert of the leading group but one pruned: fewer than k kept there, the top-k spans the kept experts.
    r = route(v3, logits, nullptr, {1, 1, 1, 1, 0, 0, 0, 1});
    CHECK(r.ids[0] != 4);
    CHECK(std::find(r.ids.begin(), r.ids.end(), 5) == r.ids.end());
}

TEST_CASE("pruning: no family ever routes to a pruned expert; weights sum as unpruned", "[routing][prune]") {
    uint64_t state = 12345;
    const auto next = [&] { return state = state * 6364136223846793005ull + 1442695040888963407ull; };
    for (int kind :
         {kRouteSoftmaxTopk, kRouteTopkSoftmax, kRouteSigmoidGroupTopk, kRouteSoftmaxGroupGreedy, kRouteTopkSigmoid}) {
        for (int trial = 0; trial < 200; ++trial) {
            RouteParams p = params(kind, 16, kind == kRouteTopkSigmoid ? 1 : 4);
            p.norm_topk_prob = 1;
            if (kind == kRouteSigmoidGroupTopk || kind == kRouteSoftmaxGroupGreedy) p.num_groups = 4, p.topk_groups = 2;
            std::vector<float> logits(16);
            for (float& l : logits) l = static_cast<float>(static_cast<int>(next() >> 40) % 2000) / 500.0f - 2.0f;
            std::vector<unsigned char> keep(16, 1);
            int pruned = 0;
            for (int e = 0; e < 16 && pruned < 16 - p.top_k; ++e)
                if ((next() >> 33) % 3 == 0) keep[static_cast<size_t>(e)] = 0, ++pruned;
            const Routed r = route(p, logits, nullptr, keep);
            INFO("kind " << kind << " trial " << trial);
            float sum = 0;
            for (int j = 0; j < p.top_k; ++j) {
                REQUIRE(r.ids[static_cast<size_t>(j)] >= 0);
                REQUIRE(r.ids[static_cast<size_t>(j)] < 16);
                CHECK(keep[static_cast<size_t>(r.ids[static_cast<size_t>(j)])] == 1);
                sum += r.w[static_cast<size_t>(j)];
            }
            if (kind != kRouteTopkSigmoid) CHECK(sum == Approx(1.0f).epsilon(1e-4));  // renormalised (k > 1)
        }
    }
}
