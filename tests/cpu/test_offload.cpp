// SPDX-License-Identifier: Apache-2.0
// Expert offload: the cache policies against hand-computed cases and a straightforward reference written here, the
// Belady bound over every policy (hand-made, random and the real Mixtral traces), the prefetch predictor, and
// `moebench offload` (its JSON keys, its bytes, its refusals).
#include "cli_helpers.hpp"
#include "robust_helpers.hpp"
#include "test_paths.hpp"

#include "report/formats.hpp"
#include "workload/expert_cache.hpp"
#include "workload/offload_replay.hpp"
#include "workload/trace_import.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <set>

using namespace moebench;
using moebench::test::expect_refused;
using moebench::test::run_cli;

namespace {

// A trace of one sequence from per-layer rows of k ids per token.
RoutingTrace make_trace(int64_t experts, int64_t k, const std::vector<std::vector<std::vector<int32_t>>>& layers) {
    RoutingTrace t;
    t.num_layers = static_cast<int64_t>(layers.size());
    t.num_tokens = static_cast<int64_t>(layers.front().size());
    t.top_k = k;
    t.num_experts = experts;
    for (const auto& layer : layers)
        for (const auto& token : layer) t.topk_ids.insert(t.topk_ids.end(), token.begin(), token.end());
    t.seq_starts = {0};
    return t;
}

RoutingTrace one_layer_k1(int64_t experts, const std::vector<int32_t>& ids) {
    std::vector<std::vector<int32_t>> tokens;
    for (int32_t e : ids) tokens.push_back({e});
    return make_trace(experts, 1, {tokens});
}

// ---- the reference: the rules of docs/offload.md written out plainly, O(n^2) ------------------------------------
// Starting residents: the N most used experts of the layer (ties: lowest id), the most used counting as the most
// recently used.
std::vector<int32_t> ref_start(const std::vector<int32_t>& acc, int64_t E, int64_t N) {
    std::vector<std::pair<int64_t, int32_t>> by_use;  // (-uses, id)
    for (int32_t e = 0; e < E; ++e) by_use.push_back({-std::count(acc.begin(), acc.end(), e), e});
    std::sort(by_use.begin(), by_use.end());
    std::vector<int32_t> out;
    for (int64_t i = 0; i < std::min(N, E); ++i) out.push_back(by_use[static_cast<size_t>(i)].second);
    return out;
}

int64_t ref_hits(const std::string& policy, const std::vector<int32_t>& acc, int64_t E, int64_t N) {
    const std::vector<int32_t> start = ref_start(acc, E, N);
    int64_t hits = 0;
    if (policy == "static-hot") {
        for (int32_t e : acc) hits += std::count(start.begin(), start.end(), e);
        return hits;
    }
    if (policy == "lru") {
        std::vector<int32_t> order(start.rbegin(), start.rend());  // front: least recent
        for (int32_t e : acc) {
            auto it = std::find(order.begin(), order.end(), e);
            if (it != order.end()) {
                ++hits;
                order.erase(it);
            } else if (static_cast<int64_t>(order.size()) == std::min(N, E)) {
                order.erase(order.begin());
            }
            order.push_back(e);
        }
        return hits;
    }
    if (policy == "lfu") {
        std::map<int32_t, int64_t> uses, last;
        std::vector<int32_t> res = start;
        for (size_t i = 0; i < start.size(); ++i) last[start[i]] = -static_cast<int64_t>(i) - 1;
        int64_t now = 0;
        for (int32_t e : acc) {
            ++uses[e];
            ++now;
            if (std::find(res.begin(), res.end(), e) != res.end()) {
                ++hits;
            } else {
                if (static_cast<int64_t>(res.size()) == std::min(N, E)) {
                    auto victim = std::min_element(res.begin(), res.end(), [&](int32_t a, int32_t b) {
                        return std::pair(uses[a], last[a]) < std::pair(uses[b], last[b]);
                    });
                    res.erase(victim);
                }
                res.push_back(e);
            }
            last[e] = now;
        }
        return hits;
    }
    REQUIRE(policy == "optimal");
    std::vector<int32_t> res = start;
    const auto next_use = [&](int32_t e, size_t after) -> size_t {
        for (size_t j = after + 1; j < acc.size(); ++j)
            if (acc[j] == e) return j;
        return SIZE_MAX;
    };
    for (size_t i = 0; i < acc.size(); ++i) {
        const int32_t e = acc[i];
        if (std::find(res.begin(), res.end(), e) != res.end()) {
            ++hits;
            continue;
        }
        std::vector<int32_t> candidates = res;
        candidates.push_back(e);
        int32_t drop = -1;
        size_t farthest = 0;
        for (int32_t c : candidates) {
            const size_t n = next_use(c, i);
            if (drop < 0 || n > farthest || (n == farthest && c < drop)) drop = c, farthest = n;
        }
        if (drop != e) {
            res.erase(std::find(res.begin(), res.end(), drop));
            res.push_back(e);
        }
    }
    return hits;
}

const std::vector<std::string> kDemandPolicies = {"static-hot", "lru", "lfu", "optimal"};

// The replay against the reference on every layer of `t`, for every policy that only fetches on demand.
void check_against_reference(const RoutingTrace& t, int64_t N) {
    for (const std::string& p : kDemandPolicies) {
        const OffloadReplay r = replay_offload(t, N, offload_policy(p, "policy"));
        for (int64_t l = 0; l < t.num_layers; ++l) {
            INFO("policy " << p << " N " << N << " layer " << l);
            const std::vector<int32_t> acc = layer_accesses(t, l);
            const OffloadCounts& c = r.layers[static_cast<size_t>(l)];
            CHECK(c.accesses == static_cast<int64_t>(acc.size()));
            CHECK(c.hits == ref_hits(p, acc, t.num_experts, N));
            CHECK(c.hits + c.misses == c.accesses);
        }
    }
}

// Belady is the bound: its hits at least every demand policy's, its fetches at most every policy's (prefetch's
// fetches include the experts it brought in ahead).
void check_optimal_bound(const RoutingTrace& t, int64_t N) {
    const OffloadReplay opt = replay_offload(t, N, offload_policy("optimal", "policy"));
    for (const OffloadPolicy& p : offload_policies()) {
        const OffloadReplay r = replay_offload(t, N, p);
        for (size_t l = 0; l < r.layers.size(); ++l) {
            INFO("policy " << p.name << " N " << N << " layer " << l);
            CHECK(opt.layers[l].fetches() <= r.layers[l].fetches());
            if (!p.prefetches) CHECK(opt.layers[l].hits >= r.layers[l].hits);
        }
    }
}

}  // namespace

