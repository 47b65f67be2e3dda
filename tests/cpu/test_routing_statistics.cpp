// SPDX-License-Identifier: Apache-2.0
// The statistical routing path (docs/sim-backend.md, "Routing path"): its draws against their exact laws and closed
// forms, the workload's own sampler, and the per-token path of the sim on the same configs; and where the path is
// taken.
#include "backends/sim/sim_routing.hpp"
#include "common/error.hpp"
#include "config/run_config.hpp"
#include "harness/runner.hpp"
#include "model/phase_work.hpp"
#include "workload/routing_statistics.hpp"
#include "workload/sampling.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <numeric>

using namespace moebench;
using sampling::Rng;

namespace {

struct Moments {
    double mean = 0, var = 0;
    int64_t n = 0;
    double se() const { return n > 1 ? std::sqrt(var / static_cast<double>(n)) : 0.0; }
};

Moments moments(const std::vector<double>& x) {
    Moments m;
    m.n = static_cast<int64_t>(x.size());
    for (double v : x) m.mean += v;
    m.mean /= static_cast<double>(x.size());
    for (double v : x) m.var += (v - m.mean) * (v - m.mean);
    m.var /= static_cast<double>(x.size() - 1);
    return m;
}

double choose(int64_t n, int64_t k) {
    double c = 1;
    for (int64_t i = 0; i < k; ++i) c = c * static_cast<double>(n - i) / static_cast<double>(i + 1);
    return c;
}

std::vector<int32_t> identity(int64_t n) {
    std::vector<int32_t> p(static_cast<size_t>(n));
    std::iota(p.begin(), p.end(), 0);
    return p;
}

}  // namespace

TEST_CASE("binomial draws have the binomial's mean and variance, exact and normal, and their maxima", "[stats]") {
    Rng rng(11);
    // (n, p): exact inversion (means below 16), the normal with skew (mean 60), and both flipped (p > 1/2).
    for (const auto& [n, p] : std::vector<std::pair<int64_t, double>>{
             {10, 0.3}, {2000, 0.03}, {2000, 0.97}, {50, 0.9}, {64, 1.0 / 32}, {5000, 0.5}}) {
        INFO("n " << n << " p " << p);
        const BinomialDraw draw(n, p);
        std::vector<double> x(200000);
        for (double& v : x) {
            v = static_cast<double>(draw(rng));
            REQUIRE(v >= 0);
            REQUIRE(v <= static_cast<double>(n));
        }
        const Moments m = moments(x);
        const double mean = static_cast<double>(n) * p, var = mean * (1 - p);
        CHECK(std::abs(m.mean - mean) <= 4 * std::sqrt(var / static_cast<double>(x.size())));
        CHECK(m.var == Approx(var).epsilon(0.03));  // the normal's rounding adds 1/12: below 1% of these variances
        // The largest of 8 at once against the largest of 8 separate draws.
        std::vector<double> at_once(40000), separate(40000);
        for (double& v : at_once) v = static_cast<double>(draw.max_of(8, rng));
        for (double& v : separate) {
            int64_t best = 0;
            for (int i = 0; i < 8; ++i) best = std::max(best, draw(rng));
            v = static_cast<double>(best);
        }
        const Moments a = moments(at_once), b = moments(separate);
        CHECK(std::abs(a.mean - b.mean) <= 4.5 * std::sqrt(a.var / 40000 + b.var / 40000) + 1e-9);
    }
    Rng r2(3);
    CHECK(BinomialDraw(100, 0.0)(r2) == 0);
    CHECK(BinomialDraw(100, 1.0)(r2) == 100);
    CHECK(BinomialDraw(0, 0.5)(r2) == 0);
}

