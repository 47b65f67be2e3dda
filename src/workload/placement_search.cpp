// SPDX-License-Identifier: Apache-2.0
#include "workload/placement_search.hpp"

#include "common/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace moebench {

PlacementScore score_placement(const RoutingTrace& trace, const ExpertPlacement& placement, int64_t batch) {
    PlacementScore s;
    const int64_t N = placement.num_ranks, k = trace.top_k;
    s.steps = batch > 0 ? trace.num_tokens / batch : 0;
    if (s.steps == 0) return s;
    double dedup = 0, per_expert = 0, max_over_mean = 0;
    int64_t loaded = 0;
    std::vector<double> load(static_cast<size_t>(N));
    std::vector<char> needs(static_cast<size_t>(N));
    for (int64_t l = 0; l < trace.num_layers; ++l) {
        const int32_t* ids = trace.layer_ids(l);
        for (int64_t st = 0; st < s.steps; ++st) {
            std::fill(load.begin(), load.end(), 0.0);
            for (int64_t i = 0; i < batch; ++i) {  // token i of the step: sequence i (decode), on rank i N / batch
                const int64_t home = i * N / batch;
                const int64_t src = trace_token_at(trace, st * batch + i, batch);  // the run's token order
                std::fill(needs.begin(), needs.end(), 0);
                for (int64_t j = 0; j < k; ++j) {
                    const int32_t e = ids[src * k + j];
                    if (e < 0) continue;
                    const int64_t d = placement.dest_rank(e, home, i);
                    load[static_cast<size_t>(d)] += 1;
                    needs[static_cast<size_t>(d)] = 1;
                    per_expert += d != home;
                }
                for (int64_t r = 0; r < N; ++r) dedup += r != home && needs[static_cast<size_t>(r)];
            }
            const double total = std::accumulate(load.begin(), load.end(), 0.0);
            if (total > 0) {
                max_over_mean += *std::max_element(load.begin(), load.end()) / (total / static_cast<double>(N));
                ++loaded;
            }
        }
    }
    s.dedup_remote_rows_per_step = dedup / static_cast<double>(s.steps);
    s.per_expert_remote_rows_per_step = per_expert / static_cast<double>(s.steps);
    s.max_over_mean_rank_load = loaded > 0 ? max_over_mean / static_cast<double>(loaded) : 0.0;
    return s;
}

