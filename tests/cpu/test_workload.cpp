// SPDX-License-Identifier: Apache-2.0
// Workload generators: each synthetic distribution hits its target statistic, seeds reproduce, layers differ.
#include "common/error.hpp"
#include "metrics/expert_load.hpp"
#include "metrics/routing_stats.hpp"
#include "workload/workload.hpp"

#include "cli_helpers.hpp"

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <set>

using namespace moebench;
using Catch::Detail::Approx;

namespace {

ModelConfig synthetic_model(int64_t num_experts, int64_t top_k, int64_t num_layers = 4) {
    ModelConfig m;
    m.name = "synthetic";
    m.num_layers = num_layers;
    m.hidden_size = 64;
    m.moe.num_experts = num_experts;
    m.moe.top_k = top_k;
    m.layer_is_moe.assign(static_cast<size_t>(num_layers), 1);
    return m;
}

std::vector<int64_t> all_layers(const ModelConfig& m) {
    std::vector<int64_t> l(static_cast<size_t>(m.num_layers));
    std::iota(l.begin(), l.end(), int64_t{0});
    return l;
}

/// Ids of one layer over `tokens` tokens, generated in steps of `step`.
std::vector<int32_t> layer_stream(Workload& w, int64_t layer, int64_t tokens, int64_t step = 1024) {
    std::vector<int32_t> ids;
    for (int64_t done = 0; done < tokens; done += step) {
        auto s = w.next_step(std::min(step, tokens - done), {layer});
        REQUIRE(s.has_value());
        ids.insert(ids.end(), s->per_layer[0].ids.begin(), s->per_layer[0].ids.end());
    }
    return ids;
}

/// Least-squares slope of log(count) against log(rank) over the busiest-first sorted counts.
double loglog_slope(std::vector<int64_t> counts) {
    std::sort(counts.begin(), counts.end(), std::greater<>());
    double sx = 0, sy = 0, sxx = 0, sxy = 0, n = 0;
    for (size_t r = 0; r < counts.size(); ++r) {
        if (counts[r] <= 0) continue;
        double x = std::log(double(r + 1)), y = std::log(double(counts[r]));
        sx += x, sy += y, sxx += x * x, sxy += x * y, n += 1;
    }
    return (n * sxy - sx * sy) / (n * sxx - sx * sx);
}

void check_distinct_rows(const std::vector<int32_t>& ids, int64_t k, int64_t num_experts) {
    for (size_t t = 0; t < ids.size(); t += static_cast<size_t>(k)) {
        std::set<int32_t> s(ids.begin() + static_cast<std::ptrdiff_t>(t),
                            ids.begin() + static_cast<std::ptrdiff_t>(t) + k);
        REQUIRE(static_cast<int64_t>(s.size()) == k);
        REQUIRE(*s.begin() >= 0);
        REQUIRE(*s.rbegin() < num_experts);
    }
}

}  // namespace