TEST_CASE("expert counts: exact binomial marginals, T k in all, an expert every token picks gets T", "[stats]") {
    const int64_t E = 64, k = 6;
    // Zipf 1.2 capped at 1/k, plus a hot case whose 3 hot experts every token picks (inclusion 1).
    std::vector<std::vector<double>> cases = {sampling::zipf_shares(E, k, 1.2)};
    std::vector<double> hot(E, (1.0 - 3.0 / k) / static_cast<double>(E - 3));
    for (int i = 0; i < 3; ++i) hot[static_cast<size_t>(i)] = 1.0 / k;
    cases.push_back(hot);
    for (size_t c = 0; c < cases.size(); ++c)
        for (int64_t T : {3, 50, 700}) {
            INFO("case " << c << " T " << T);
            std::vector<double> incl(static_cast<size_t>(E));
            for (size_t e = 0; e < incl.size(); ++e) incl[e] = std::min(1.0, static_cast<double>(k) * cases[c][e]);
            const ExpertCountDraw draw(incl, k, T);
            const auto perm = sampling::permutation(E, 5);
            Rng rng(static_cast<uint64_t>(T + 100 * static_cast<int64_t>(c)));
            const int N = 20000;
            std::vector<std::vector<double>> per(static_cast<size_t>(E));
            std::vector<int64_t> counts;
            for (int i = 0; i < N; ++i) {
                draw.draw(perm, rng, counts);
                REQUIRE(std::accumulate(counts.begin(), counts.end(), int64_t{0}) == T * k);
                for (size_t r = 0; r < incl.size(); ++r) {
                    const int64_t n = counts[static_cast<size_t>(perm[r])];
                    REQUIRE(n >= 0);
                    REQUIRE(n <= T);
                    if (incl[r] >= 1) REQUIRE(n == T);
                    per[r].push_back(static_cast<double>(n));
                }
            }
            for (size_t r = 0; r < incl.size(); ++r) {
                const Moments m = moments(per[r]);
                const double mean = static_cast<double>(T) * incl[r], var = mean * (1 - incl[r]);
                // The sum's correction moves a few assignments: means stay within noise (5 se, 64 experts x 6 cases).
                CHECK(std::abs(m.mean - mean) <= 5 * std::sqrt(var / N) + 1e-9);
                if (var > 0.5) CHECK(m.var == Approx(var).epsilon(0.12));
            }
        }
}

TEST_CASE("a rank's miss probability: closed forms, and the workloads' own sampler", "[stats]") {
    std::vector<double> miss;
    // Uniform 2 of 8: the hypergeometric C(E - g, k) / C(E, k).
    GroupMissProbability uniform(std::vector<double>(8, 2.0 / 8), 2);
    uniform.miss(identity(8), {{0, 1}, {2, 3, 4, 5, 6, 7}}, miss);
    CHECK(miss[0] == Approx(15.0 / 28));
    CHECK(miss[1] == Approx(1.0 / 28));
    // One pick: a group is missed with 1 - its inclusions, whatever the law.
    const std::vector<double> one = {0.5, 0.3, 0.1, 0.1};
    GroupMissProbability k1(one, 1);
    k1.miss(identity(4), {{0}, {1, 2}, {3}}, miss);
    CHECK(miss[0] == Approx(0.5));
    CHECK(miss[1] == Approx(0.6));
    CHECK(miss[2] == Approx(0.9));
    // E - 1 picks of E: the one left out is missed, so a single expert is missed with 1 - inclusion, two never.
    const std::vector<double> most = {0.9, 0.8, 0.7, 0.6};  // sums to 3
    GroupMissProbability k3(most, 3);
    k3.miss(identity(4), {{0}, {1}, {2}, {3}}, miss);
    for (size_t e = 0; e < 4; ++e) CHECK(miss[e] == Approx(1 - most[e]).margin(1e-9));
    k3.miss(identity(4), {{0, 1}, {2, 3}}, miss);
    CHECK(miss[0] == Approx(0).margin(1e-9));
    // An expert every token picks: its group is never missed; the others share the rest of the picks.
    const std::vector<double> certain = {1.0, 0.5, 0.5};  // k = 2: the last pick is one of experts 1 and 2
    GroupMissProbability kc(certain, 2);
    kc.miss(identity(3), {{0}, {1}, {2}}, miss);
    CHECK(miss[0] == 0);
    CHECK(miss[1] == Approx(0.5));

    // Unequal inclusions: the model's law (conditional Poisson) against the zipf workload's sampler (systematic
    // sampling over a random order: the same inclusions, another joint law), 200000 tokens per case. The two laws
    // differ by at most 0.01 in any rank's miss probability here; that bounds the bias the path carries for zipf.
    for (const auto& [E, k, s] : std::vector<std::tuple<int64_t, int64_t, double>>{{32, 4, 1.0}, {64, 8, 1.2}}) {
        INFO("E " << E << " k " << k << " zipf " << s);
        const auto shares = sampling::zipf_shares(E, k, s);
        std::vector<double> incl(shares.size());
        for (size_t e = 0; e < incl.size(); ++e) incl[e] = std::min(1.0, static_cast<double>(k) * shares[e]);
        const int64_t ranks = 8, per_rank = E / ranks;
        std::vector<std::vector<int32_t>> groups(static_cast<size_t>(ranks));
        for (int32_t e = 0; e < E; ++e) groups[static_cast<size_t>(e / per_rank)].push_back(e);
        GroupMissProbability model(incl, k);
        model.miss(identity(E), groups, miss);
        std::vector<int64_t> missed(static_cast<size_t>(ranks), 0);
        Rng rng(7);
        const int64_t N = 200000;
        std::vector<int32_t> picks;
        for (int64_t t = 0; t < N; ++t) {
            picks.clear();
            sampling::sample_k_of_n(shares, k, rng, picks);
            std::vector<char> hit(static_cast<size_t>(ranks), 0);
            for (int32_t e : picks) hit[static_cast<size_t>(e / per_rank)] = 1;
            for (int64_t q = 0; q < ranks; ++q) missed[static_cast<size_t>(q)] += hit[static_cast<size_t>(q)] ? 0 : 1;
        }
        for (int64_t q = 0; q < ranks; ++q) {
            const double mc = static_cast<double>(missed[static_cast<size_t>(q)]) / static_cast<double>(N);
            CHECK(std::abs(mc - miss[static_cast<size_t>(q)]) <= 0.01);
        }
    }
}