TEST_CASE("offload policies on a hand-computed trace: ties and bypass", "[offload]") {
    // Accesses 0 1 2 0 1 3 0 of 4 experts, N = 2. Uses 0:3 1:2 2:1 3:1: every policy starts with {0, 1}, 0 the most
    // recent. LRU: hit 0, hit 1, then 2, 0, 1, 3, 0 each miss the expert just evicted: 2 hits. LFU: at the miss on 2
    // the residents 0 and 1 have one use each, the tie goes to the least recent (0), and so on: 2 hits. Static-hot:
    // the five accesses of 0 and 1 hit. Belady: 2 and 3 bypass or replace an expert never used again: 5 hits.
    const RoutingTrace t = one_layer_k1(4, {0, 1, 2, 0, 1, 3, 0});
    const std::map<std::string, int64_t> expected = {{"lru", 2}, {"lfu", 2}, {"static-hot", 5}, {"optimal", 5}};
    for (const auto& [policy, hits] : expected) {
        INFO(policy);
        const OffloadReplay r = replay_offload(t, 2, offload_policy(policy, "policy"));
        CHECK(r.total.hits == hits);
        CHECK(r.total.misses == 7 - hits);
        CHECK(r.total.hit_rate() == Approx(double(hits) / 7.0));
    }
    check_against_reference(t, 2);
}