TEST_CASE("routing specs parse, and malformed specs name the spec and the fix", "[workload]") {
    CHECK(parse_routing_spec("uniform").kind == WorkloadKind::uniform);
    CHECK(parse_routing_spec("zipf:1.2").zipf_exponent == Approx(1.2));
    auto hot = parse_routing_spec("hot:4:0.6");
    CHECK((hot.hot_experts == 4 && hot.hot_fraction == Approx(0.6)));
    CHECK(parse_routing_spec("imbalance:2.5").imbalance_ratio == Approx(2.5));
    auto dom = parse_routing_spec("domains:8:0.05");
    CHECK((dom.num_domains == 8 && dom.switch_prob == Approx(0.05)));
    CHECK(parse_routing_spec("trace:/a/b:c.safetensors").trace_path == "/a/b:c.safetensors");
    CHECK(parse_routing_spec("powerlaw:0.5").kind == WorkloadKind::zipf);
    CHECK(parse_routing_spec("powerlaw:0.5").zipf_exponent == Approx(0.5));
    for (const char* bad :
         {"zipf",          "zipf:x",      "zipf:-1",      "powerlaw", "powerlaw:", "powerlaw:-0.5", "powerlaw:nan",
          "powerlaw:inf",  "powerlaw:21", "powerlaw:1:2", "hot:4",    "hot:0:0.5", "hot:4:1.5",     "imbalance:0.5",
          "domains:0:0.1", "domains:4:2", "domains:4",    "poisson",  "uniform:3", "trace:",        ""}) {
        INFO(bad);
        try {
            parse_routing_spec(bad, "--routing");
            FAIL("accepted");
        } catch (const ConfigError& e) {
            std::string msg = e.what();
            CHECK(msg.find("--routing") != std::string::npos);
            CHECK(msg.find(std::string("'") + bad + "'") != std::string::npos);
            CHECK(msg.find("docs/workloads.md") != std::string::npos);
        }
    }
    // What powerlaw's refusals say: there is no published exponent to default to; the exponent's range; a number.
    const auto error_of = [](const char* spec) {
        try {
            parse_routing_spec(spec, "--routing");
        } catch (const ConfigError& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    CHECK_THAT(error_of("powerlaw"),
               Catch::Contains("no default") && Catch::Contains("published") && Catch::Contains("powerlaw:ALPHA"));
    CHECK_THAT(error_of("powerlaw:-0.5"), Catch::Contains("power-law exponent must be in [0, 20]"));
    CHECK_THAT(error_of("powerlaw:21"), Catch::Contains("power-law exponent must be in [0, 20]"));
    CHECK_THAT(error_of("powerlaw:nan"), Catch::Contains("power-law exponent 'nan' is not a number"));
    const auto cli = moebench::test::run_cli(
        "run --backend sim --hardware h200-sxm --model mixtral-8x7b --layers 1 "
        "--batch 8 --iters 1 --warmup 0 --routing powerlaw:-1");
    CHECK(cli.exit_code == 2);
    CHECK_THAT(cli.err, Catch::Contains("routing (--routing)") && Catch::Contains("'powerlaw:-1'") &&
                            Catch::Contains("power-law exponent"));
}

TEST_CASE("infeasible specs for a model are ConfigErrors", "[workload]") {
    ModelConfig m = synthetic_model(64, 2);
    CHECK_THROWS_AS(make_workload("hot:1:0.6", m, 0), ConfigError);   // one expert can take at most 1/k = 0.5
    CHECK_THROWS_AS(make_workload("hot:64:0.6", m, 0), ConfigError);  // no cold experts left
    CHECK_THROWS_AS(make_workload("hot:32:0.4", m, 0), ConfigError);  // below the even share 32/64: not hot
    CHECK_NOTHROW(make_workload("hot:32:0.6", m, 0));
    CHECK_THROWS_AS(make_workload("imbalance:40", m, 0), ConfigError);  // above E/k = 32
    CHECK_NOTHROW(make_workload("imbalance:32", m, 0));
    auto w = make_workload("uniform", m, 0);
    CHECK_THROWS_AS(w->next_step(4, {4}), ConfigError);  // layer beyond the model
    CHECK_THROWS_AS(w->check_layers({-1}), ConfigError);
}

TEST_CASE("router workload leaves routing to the model", "[workload]") {
    ModelConfig m = synthetic_model(8, 2);
    auto w = make_workload("router", m, 0);
    CHECK_FALSE(w->overrides_routing());
    CHECK_FALSE(w->next_step(16, {0, 1}).has_value());
    CHECK(w->position() == 16);
}

TEST_CASE("zipf exponent is recovered by a log-log fit", "[workload]") {
    ModelConfig m = synthetic_model(64, 2);
    for (double s : {0.8, 1.2}) {
        auto w = make_workload(fmt::format("zipf:{}", s), m, 7);
        auto ids = layer_stream(*w, 1, 60000);
        check_distinct_rows(ids, 2, 64);
        auto counts = count_tokens_per_expert(ids.data(), 60000, 2, 64);
        INFO("s = " << s);
        CHECK(-loglog_slope(counts) == Approx(s).margin(0.06));
    }
}

TEST_CASE("powerlaw:ALPHA: the rank-r expert's popularity is r^-ALPHA, over a seeded permutation per layer",
          "[workload][powerlaw]") {
    ModelConfig m = synthetic_model(4, 2, 2);
    const auto sorted_load = [](const Workload& w, int64_t layer) {
        std::vector<double> v = w.expected_load(layer);
        std::sort(v.begin(), v.end(), std::greater<>());
        return v;
    };
    const auto check_shares = [](const std::vector<double>& got, const std::vector<double>& want) {
        REQUIRE(got.size() == want.size());
        for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(1e-12));
    };
    // 4 experts, top-2, alpha 1: 1, 1/2, 1/3, 1/4 over their sum 25/12 = 12/25, 6/25, 4/25, 3/25 (each below 1/k).
    auto w = make_workload("powerlaw:1", m, 11);
    CHECK_THAT(w->describe(), Catch::Contains("powerlaw"));
    for (int64_t layer : {0, 1}) check_shares(sorted_load(*w, layer), {12.0 / 25, 6.0 / 25, 4.0 / 25, 3.0 / 25});
    CHECK(w->expected_load(0) != w->expected_load(1));  // each layer its own permutation of the ranks
    // alpha 2: 1, 1/4, 1/9, 1/16 over 205/144; the first, 144/205, is above 1/k = 1/2 (a token picks an expert at most
    // once): it is capped at 1/2 and the other three share the other half as 36 : 16 : 9.
    check_shares(sorted_load(*make_workload("powerlaw:2", m, 11), 0), {0.5, 18.0 / 61, 8.0 / 61, 4.5 / 61});
    check_shares(sorted_load(*make_workload("powerlaw:0", m, 11), 0), {0.25, 0.25, 0.25, 0.25});  // alpha 0: even

    // Top-k without replacement: every token picks 2 distinct experts, each expert with probability k x its share
    // (0.96, 0.48, 0.32, 0.24), which 20000 tokens show within 4 standard deviations.
    const int64_t T = 20000;
    const std::vector<int32_t> ids = layer_stream(*w, 1, T);
    check_distinct_rows(ids, 2, 4);
    const auto counts = count_tokens_per_expert(ids.data(), T, 2, 4);
    const std::vector<double> load = w->expected_load(1);
    for (size_t e = 0; e < 4; ++e) {
        const double p = 2 * load[e], seen = static_cast<double>(counts[e]) / static_cast<double>(T);
        INFO("expert " << e << ": " << seen << " of the tokens, expected " << p);
        CHECK(std::fabs(seen - p) < 4 * std::sqrt(p * (1 - p) / static_cast<double>(T)));
    }
    // powerlaw is zipf's other name: the same stream.
    auto z = make_workload("zipf:1", m, 11);
    CHECK(layer_stream(*z, 1, 512) == layer_stream(*make_workload("powerlaw:1", m, 11), 1, 512));
}

TEST_CASE("powerlaw:0.5 on 256 experts, top-8: the hottest expert's observed share is the expected one",
          "[workload][powerlaw]") {
    // DeepSeek-V3's shape. The hottest expert's share is 1 / sum_{r=1..256} r^-0.5 = 0.03271 (max/mean 8.37 and the
    // busiest 25 experts' 0.283 in docs/workloads.md, from research/hw-models/skew.md's table).
    ModelConfig m = synthetic_model(256, 8, 1);
    double sum = 0;
    for (int r = 1; r <= 256; ++r) sum += 1.0 / std::sqrt(static_cast<double>(r));
    const double top = 1.0 / sum;
    CHECK(256 * top == Approx(8.37).margin(0.005));
    auto w = make_workload("powerlaw:0.5", m, 2024);
    const int64_t T = 40000, k = 8;
    const std::vector<int32_t> ids = layer_stream(*w, 0, T);
    check_distinct_rows(ids, k, 256);
    auto counts = count_tokens_per_expert(ids.data(), T, k, 256);
    std::sort(counts.begin(), counts.end(), std::greater<>());
    const double assignments = static_cast<double>(T * k);
    // One expert's count over T tokens is a sum of T Bernoulli(k x share) draws.
    const double sd = std::sqrt(static_cast<double>(T) * k * top * (1 - k * top)) / assignments;
    CHECK(static_cast<double>(counts[0]) / assignments == Approx(top).margin(4 * sd));
    double busiest = 0;
    for (size_t i = 0; i < 25; ++i) busiest += static_cast<double>(counts[i]);
    CHECK(busiest / assignments == Approx(0.2826).margin(0.006));
}

TEST_CASE("hot experts take their fraction, and differ across layers", "[workload]") {
    ModelConfig m = synthetic_model(64, 2);
    auto w = make_workload("hot:4:0.6", m, 3);
    std::vector<std::set<int32_t>> hot_sets;
    const int64_t tokens = 40000;
    auto step = w->next_step(tokens, all_layers(m));
    for (const auto& r : step->per_layer) {
        check_distinct_rows(r.ids, 2, 64);
        ExpertLoad l = expert_load(r.ids.data(), tokens, 2, 64);
        std::vector<int32_t> order(64);
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
            return l.tokens_per_expert[size_t(a)] > l.tokens_per_expert[size_t(b)];
        });
        int64_t hot = 0;
        for (int i = 0; i < 4; ++i) hot += l.tokens_per_expert[size_t(order[size_t(i)])];
        CHECK(double(hot) / double(l.num_assignments) == Approx(0.6).margin(0.02));
        hot_sets.emplace_back(order.begin(), order.begin() + 4);
    }
    // A per-layer permutation: not the same hot experts in every layer.
    CHECK(std::set<std::set<int32_t>>(hot_sets.begin(), hot_sets.end()).size() > 1);
}