TEST_CASE("the largest rows a rank sends and receives: drawn as the per-token dispatch counts them", "[stats][sim]") {
    // Uniform top-8 of 256 experts, dedup dispatch, 8 GPUs per node. Truth: each token's 8 distinct experts drawn,
    // its rows counted per (home rank, remote rank) as a2a_traffic counts them; the sim's time reads the largest
    // entry of each kind (scale-up out/in, network out/in), so those maxima are compared, over 1500 layers each.
    ModelConfig model;
    model.moe.num_experts = 256;
    model.moe.top_k = 8;
    const int64_t E = 256, k = 8, node = 8, reps = 1500;
    for (const auto& [ep, T] : std::vector<std::pair<int64_t, int64_t>>{{8, 64}, {64, 64}, {64, 2000}, {16, 300}}) {
        INFO("ep " << ep << " tokens " << T);
        StepShape shape;
        shape.batch = T;
        const ExpertPlacement pl = contiguous_placement(E, ep);
        Layout layout;  // --ep N: attention DP N, experts EP N, dedup dispatch
        layout.attn_dp = ep;
        layout.moe_ep = ep;
        const SimStatisticalRouting draws(model, shape, layout, node, {}, 42);
        std::map<std::string, std::vector<double>> drawn, counted;
        const auto largest = [](const std::vector<double>& v) {
            return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
        };
        for (int64_t i = 0; i < reps; ++i) {
            const SimLayerRouting r = draws.draw(i, {}, pl);
            drawn["intra_out"].push_back(largest(r.dispatch_rows.intra_out));
            drawn["intra_in"].push_back(largest(r.dispatch_rows.intra_in));
            drawn["inter_out"].push_back(largest(r.dispatch_rows.inter_out));
            drawn["inter_in"].push_back(largest(r.dispatch_rows.inter_in));
            drawn["cross"].push_back(r.cross_rank_rows);
        }
        Rng rng(9);
        LayerRouting routing;
        routing.num_tokens = T;
        routing.k = k;
        for (int64_t i = 0; i < reps; ++i) {
            routing.ids.clear();
            for (int64_t t = 0; t < T; ++t) {
                const size_t first = routing.ids.size();
                while (routing.ids.size() - first < static_cast<size_t>(k)) {
                    const auto e = static_cast<int32_t>(rng.below(E));
                    if (std::find(routing.ids.begin() + static_cast<std::ptrdiff_t>(first), routing.ids.end(), e) ==
                        routing.ids.end())
                        routing.ids.push_back(e);
                }
            }
            const A2aTraffic t = a2a_traffic(shape, routing, 1.0, pl, true);
            const A2aLinkBytes l = a2a_link_bytes(t, node);
            counted["intra_out"].push_back(largest(l.intra_out));
            counted["intra_in"].push_back(largest(l.intra_in));
            counted["inter_out"].push_back(largest(l.inter_out));
            counted["inter_in"].push_back(largest(l.inter_in));
            counted["cross"].push_back(t.total());
        }
        for (const auto& [kind, v] : counted) {
            const Moments a = moments(v), b = moments(drawn.at(kind));
            INFO(kind << ": counted " << a.mean << " (se " << a.se() << "), drawn " << b.mean << " (se " << b.se()
                      << ")");
            CHECK(std::abs(b.mean - a.mean) <= 4 * std::sqrt(a.var / a.n + b.var / b.n) + 0.005 * a.mean + 1e-9);
        }
    }
}