TEST_CASE("offload: N >= E keeps every expert resident, N < k evicts inside a token", "[offload]") {
    const RoutingTrace t = make_trace(3, 2, {{{0, 1}, {2, 1}, {0, 2}, {1, 0}}});
    for (const OffloadPolicy& p : offload_policies())
        for (int64_t n : {3, 4, 100}) {
            INFO(p.name << " N " << n);
            const OffloadReplay r = replay_offload(t, n, p);
            CHECK(r.resident_effective == 3);
            CHECK(r.total.hits == 8);
            CHECK(r.total.fetches() == 0);
        }
    // N = 1 < k = 2 on tokens {0,1},{0,1}: 0 starts resident (uses tie, lowest id). LRU: hit 0, miss 1 (evicts 0),
    // miss 0, miss 1: 1 hit. Belady keeps 0 (used again sooner) and bypasses 1: hit, miss, hit, miss: 2 hits.
    const RoutingTrace small = make_trace(3, 2, {{{0, 1}, {0, 1}}});
    CHECK(replay_offload(small, 1, offload_policy("lru", "policy")).total.hits == 1);
    CHECK(replay_offload(small, 1, offload_policy("optimal", "policy")).total.hits == 2);
    check_against_reference(small, 1);
    check_against_reference(t, 1);
    check_against_reference(t, 2);
}

TEST_CASE("offload policies match the reference on random traces, and Belady bounds them all", "[offload]") {
    std::mt19937 rng(7);
    for (int trial = 0; trial < 40; ++trial) {
        const int64_t E = 2 + trial % 9, k = 1 + trial % std::min<int64_t>(3, E), L = 1 + trial % 3;
        const int64_t T = 5 + trial * 3;
        std::vector<std::vector<std::vector<int32_t>>> layers(static_cast<size_t>(L));
        // Skewed choices (a few hot experts), distinct within a token.
        std::vector<double> weights;
        for (int64_t e = 0; e < E; ++e) weights.push_back(1.0 / double(1 + e * e));
        std::discrete_distribution<int32_t> pick(weights.begin(), weights.end());
        for (auto& layer : layers)
            for (int64_t t = 0; t < T; ++t) {
                std::vector<int32_t> ids;
                while (static_cast<int64_t>(ids.size()) < k) {
                    const int32_t e = pick(rng);
                    if (std::find(ids.begin(), ids.end(), e) == ids.end()) ids.push_back(e);
                }
                layer.push_back(ids);
            }
        const RoutingTrace t = make_trace(E, k, layers);
        for (int64_t N = 1; N <= E + 1; ++N) {
            check_against_reference(t, N);
            check_optimal_bound(t, N);
        }
    }
}

TEST_CASE("offload: Belady bounds every policy on the real Mixtral traces, and LRU and Belady match the reference",
          "[offload]") {
    for (const char* name : {"mixtral-8x7b-gsm8k.jsonl", "mixtral-8x7b-humaneval.jsonl"}) {
        INFO(name);
        ImportSummary summary;
        const RoutingTrace t = import_trace(std::string(MOEBENCH_TEST_DATA) + "/traces/" + name, 8, &summary);
        REQUIRE(t.num_layers == 32);
        for (int64_t N = 1; N <= 8; ++N) check_optimal_bound(t, N);
        // The O(n^2) reference on a few layers (it is slow by design).
        for (int64_t N : {2, 4}) {
            for (const std::string p : {"lru", "optimal", "lfu"}) {
                const OffloadReplay r = replay_offload(t, N, offload_policy(p, "policy"));
                for (int64_t l : {0, 15, 31}) {
                    INFO(p << " N " << N << " layer " << l);
                    CHECK(r.layers[static_cast<size_t>(l)].hits == ref_hits(p, layer_accesses(t, l), 8, N));
                }
            }
        }
    }
}