TEST_CASE("imbalance hits the target max/mean within 10%", "[workload]") {
    for (auto [e, k, ratio] : {std::tuple{64, 2, 2.0}, std::tuple{64, 8, 3.0}, std::tuple{8, 2, 1.5}}) {
        ModelConfig m = synthetic_model(e, k);
        auto w = make_workload(fmt::format("imbalance:{}", ratio), m, 11);
        auto ids = layer_stream(*w, 2, 40000);
        check_distinct_rows(ids, k, e);
        ExpertLoad l = expert_load(ids.data(), 40000, k, e);
        INFO("E=" << e << " k=" << k << " R=" << ratio);
        CHECK(l.max_over_mean == Approx(ratio).epsilon(0.10));
    }
}

TEST_CASE("domains switch their expert sets at the given rate", "[workload]") {
    ModelConfig m = synthetic_model(64, 2);
    for (auto [d, p] : {std::pair{4, 0.1}, std::pair{8, 0.5}, std::pair{1, 0.3}}) {
        auto w = make_workload(fmt::format("domains:{}:{}", d, p), m, 5);
        const int64_t tokens = 20000;
        auto step = w->next_step(tokens, all_layers(m));
        for (const auto& r : step->per_layer) {
            check_distinct_rows(r.ids, 2, 64);
            SwitchStats s = switch_stats(r.ids.data(), tokens, 2, {0});
            INFO("domains:" << d << ":" << p);
            CHECK(s.switch_rate == Approx(p).margin(0.05));
        }
    }
}