namespace {

const std::vector<const char*> kMoePhases = {"permute",     "dispatch_a2a", "expert_up",       "activation",
                                             "expert_down", "combine_a2a",  "unpermute_reduce"};

struct PathSamples {
    std::map<std::string, std::vector<double>> phase_us;  // per (seed, layer): the layer's mean over its steps
    std::map<std::string, std::vector<double>> bytes;     // per seed: the roofline's counted bytes of the step
    std::vector<double> step_us;                          // per seed
};

json run_sim(const std::string& routing, int64_t batch, int64_t ep, const std::string& path, uint64_t seed) {
    RunConfig cfg = run_config_from_json(json{{"backend", "sim"},
                                              {"hardware", "h200-sxm"},
                                              {"model", "deepseek-v3"},
                                              {"dtype", "fp8"},
                                              {"allow_no_fit", true},
                                              {"first_layer", 3},
                                              {"layers", 6},
                                              {"batch", batch},
                                              {"ep", ep},
                                              {"routing", routing},
                                              {"routing_path", path},
                                              {"seed", seed},
                                              {"warmup", 0},
                                              {"iters", 2}},
                                         "");
    return run_point(cfg);
}

PathSamples samples(const std::string& routing, int64_t batch, int64_t ep, const std::string& path, int seeds) {
    PathSamples s;
    for (int seed = 1; seed <= seeds; ++seed) {
        const json r = run_sim(routing, batch, ep, path, static_cast<uint64_t>(seed));
        REQUIRE(r["routing"]["path"] == path);
        for (const json& layer : r["latency"]["per_layer"])
            for (const char* ph : kMoePhases) s.phase_us[ph].push_back(layer["phases"][ph]["mean_us"].get<double>());
        for (const char* ph : {"dispatch_a2a", "expert_up", "expert_down"})
            s.bytes[ph].push_back(r["roofline"]["phases"][ph]["bytes"].get<double>());
        s.step_us.push_back(r["latency"]["step"]["mean_us"].get<double>());
    }
    return s;
}

// Agreement of two sample sets' means: within 4 standard errors of their difference (what sampling noise allows:
// about 1 in 16000 per comparison for normal means) plus 0.5% of the per-token mean, the bias the stated
// approximations may carry (the sum's correction, the conditional-Poisson law for unequal shares, the law of the
// rows a rank sends). With 20 seeds per config the largest significant difference (|z| > 2) seen was 0.33%
// (dispatch, hot, batch 1, EP 64); treating the rows a rank sends to different ranks as independent (no pair term)
// made dispatch 1.4% slow at batch 2000, EP 64, which this fails.
void check_agree(const std::string& what, const std::vector<double>& per_token,
                 const std::vector<double>& statistical) {
    const Moments a = moments(per_token), b = moments(statistical);
    const double allowed = 4 * std::sqrt(a.var / a.n + b.var / b.n) + 0.005 * a.mean + 1e-9;
    INFO(what << ": per token " << a.mean << " (se " << a.se() << "), statistical " << b.mean << " (se " << b.se()
              << "), allowed difference " << allowed);
    CHECK(std::abs(b.mean - a.mean) <= allowed);
}

}  // namespace

TEST_CASE("the statistical path models the per-token path's phase times and bytes within sampling noise",
          "[stats][sim][slow]") {
    // DeepSeek-V3 (256 experts, top-8), its first 6 MoE layers, batch 1, 64 and 2000 at EP 8 and 64, the sim's own
    // uniform router, zipf 1.2 and 4 hot experts every token picks; 8 seeds: 48 layer samples per phase and path.
    const int seeds = 8;
    for (const char* routing : {"router", "zipf:1.2", "hot:4:0.5"})
        for (int64_t batch : {1, 64, 2000})
            for (int64_t ep : {8, 64}) {
                DYNAMIC_SECTION(routing << " batch " << batch << " ep " << ep) {
                    const PathSamples tok = samples(routing, batch, ep, "per-token", seeds);
                    const PathSamples st = samples(routing, batch, ep, "statistical", seeds);
                    for (const char* ph : kMoePhases) check_agree(ph, tok.phase_us.at(ph), st.phase_us.at(ph));
                    for (const auto& [ph, v] : tok.bytes) check_agree(std::string(ph) + " bytes", v, st.bytes.at(ph));
                    check_agree("step", tok.step_us, st.step_us);
                }
            }
}