namespace {

// Co-activation (tokens selecting both) and load (assignments) per expert, over every layer of the trace.
struct TraceStats {
    int64_t E = 0;
    std::vector<double> co;    // [E, E]
    std::vector<double> load;  // [E]
    double at(int64_t a, int64_t b) const { return co[static_cast<size_t>(a * E + b)]; }
};

TraceStats trace_stats(const RoutingTrace& t) {
    TraceStats s;
    s.E = t.num_experts;
    s.co.assign(static_cast<size_t>(s.E * s.E), 0.0);
    s.load.assign(static_cast<size_t>(s.E), 0.0);
    const int64_t k = t.top_k;
    for (int64_t l = 0; l < t.num_layers; ++l) {
        const int32_t* ids = t.layer_ids(l);
        for (int64_t tok = 0; tok < t.num_tokens; ++tok) {
            const int32_t* row = ids + tok * k;
            for (int64_t a = 0; a < k; ++a) {
                if (row[a] < 0) continue;
                s.load[static_cast<size_t>(row[a])] += 1;
                for (int64_t b = 0; b < k; ++b)
                    if (b != a && row[b] >= 0) s.co[static_cast<size_t>(row[a] * s.E + row[b])] += 1;
            }
        }
    }
    return s;
}

// Pairwise swaps from the contiguous start: first those that put co-selected experts together without raising
// the heavier of the two ranks above contiguous's heaviest, then those that lower the heavier rank's load without
// losing co-location.
std::vector<int64_t> swap_search(const TraceStats& s, int64_t N) {
    const int64_t E = s.E, per = E / N;
    std::vector<int64_t> rank_of(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) rank_of[static_cast<size_t>(e)] = e / per;
    std::vector<double> aff(static_cast<size_t>(E * N), 0.0), L(static_cast<size_t>(N), 0.0);
    for (int64_t e = 0; e < E; ++e) {
        L[static_cast<size_t>(rank_of[static_cast<size_t>(e)])] += s.load[static_cast<size_t>(e)];
        for (int64_t f = 0; f < E; ++f)
            if (f != e) aff[static_cast<size_t>(e * N + rank_of[static_cast<size_t>(f)])] += s.at(e, f);
    }
    const double cap = *std::max_element(L.begin(), L.end());  // never heavier than contiguous's heaviest rank
    for (int phase = 0; phase < 2; ++phase)
        for (int pass = 0; pass < 100; ++pass) {
            bool improved = false;
            for (int64_t e = 0; e < E; ++e)
                for (int64_t f = e + 1; f < E; ++f) {
                    const int64_t a = rank_of[static_cast<size_t>(e)], b = rank_of[static_cast<size_t>(f)];
                    if (a == b) continue;
                    const double cef = s.at(e, f);
                    const double gain = (aff[static_cast<size_t>(e * N + b)] - cef) - aff[static_cast<size_t>(e * N + a)] +
                                        (aff[static_cast<size_t>(f * N + a)] - cef) - aff[static_cast<size_t>(f * N + b)];
                    const double le = s.load[static_cast<size_t>(e)], lf = s.load[static_cast<size_t>(f)];
                    const double la = L[static_cast<size_t>(a)] - le + lf, lb = L[static_cast<size_t>(b)] - lf + le;
                    const double before = std::max(L[static_cast<size_t>(a)], L[static_cast<size_t>(b)]);
                    const double after = std::max(la, lb);
                    const bool take = phase == 0 ? gain > 1e-9 && (after <= cap || after <= before)
                                                 : gain >= 0 && after < before - 1e-9;
                    if (!take) continue;
                    for (int64_t x = 0; x < E; ++x) {
                        aff[static_cast<size_t>(x * N + a)] += (x != f ? s.at(x, f) : 0) - (x != e ? s.at(x, e) : 0);
                        aff[static_cast<size_t>(x * N + b)] += (x != e ? s.at(x, e) : 0) - (x != f ? s.at(x, f) : 0);
                    }
                    rank_of[static_cast<size_t>(e)] = b;
                    rank_of[static_cast<size_t>(f)] = a;
                    L[static_cast<size_t>(a)] = la;
                    L[static_cast<size_t>(b)] = lb;
                    improved = true;
                }
            if (!improved) break;
        }
    return rank_of;
}

// Assignments of each expert from the tokens each rank holds, replaying the trace as the run does (decode steps of
// `batch` tokens in trace_token_at's order, token i of a step on rank i N / batch): [rank * E + expert].
std::vector<double> home_loads(const RoutingTrace& trace, int64_t N, int64_t batch) {
    const int64_t E = trace.num_experts, k = trace.top_k, steps = trace.num_tokens / batch;
    std::vector<double> h(static_cast<size_t>(N * E), 0.0);
    for (int64_t l = 0; l < trace.num_layers; ++l) {
        const int32_t* ids = trace.layer_ids(l);
        for (int64_t st = 0; st < steps; ++st)
            for (int64_t i = 0; i < batch; ++i) {
                const int64_t src = trace_token_at(trace, st * batch + i, batch), home = i * N / batch;
                for (int64_t j = 0; j < k; ++j)
                    if (ids[src * k + j] >= 0) h[static_cast<size_t>(home * E + ids[src * k + j])] += 1;
            }
    }
    return h;
}

// Adds to L the load expert e puts on each rank under the run's replica rule, summed over the replay: its tokens from
// a rank that holds it stay there; the rest spread evenly over its replicas `hs`. sign -1 takes it away.
void add_expert_load(std::vector<double>& L, const std::vector<double>& home, int64_t E, int64_t e,
                     const std::vector<int64_t>& hs, double sign) {
    const auto N = static_cast<int64_t>(L.size());
    double away = 0;
    for (int64_t r = 0; r < N; ++r) {
        const double from_r = home[static_cast<size_t>(r * E + e)];
        if (std::find(hs.begin(), hs.end(), r) != hs.end()) L[static_cast<size_t>(r)] += sign * from_r;
        else away += from_r;
    }
    for (int64_t r : hs) L[static_cast<size_t>(r)] += sign * away / static_cast<double>(hs.size());
}

// The placement of `rank_of` plus `replicas` copies, one at a time. by_load_per_copy: the expert with the most load
// per copy, on the least-loaded rank with room; else the (expert, rank with room) that leaves the heaviest rank
// lightest under the run's replica rule (ties: the smaller sum of squared rank loads).
ExpertPlacement with_replicas(const std::vector<double>& home, const std::vector<int64_t>& rank_of, int64_t E,
                              int64_t N, int64_t replicas, bool by_load_per_copy) {
    std::vector<std::vector<int64_t>> holders(static_cast<size_t>(E));
    std::vector<int64_t> held(static_cast<size_t>(N), 0);
    std::vector<double> load(static_cast<size_t>(E), 0.0), L(static_cast<size_t>(N), 0.0);
    for (int64_t e = 0; e < E; ++e) {
        holders[static_cast<size_t>(e)].push_back(rank_of[static_cast<size_t>(e)]);
        ++held[static_cast<size_t>(rank_of[static_cast<size_t>(e)])];
        for (int64_t h = 0; h < N; ++h) load[static_cast<size_t>(e)] += home[static_cast<size_t>(h * E + e)];
        add_expert_load(L, home, E, e, holders[static_cast<size_t>(e)], 1.0);
    }
    const int64_t slots = (E + replicas) / N;
    for (int64_t n = 0; n < replicas; ++n) {
        int64_t best_e = -1, best_r = -1;
        double best_key = 0, best_tie = 0;
        for (int64_t e = 0; e < E; ++e) {
            auto& hs = holders[static_cast<size_t>(e)];
            for (int64_t r = 0; r < N; ++r) {
                if (held[static_cast<size_t>(r)] >= slots || std::find(hs.begin(), hs.end(), r) != hs.end()) continue;
                double key = 0, tie = 0;  // smaller is better
                if (by_load_per_copy) {
                    key = -load[static_cast<size_t>(e)] / static_cast<double>(hs.size());
                    tie = L[static_cast<size_t>(r)];
                } else {
                    std::vector<double> after = L;
                    add_expert_load(after, home, E, e, hs, -1.0);
                    hs.push_back(r);
                    add_expert_load(after, home, E, e, hs, 1.0);
                    hs.pop_back();
                    key = *std::max_element(after.begin(), after.end());
                    for (double x : after) tie += x * x;
                }
                if (best_e < 0 || key < best_key - 1e-9 || (key <= best_key + 1e-9 && tie < best_tie - 1e-9))
                    best_e = e, best_r = r, best_key = key, best_tie = tie;
            }
        }
        MOEBENCH_CHECK(best_e >= 0, "placement: no rank has room for replica {} of {}", n, replicas);
        auto& hs = holders[static_cast<size_t>(best_e)];
        add_expert_load(L, home, E, best_e, hs, -1.0);
        hs.push_back(best_r);
        add_expert_load(L, home, E, best_e, hs, 1.0);
        ++held[static_cast<size_t>(best_r)];
    }
    ExpertPlacement p;
    p.num_experts = E;
    p.num_ranks = N;
    p.experts_on_rank.assign(static_cast<size_t>(N), {});
    for (int64_t e = 0; e < E; ++e)
        for (int64_t r : holders[static_cast<size_t>(e)])
            p.experts_on_rank[static_cast<size_t>(r)].push_back(static_cast<int32_t>(e));
    for (auto& on_rank : p.experts_on_rank) std::sort(on_rank.begin(), on_rank.end());
    p = placement_from_json(placement_to_json(p), E, N, "moebench place");  // indexes the replicas, checks the result
    p.source = "moebench place";
    return p;
}

}  // namespace