TEST_CASE("balanced is exactly even, uniform passes a chi-square check", "[workload]") {
    ModelConfig m = synthetic_model(64, 4);
    auto b = make_workload("balanced", m, 1);
    b->next_step(5, {0});  // start mid-stream: any 16 consecutive tokens cover each expert once
    auto step = b->next_step(32, {0, 3});
    for (const auto& r : step->per_layer) {
        check_distinct_rows(r.ids, 4, 64);
        auto counts = count_tokens_per_expert(r.ids.data(), 32, 4, 64);
        CHECK(std::all_of(counts.begin(), counts.end(), [](int64_t c) { return c == 2; }));
    }
    CHECK(step->per_layer[0].ids != step->per_layer[1].ids);  // own order per layer

    auto u = make_workload("uniform", m, 1);
    const int64_t tokens = 16000;
    auto ids = layer_stream(*u, 0, tokens);
    check_distinct_rows(ids, 4, 64);
    auto counts = count_tokens_per_expert(ids.data(), tokens, 4, 64);
    const double expected = double(tokens * 4) / 64;
    double chi2 = 0;
    for (int64_t c : counts) chi2 += (double(c) - expected) * (double(c) - expected) / expected;
    // 63 degrees of freedom: mean 63, sd ~ 11.2. (Without replacement the variance is a little lower.)
    CHECK(chi2 > 20);
    CHECK(chi2 < 63 + 5 * 11.2);
}