TEST_CASE("the statistical path is taken where the run allows it, and refused by name where it does not",
          "[stats][sim]") {
    auto point = [](json fields) {
        json base = {{"backend", "sim"},
                     {"hardware", "h200-sxm"},
                     {"model", "mixtral-8x7b"},
                     {"layers", 2},
                     {"batch", 16},
                     {"warmup", 0},
                     {"iters", 2}};
        for (auto& [k, v] : fields.items()) base[k] = v;
        return run_point(run_config_from_json(base, ""));
    };
    // Taken: the sim's own router, and each workload whose tokens route independently.
    for (const char* routing : {"router", "uniform", "zipf:1.2", "powerlaw:0.8", "hot:2:0.4", "imbalance:2"}) {
        INFO(routing);
        const json r = point({{"routing", routing}, {"ep", 4}});
        CHECK(r["routing"]["path"] == "statistical");
        CHECK(r["backend_info"]["routing_path"] == "statistical");
        CHECK(r["expert_load"]["source"] == "modeled");
        CHECK(r["routing"]["per_layer"].empty());  // switch rates need ids
        for (const json& l : r["expert_load"]["per_layer"]) {
            CHECK(l["num_assignments"] == 2 * 16 * 2);  // 2 steps x 16 tokens x top-2: no drops
            CHECK_FALSE(l.contains("coactivation"));
        }
    }
    // Not taken, with the reason: position-dependent workloads, drops, replicas, asked for.
    const std::vector<std::pair<json, std::string>> per_token = {
        {{{"routing", "balanced"}}, "place in the stream"},
        {{{"routing", "domains:4:0.1"}}, "place in the stream"},
        {{{"capacity_factor", 1.0}}, "capacity factor"},
        {{{"routing", "zipf:1.2"}, {"ep", 4}, {"redundant_experts", 4}}, "replicas"},
        {{{"routing_path", "per-token"}}, "asked for"},
        // zipf:1.2 over 8 experts: the two least used take 0.035 and 0.041 of the routing, pruned below 0.05.
        {{{"routing", "zipf:1.2"}, {"ep", 4}, {"prune_below", 0.05}}, "prune_below"},
    };
    for (const auto& [fields, why] : per_token) {
        INFO(fields.dump());
        const json r = point(fields);
        CHECK(r["routing"]["path"] == "per-token");
        CHECK_THAT(r["routing"]["path_reason"].get<std::string>(), Catch::Contains(why));
        CHECK(r["backend_info"]["routing_path"] == "per-token");
        CHECK(r["expert_load"]["source"] == "counted");
    }
    // The cpu backend routes every token; asking it (or the sim with a stream-dependent workload) for the
    // statistical path is refused naming the field and the reason.
    CHECK_THROWS_WITH(point({{"backend", "cpu"}, {"routing_path", "statistical"}}),
                      Catch::Contains("routing_path") && Catch::Contains("cpu backend routes every token"));
    CHECK_THROWS_WITH(point({{"routing", "balanced"}, {"routing_path", "statistical"}}),
                      Catch::Contains("routing_path") && Catch::Contains("place in the stream"));
    CHECK_THROWS_WITH(point({{"routing", "zipf:1.2"}, {"prune_below", 0.05}, {"routing_path", "statistical"}}),
                      Catch::Contains("routing_path") && Catch::Contains("prune_below") &&
                          Catch::Contains("a kept expert the token has not chosen"));
    CHECK_THROWS_AS(point({{"routing_path", "sometimes"}}), ConfigError);
}

TEST_CASE("a statistical point costs the same whatever the batch", "[stats][sim]") {
    // Per token, 2^24 tokens x 56 MoE layers of ids would take 3 GiB and minutes; drawn, the same as batch 1.
    auto seconds = [](int64_t batch) {
        const auto t0 = std::chrono::steady_clock::now();
        const json r = run_sim("router", batch, 8, "statistical", 1);
        CHECK(r["routing"]["path"] == "statistical");
        CHECK(r["expert_load"]["per_layer"][0]["num_assignments"] == 2 * batch * 8);
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    const double small = seconds(1), big = seconds(int64_t{1} << 24);
    INFO("batch 1: " << small << " s, batch 2^24: " << big << " s");
    CHECK(big < 10 * small + 0.5);
}