PlacementSearch search_placement(const RoutingTrace& trace, int64_t num_ranks, int64_t replicas, int64_t batch) {
    const int64_t E = trace.num_experts, N = num_ranks;
    if (N < 1 || E % N != 0)
        config_error("--ep", fmt::format("must divide the trace's {} experts", E), std::to_string(N),
                     "use a divisor of the expert count");
    if (replicas < 0 || replicas % N != 0)
        config_error("--replicas", fmt::format("must be a multiple of --ep {} (every rank holds as many experts)", N),
                     std::to_string(replicas), fmt::format("use 0, {}, {} ...", N, 2 * N));
    if (replicas > E * (N - 1))
        config_error("--replicas", fmt::format("exceeds a copy of every expert on every rank ({})", E * (N - 1)),
                     std::to_string(replicas), "use fewer replicas");
    if (batch < N)
        config_error("--batch", fmt::format("gives some of the {} ranks no sequence", N), std::to_string(batch),
                     fmt::format("use --batch {} or more", N));
    PlacementSearch out;
    const ExpertPlacement contiguous = contiguous_placement(E, N);
    out.contiguous = score_placement(trace, contiguous, batch);
    const TraceStats s = trace_stats(trace);
    // Four candidates: the swap search's co-location or contiguous blocks, each with replicas by load per copy or
    // by the heaviest rank's load. Their load models sum over the trace, while the run balances step by step, so the
    // replay (score_placement, the run's own rules) decides: the fewest dedup rows among the candidates no worse
    // balanced than contiguous (max/mean within 2%), else the best balanced.
    std::vector<int64_t> blocks(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) blocks[static_cast<size_t>(e)] = e / (E / N);
    const std::vector<double> home = home_loads(trace, N, batch);
    bool have = false;
    const std::vector<int64_t> swapped = swap_search(s, N);
    for (int c = 0; c < 4; ++c) {
        ExpertPlacement p = with_replicas(home, c < 2 ? swapped : blocks, E, N, replicas, c % 2 == 0);
        const PlacementScore score = score_placement(trace, p, batch);
        const double bound = out.contiguous.max_over_mean_rank_load * 1.02;
        const PlacementScore& best = out.chosen;
        const bool ok = score.max_over_mean_rank_load <= bound, best_ok = best.max_over_mean_rank_load <= bound;
        const bool better = !have || (ok && !best_ok) ||
                            (ok == best_ok && (ok ? score.dedup_remote_rows_per_step < best.dedup_remote_rows_per_step
                                                  : score.max_over_mean_rank_load < best.max_over_mean_rank_load));
        if (better) {
            out.placement = std::move(p);
            out.chosen = score;
            have = true;
        }
    }
    return out;
}

}  // namespace moebench