TEST_CASE("workloads reproduce from the seed, independent of step size", "[workload]") {
    ModelConfig m = synthetic_model(32, 4, 3);
    m.layer_is_moe = {0, 1, 1};  // a dense first layer
    for (const char* spec : {"uniform", "balanced", "zipf:1.1", "hot:2:0.3", "imbalance:2", "domains:3:0.2"}) {
        INFO(spec);
        auto a = make_workload(spec, m, 42), b = make_workload(spec, m, 42), c = make_workload(spec, m, 43);
        auto whole = a->next_step(200, {0, 1, 2});
        REQUIRE(whole.has_value());
        CHECK(whole->per_layer[0].k == 0);
        CHECK(whole->per_layer[0].ids.empty());
        // The same stream cut into uneven steps, and asking for one layer only.
        std::vector<int32_t> pieces;
        for (int64_t n : {7, 93, 100}) {
            auto s = b->next_step(n, {2});
            pieces.insert(pieces.end(), s->per_layer[0].ids.begin(), s->per_layer[0].ids.end());
        }
        CHECK(pieces == whole->per_layer[2].ids);
        auto other = c->next_step(200, {0, 1, 2});
        if (std::string(spec) != "balanced") CHECK(other->per_layer[2].ids != whole->per_layer[2].ids);
        // seek() restarts the same stream.
        a->seek(100);
        auto again = a->next_step(100, {1});
        CHECK(std::equal(again->per_layer[0].ids.begin(), again->per_layer[0].ids.end(),
                         whole->per_layer[1].ids.begin() + 100 * 4));
        // Weights: positive, sorted descending, summing to 1.
        const auto& w = whole->per_layer[1].weights;
        for (size_t t = 0; t < w.size(); t += 4) {
            float sum = w[t] + w[t + 1] + w[t + 2] + w[t + 3];
            REQUIRE(sum == Approx(1.0f).epsilon(1e-5));
            REQUIRE(w[t] >= w[t + 1]);
            REQUIRE(w[t + 3] > 0);
        }
    }
}

TEST_CASE("each workload's expected load is what a long stream shows", "[workload][expected_load]") {
    // Workload::expected_load (what --redundant-experts places replicas by): each expert's share of a layer's
    // assignments. Against 60,000 tokens of the stream, within 0.01 of each share.
    ModelConfig m = synthetic_model(16, 2, 3);
    m.layer_is_moe = {0, 1, 1};
    const int64_t T = 60000;
    for (const char* spec :
         {"uniform", "balanced", "zipf:1.2", "powerlaw:0.5", "hot:2:0.2", "imbalance:3", "domains:4:0.2"}) {
        INFO(spec);
        auto w = make_workload(spec, m, 21);
        CHECK(w->expected_load(0).empty());  // a dense layer
        for (int64_t layer : {1, 2}) {
            const std::vector<double> load = w->expected_load(layer);
            REQUIRE(load.size() == 16);
            CHECK(std::accumulate(load.begin(), load.end(), 0.0) == Approx(1.0));
            auto fresh = make_workload(spec, m, 21);
            const std::vector<int32_t> ids = layer_stream(*fresh, layer, T);
            const auto counts = count_tokens_per_expert(ids.data(), T, 2, 16);
            for (size_t e = 0; e < 16; ++e)
                CHECK(static_cast<double>(counts[e]) / static_cast<double>(2 * T) == Approx(load[e]).margin(0.01));
        }
    }
    CHECK(make_workload("router", m, 21)->expected_load(1).empty());  // the model's router decides during the run
    // A trace: its own counts of the layer's slot, exactly.
    const std::string dir = test::temp_dir("wl-expected");
    auto gen = make_workload("zipf:1.0", m, 9);
    RoutingTrace t = generate_trace(*gen, m, {0, 1, 2}, 500, 100);
    t.model = m.name;
    write_trace(dir + "/t.safetensors", t);
    auto replay = make_workload("trace:" + dir + "/t.safetensors", m, 0);
    for (int64_t slot = 0; slot < 2; ++slot) {
        const auto counts = count_tokens_per_expert(t.topk_ids.data() + slot * 500 * 2, 500, 2, 16);
        const std::vector<double> load = replay->expected_load(1 + slot);
        REQUIRE(load.size() == 16);
        for (size_t e = 0; e < 16; ++e) CHECK(load[e] == Approx(static_cast<double>(counts[e]) / 1000.0));
    }
}