TEST_CASE("offload prefetch: a predictor learnt online from what was replayed, its precision and recall", "[offload]") {
    // Layer 0 alternates 0, 1; layer 1 follows it: 0 -> 2, 1 -> 3. Token 0 and token 1 see a layer-0 expert for the
    // first time (nothing to predict); from token 2 on every prediction is right. 10 tokens: 8 predicted, 8 used,
    // 10 accesses of layer 1: precision 1, recall 0.8. N = 1 in layer 1: 2 starts resident (uses tie, lowest id):
    // token 0 hits, token 1 misses (3), then every token's expert was prefetched: 9 hits, 1 miss, 8 fetched ahead.
    std::vector<std::vector<int32_t>> l0, l1;
    for (int t = 0; t < 10; ++t) {
        l0.push_back({t % 2});
        l1.push_back({2 + t % 2});
    }
    const RoutingTrace t = make_trace(4, 1, {l0, l1});
    const OffloadReplay r = replay_offload(t, 1, offload_policy("prefetch", "policy"));
    const OffloadCounts& c = r.layers[1];
    CHECK(c.predicted == 8);
    CHECK(c.predicted_used == 8);
    CHECK(c.predictable_accesses == 10);
    CHECK(c.precision() == Approx(1.0));
    CHECK(c.recall() == Approx(0.8));
    CHECK(c.hits == 9);
    CHECK(c.misses == 1);
    CHECK(c.prefetch_fetches == 8);
    CHECK(r.layers[0].predicted == 0);  // nothing predicts the first layer
}

TEST_CASE("offload reuse distances in tokens", "[offload]") {
    // Expert 0 at tokens 0, 1, 3, 7: distances 1, 2, 4; expert 1 at tokens 2, 4..6: 2, 1, 1. Median of
    // {1,1,1,2,2,4} (lower): 1; buckets "1": 3, "2": 2, "3-4": 1; first uses 2.
    const RoutingTrace t = one_layer_k1(2, {0, 0, 1, 0, 1, 1, 1, 0});
    const OffloadReplay r = replay_offload(t, 1, offload_policy("lru", "policy"));
    const OffloadCounts& c = r.layers[0];
    CHECK(c.first_uses == 2);
    CHECK(c.reuse_buckets[0] == 3);
    CHECK(c.reuse_buckets[1] == 2);
    CHECK(c.reuse_buckets[2] == 1);
    CHECK(c.reuse_median_tokens == 1.0);
    CHECK(reuse_bucket_label(2) == "3-4");
}