TEST_CASE("trace replay maps trace layers to MoE layers and wraps tokens", "[workload]") {
    std::string dir = test::temp_dir("wl-trace");
    ModelConfig m = synthetic_model(16, 2, 3);
    m.layer_is_moe = {0, 1, 1};
    auto gen = make_workload("zipf:1.0", m, 9);
    RoutingTrace t = generate_trace(*gen, m, {0, 1, 2}, 50, 16);
    CHECK(t.num_layers == 2);
    t.model = m.name;
    write_trace(dir + "/t.safetensors", t);

    auto w = make_workload("trace:" + dir + "/t.safetensors", m, 0);
    auto step = w->next_step(70, {0, 1, 2});
    CHECK(step->per_layer[0].k == 0);
    for (int64_t slot = 1; slot <= 2; ++slot) {
        const auto& r = step->per_layer[size_t(slot)];
        for (int64_t tok = 0; tok < 70; ++tok)
            for (int64_t j = 0; j < 2; ++j) {
                size_t src = size_t(((slot - 1) * 50 + tok % 50) * 2 + j);
                REQUIRE(r.ids[size_t(tok * 2 + j)] == t.topk_ids[src]);
                REQUIRE(r.weights[size_t(tok * 2 + j)] == t.topk_weights[src]);
            }
    }
    // Ids beyond a smaller model, a model with more MoE layers, another top-k.
    ModelConfig small = synthetic_model(8, 2, 3);
    small.layer_is_moe = {0, 1, 1};
    bool has_big_id = std::any_of(t.topk_ids.begin(), t.topk_ids.end(), [](int32_t e) { return e >= 8; });
    REQUIRE(has_big_id);
    CHECK_THROWS_AS(make_workload("trace:" + dir + "/t.safetensors", small, 0), ConfigError);
    ModelConfig deeper = synthetic_model(16, 2, 4);
    auto w4 = make_workload("trace:" + dir + "/t.safetensors", deeper, 0);
    CHECK_NOTHROW(w4->check_layers({0, 1}));
    CHECK_THROWS_AS(w4->check_layers({0, 1, 2, 3}), ConfigError);
    CHECK_THROWS_AS(w4->next_step(4, {0, 1, 2, 3}), ConfigError);
    ModelConfig one_layer = synthetic_model(16, 2, 1);
    CHECK_THROWS_AS(make_workload("trace:" + dir + "/t.safetensors", one_layer, 0), ConfigError);
    CHECK_THROWS_AS(make_workload("trace:" + dir + "/t.safetensors", synthetic_model(16, 4, 2), 0), ConfigError);
    CHECK_THROWS_AS(make_workload("trace:" + dir + "/missing.safetensors", m, 0), ConfigError);
    std::filesystem::remove_all(dir);
}

TEST_CASE("decode from a trace of several sequences: one token of each sequence per step", "[workload]") {
    std::string dir = test::temp_dir("wl-interleave");
    ModelConfig m = synthetic_model(16, 2, 1);
    auto gen = make_workload("zipf:1.0", m, 3);
    RoutingTrace t = generate_trace(*gen, m, {0}, 20, 16);
    t.seq_starts = {0, 10};  // two recorded sequences of 10 tokens
    t.model = m.name;
    write_trace(dir + "/t.safetensors", t);
    auto w = make_workload("trace:" + dir + "/t.safetensors", m, 0);
    w->interleave_sequences(4);
    CHECK_THAT(w->token_order(true), Catch::Contains("sequence b mod 2"));
    // Rows 0, 1: sequences 0 and 1 at the step's position; rows 2, 3: the second copies, half a sequence further.
    const std::vector<std::vector<int64_t>> expected = {{0, 10, 5, 15}, {1, 11, 6, 16}, {2, 12, 7, 17}};
    for (const auto& tokens : expected) {
        auto step = w->next_step(4, {0});
        for (size_t row = 0; row < tokens.size(); ++row)
            for (int64_t j = 0; j < 2; ++j)
                REQUIRE(step->per_layer[0].ids[row * 2 + size_t(j)] == t.topk_ids[size_t(tokens[row] * 2 + j)]);
    }
    // Prefill keeps consecutive tokens; so does a trace of one sequence.
    CHECK_THAT(w->token_order(false), Catch::Contains("consecutive tokens"));
}