TEST_CASE("moebench offload: JSON keys, one N and several, bytes from the model", "[offload][cli]") {
    const std::string trace = std::string(MOEBENCH_TEST_DATA) + "/traces/mixtral-8x7b-gsm8k.jsonl";
    auto r = run_cli("offload --trace " + trace + " --resident 2 --policy lru --model mixtral-8x7b --format json");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto doc = nlohmann::json::parse(r.out);
    CHECK(doc.at("schema") == "moebench.offload/1");
    CHECK(doc.at("hit_rate").get<double>() > 0.0);
    CHECK(doc.at("hit_rate").get<double>() < 1.0);
    REQUIRE(doc.at("per_layer").size() == 32);
    CHECK(doc["per_layer"][5].at("layer") == 5);
    CHECK(doc["per_layer"][5].at("hit_rate").is_number());
    // One Mixtral expert: gate, up and down of 4096 x 14336 in bf16.
    const double expert_bytes = 3.0 * 4096 * 14336 * 2;
    CHECK(doc.at("expert_bytes").get<double>() == expert_bytes);
    CHECK(doc.at("bytes_fetched_per_token").get<double>() ==
          Approx(doc.at("misses_per_token").get<double>() * expert_bytes));
    CHECK(doc.at("misses").get<int64_t>() == doc.at("accesses").get<int64_t>() - doc.at("hits").get<int64_t>());

    auto multi = run_cli("offload --trace " + trace + " --resident 1,2,8 --policy optimal --format json");
    INFO(multi.err);
    REQUIRE(multi.exit_code == 0);
    const auto m = nlohmann::json::parse(multi.out);
    CHECK_FALSE(m.contains("hit_rate"));
    REQUIRE(m.at("points").size() == 3);
    CHECK(m["points"][0].at("hit_rate").get<double>() <= m["points"][1].at("hit_rate").get<double>());
    CHECK(m["points"][2].at("hit_rate").get<double>() == 1.0);  // N = E: all hits
    CHECK(m.at("expert_bytes").is_null());                      // no model: no bytes, and the text view says so
    auto text = run_cli("offload --trace " + trace + " --resident 99");
    CHECK(text.exit_code == 0);
    CHECK_THAT(text.out, Catch::Contains("hit rate 100.0%"));
    // The text and csv views are the format table's views of that document, and -o writes the view.
    for (const char* f : {"text", "csv"}) {
        INFO(f);
        const auto view = run_cli("offload --trace " + trace + " --resident 1,2,8 --policy optimal --format " + f);
        CHECK(view.exit_code == 0);
        CHECK(view.out == moebench::render_view(m, moebench::DocKind::offload, f));
    }
    const std::string out = moebench::test::temp_dir("offload-view") + "/v.csv";
    REQUIRE(
        run_cli("offload --trace " + trace + " --resident 1,2,8 --policy optimal --format csv -o " + out).exit_code ==
        0);
    CHECK(moebench::test::read_text(out) == moebench::render_view(m, moebench::DocKind::offload, "csv"));
    // A range as a sweep writes it: 1..8 is 1, 2, 4, 8.
    auto range = run_cli("offload --trace " + trace + " --resident 1..8 --policy optimal --format json");
    INFO(range.err);
    REQUIRE(range.exit_code == 0);
    const auto rj = nlohmann::json::parse(range.out);
    REQUIRE(rj.at("points").size() == 4);
    CHECK(rj["points"][2].at("resident") == 4);
    CHECK(rj["points"][1] == m["points"][1]);  // 2 resident: the same replay as in 1,2,8
    auto csv = run_cli("offload --trace " + trace + " --resident 2,3 --format csv");
    CHECK(csv.exit_code == 0);
    CHECK(std::count(csv.out.begin(), csv.out.end(), '\n') == 1 + 2 * 33);
}

TEST_CASE("moebench offload refuses bad input by flag, value and fix", "[offload][cli][robust]") {
    const std::string trace = std::string(MOEBENCH_TEST_DATA) + "/traces/mixtral-8x7b-gsm8k.jsonl";
    expect_refused("offload --trace " + trace + " --resident 0", {"--resident", "got 0", "N >= 1"});
    // --resident reads a list as a sweep reads an axis, and names that syntax where a value is no whole number.
    expect_refused("offload --trace " + trace + " --resident 2,x",
                   {"--resident", "2,x", "x is not one", "a list (1,2,4) or a range (1..64"});
    expect_refused("offload --trace " + trace + " --resident 1-4", {"--resident", "1-4", "write 1..4"});
    expect_refused("offload --trace " + trace + " --resident 2.5", {"--resident", "2.5 is not one"});
    expect_refused("offload --trace " + trace + " --resident 2 --policy lruu",
                   {"--policy", "lruu", "did you mean lru?", "static-hot"});
    expect_refused("offload --trace " + trace + " --resident 2 --model qwen3-30b-a3b",
                   {"--model", "qwen3-30b-a3b", "top-8", "the trace top-2", "recorded on"});
    expect_refused("offload --trace " + trace + " --resident 2 --format yaml", {"--format", "yaml", "text"});
    expect_refused("offload --trace " + trace + " --resident 2 --expert-dtype fp7", {"--expert-dtype", "fp7"});
    expect_refused("offload --trace /nonexistent.jsonl --resident 2", {"--trace"});
}
