// SPDX-License-Identifier: Apache-2.0
// The placement search of `moebench place`. The trace is replayed once into rows (layer, step, row of the step: its
// home rank and its experts, as score_placement walks them). A local search then swaps experts between ranks, each
// swap's change in dedup remote rows computed from the rows of the two experts only (no replay per candidate), from
// two starts: contiguous blocks and a balanced clustering of the co-activation graph. Replicas follow by two rules;
// the exact replay of each candidate chooses.
#include "workload/placement_search.hpp"

#include "common/error.hpp"
#include "common/flag_names.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace moebench {

namespace {

// Distinct values among v[0, n) other than `skip`.
int64_t distinct_other_than(const int32_t* v, int64_t n, int32_t skip) {
    int64_t c = 0;
    for (int64_t i = 0; i < n; ++i) {
        if (v[i] == skip) continue;
        bool seen = false;
        for (int64_t j = 0; j < i && !seen; ++j) seen = v[j] == v[i];
        c += !seen;
    }
    return c;
}

}  // namespace

PlacementScore score_placement(const RoutingTrace& trace, const ExpertPlacement& placement, int64_t batch) {
    PlacementScore s;
    const int64_t N = placement.num_ranks, k = trace.top_k;
    s.steps = batch > 0 ? trace.num_tokens / batch : 0;
    if (s.steps == 0) return s;
    double dedup = 0, per_expert = 0, max_over_mean = 0;
    int64_t loaded = 0;
    std::vector<double> load(static_cast<size_t>(N), 0.0);
    std::vector<int32_t> dest(static_cast<size_t>(k)), touched;  // a row's destination ranks; ranks loaded this step
    for (int64_t l = 0; l < trace.num_layers; ++l) {
        const int32_t* ids = trace.layer_ids(l);
        for (int64_t st = 0; st < s.steps; ++st) {
            touched.clear();
            for (int64_t i = 0; i < batch; ++i) {  // token i of the step: sequence i (decode), on rank i N / batch
                const int64_t home = i * N / batch;
                const int64_t src = trace_token_at(trace, st * batch + i, batch);  // the run's token order
                int64_t n = 0;
                for (int64_t j = 0; j < k; ++j) {
                    const int32_t e = ids[src * k + j];
                    if (e < 0) continue;
                    const auto d = static_cast<int32_t>(placement.dest_rank(e, home, i));
                    if (load[static_cast<size_t>(d)] == 0) touched.push_back(d);
                    load[static_cast<size_t>(d)] += 1;
                    dest[static_cast<size_t>(n++)] = d;
                    per_expert += d != home;
                }
                dedup += static_cast<double>(distinct_other_than(dest.data(), n, static_cast<int32_t>(home)));
            }
            double total = 0, most = 0;
            for (int32_t r : touched) {
                double& x = load[static_cast<size_t>(r)];
                total += x;
                most = std::max(most, x);
                x = 0;
            }
            if (total > 0) {
                max_over_mean += most / (total / static_cast<double>(N));
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

constexpr int64_t kMaxSweeps = 12;        // local-search passes over the experts per start (most stop within ten)
constexpr int64_t kTargets = 4;           // ranks tried per expert and pass: its best single moves, and the lightest
constexpr int64_t kExactChecks = 3;       // swaps per expert confirmed exactly, best estimated first
constexpr double kSearchPairs = 1 << 24;  // the search's sample of the replay: rows x k^2

// The rows of the replay, one per (layer, step, row of the step) as score_placement walks them, of every `stride`-th
// (layer, step): where the row's k ids start in the trace and its home rank; and per expert the rows that select it.
struct Replay {
    int64_t E = 0, N = 0, k = 0;
    const int32_t* all_ids = nullptr;
    std::vector<int64_t> at;     // [rows]: offset of the row's ids in trace.topk_ids
    std::vector<int32_t> home;   // [rows]
    std::vector<int64_t> first;  // [E + 1]: the rows selecting expert e are of_expert[first[e], first[e + 1])
    std::vector<int32_t> of_expert;
    std::vector<double> load;  // [E]: rows selecting each expert
    std::vector<double>
        home_load;  // [N * E] (for replicas only): rows selecting e whose home is rank r, at [r * E + e]

    int64_t rows() const { return static_cast<int64_t>(at.size()); }
    const int32_t* ids(int64_t row) const { return all_ids + at[static_cast<size_t>(row)]; }
    const int32_t* rows_begin(int64_t e) const { return of_expert.data() + first[static_cast<size_t>(e)]; }
    const int32_t* rows_end(int64_t e) const { return of_expert.data() + first[static_cast<size_t>(e) + 1]; }
};

Replay replay_rows(const RoutingTrace& t, int64_t N, int64_t batch, int64_t stride, bool home_loads) {
    Replay r;
    r.E = t.num_experts;
    r.N = N;
    r.k = t.top_k;
    r.all_ids = t.topk_ids.data();
    const int64_t steps = batch > 0 ? t.num_tokens / batch : 0, E = r.E, k = r.k;
    r.at.reserve(static_cast<size_t>((t.num_layers * steps + stride - 1) / stride * batch));
    r.home.reserve(r.at.capacity());
    r.first.assign(static_cast<size_t>(E + 1), 0);
    if (home_loads) r.home_load.assign(static_cast<size_t>(N * E), 0.0);
    for (int64_t l = 0; l < t.num_layers; ++l)
        for (int64_t st = 0; st < steps; ++st)
            for (int64_t i = 0; (l * steps + st) % stride == 0 && i < batch; ++i) {
                const int64_t src = trace_token_at(t, st * batch + i, batch), home = i * N / batch;
                const int64_t at = (l * t.num_tokens + src) * k;
                r.at.push_back(at);
                r.home.push_back(static_cast<int32_t>(home));
                for (int64_t j = 0; j < k; ++j) {
                    const int32_t e = r.all_ids[at + j];
                    if (e < 0) continue;
                    ++r.first[static_cast<size_t>(e) + 1];
                    if (home_loads) r.home_load[static_cast<size_t>(home * E + e)] += 1;
                }
            }
    r.load.resize(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) {
        r.load[static_cast<size_t>(e)] = static_cast<double>(r.first[static_cast<size_t>(e) + 1]);
        r.first[static_cast<size_t>(e) + 1] += r.first[static_cast<size_t>(e)];
    }
    r.of_expert.resize(static_cast<size_t>(r.first.back()));
    std::vector<int64_t> fill(r.first.begin(), r.first.end() - 1);
    for (int64_t row = 0; row < r.rows(); ++row)
        for (int64_t j = 0; j < k; ++j) {
            const int32_t e = r.ids(row)[j];
            if (e >= 0) r.of_expert[static_cast<size_t>(fill[static_cast<size_t>(e)]++)] = static_cast<int32_t>(row);
        }
    return r;
}

// One copy of every expert, the same number on every rank, and the replay's dedup remote rows under it, kept current
// through moves. Moving expert x alone to rank c changes the rows by gain(x, c) = W[x] - A[x] - P[x][c]: W[x] counts
// the rows selecting x; A[x] those where x is the row's only expert on its rank and that rank is not the row's home
// (moving x saves the row); P[x][c] those where c is the home or holds another of the row's experts (moving x there
// costs nothing). A move updates A and P over the moved expert's rows only.
class Partition {
public:
    Partition(const Replay& rp, std::vector<int32_t> rank_of, bool by_home)
        : rp_(rp),
          by_home_(by_home),
          E_(rp.E),
          N_(rp.N),
          rank_of_(std::move(rank_of)),
          A_(static_cast<size_t>(E_), 0.0),
          P_(static_cast<size_t>(E_ * N_), 0.0),
          L_(static_cast<size_t>(N_), 0.0),
          on_rank_(static_cast<size_t>(N_)),
          ex_(static_cast<size_t>(rp.k)),
          rk_(static_cast<size_t>(rp.k)),
          ranks_(static_cast<size_t>(rp.k)),
          counts_(static_cast<size_t>(rp.k)) {
        for (int64_t e = 0; e < E_; ++e) {
            const int32_t r = rank_of_[static_cast<size_t>(e)];
            on_rank_[static_cast<size_t>(r)].push_back(static_cast<int32_t>(e));
            L_[static_cast<size_t>(r)] += rp_.load[static_cast<size_t>(e)];
        }
        for (int64_t row = 0; row < rp_.rows(); ++row) account(row, 1.0);
    }

    double rows() const { return rows_; }
    const std::vector<int32_t>& rank_of() const { return rank_of_; }
    double heaviest() const { return *std::max_element(L_.begin(), L_.end()); }

    double gain(int64_t x, int64_t c) const {
        return rp_.load[static_cast<size_t>(x)] - A_[static_cast<size_t>(x)] - P_[static_cast<size_t>(x * N_ + c)];
    }

    // The exact change in rows if e and f (on different ranks) trade places: the two single moves, corrected on the
    // rows that select both (each single move assumed the other expert stayed).
    double swap_delta(int32_t e, int32_t f) {
        const int32_t a = rank_of_[static_cast<size_t>(e)], b = rank_of_[static_cast<size_t>(f)];
        double d = gain(e, b) + gain(f, a);
        const bool e_shorter = rp_.rows_end(e) - rp_.rows_begin(e) <= rp_.rows_end(f) - rp_.rows_begin(f);
        const int32_t by = e_shorter ? e : f, other = e_shorter ? f : e;
        for (const int32_t* row = rp_.rows_begin(by); row != rp_.rows_end(by); ++row) {
            const int32_t* ids = rp_.ids(*row);
            if (std::find(ids, ids + rp_.k, other) == ids + rp_.k) continue;
            d += cost(*row, e, b, f, a) - cost(*row, e, b, -1, 0) - cost(*row, f, a, -1, 0) + cost(*row, -1, 0, -1, 0);
        }
        return d;
    }

    void move(int32_t x, int32_t c) {
        const int32_t a = rank_of_[static_cast<size_t>(x)];
        for (const int32_t* row = rp_.rows_begin(x); row != rp_.rows_end(x); ++row) account(*row, -1.0);
        rank_of_[static_cast<size_t>(x)] = c;
        for (const int32_t* row = rp_.rows_begin(x); row != rp_.rows_end(x); ++row) account(*row, 1.0);
        auto& from = on_rank_[static_cast<size_t>(a)];
        from.erase(std::find(from.begin(), from.end(), x));
        on_rank_[static_cast<size_t>(c)].push_back(x);
        L_[static_cast<size_t>(a)] -= rp_.load[static_cast<size_t>(x)];
        L_[static_cast<size_t>(c)] += rp_.load[static_cast<size_t>(x)];
    }

    // One pass over the experts. For each, swaps with the experts of its best single-move targets and of the lightest
    // ranks, best estimate first, confirmed exactly; taken when the rows fall and the heavier of the two ranks stays
    // within max(cap, its load before) (`cap`: contiguous placement's heaviest rank), or when the rows do not rise and
    // the heavier rank gets lighter. (rows, sum of squared rank loads) falls with every swap: no cycles.
    int64_t sweep(double cap, int64_t& evaluated) {
        int64_t taken = 0;
        const int64_t T = std::min<int64_t>(kTargets, N_ - 1);
        if (T < 1) return 0;  // one rank: nothing to trade
        std::vector<int32_t> by_gain(static_cast<size_t>(N_)), by_load(static_cast<size_t>(N_)), targets;
        struct Candidate {
            int32_t f;
            double estimate, after;
            bool fall_only;  // only a swap that lowers the rows is allowed (it does not lower the heavier rank)
        };
        std::vector<Candidate> cands;
        for (int32_t e = 0; e < E_; ++e) {
            const int32_t a = rank_of_[static_cast<size_t>(e)];
            std::iota(by_gain.begin(), by_gain.end(), 0);
            by_load = by_gain;
            const auto gain_less = [&](int32_t x, int32_t y) {
                const double gx = x == a ? 1e300 : gain(e, x), gy = y == a ? 1e300 : gain(e, y);
                return gx < gy || (gx == gy && x < y);
            };
            const auto load_less = [&](int32_t x, int32_t y) {
                const double lx = x == a ? 1e300 : L_[static_cast<size_t>(x)];
                const double ly = y == a ? 1e300 : L_[static_cast<size_t>(y)];
                return lx < ly || (lx == ly && x < y);
            };
            std::nth_element(by_gain.begin(), by_gain.begin() + T - 1, by_gain.end(), gain_less);
            std::nth_element(by_load.begin(), by_load.begin() + T - 1, by_load.end(), load_less);
            targets.assign(by_gain.begin(), by_gain.begin() + T);
            for (int64_t i = 0; i < T; ++i)
                if (std::find(targets.begin(), targets.end(), by_load[static_cast<size_t>(i)]) == targets.end())
                    targets.push_back(by_load[static_cast<size_t>(i)]);
            cands.clear();
            const double le = rp_.load[static_cast<size_t>(e)], La = L_[static_cast<size_t>(a)];
            for (int32_t b : targets) {
                const double gb = gain(e, b), Lb = L_[static_cast<size_t>(b)];
                for (int32_t f : on_rank_[static_cast<size_t>(b)]) {
                    ++evaluated;
                    const double lf = rp_.load[static_cast<size_t>(f)];
                    const double before = std::max(La, Lb), after = std::max(La - le + lf, Lb - lf + le);
                    const bool lighter = after < before - 0.5;
                    if (!lighter && after > std::max(cap, before) + 0.5) continue;
                    const double estimate = gb + gain(f, a);
                    if (estimate > 0.5 || (!lighter && estimate > -0.5)) continue;
                    cands.push_back({f, estimate, after, !lighter});
                }
            }
            const auto better = [](const Candidate& x, const Candidate& y) {
                return x.estimate < y.estimate || (x.estimate == y.estimate && x.after < y.after);
            };
            const auto n = std::min<size_t>(cands.size(), kExactChecks);
            std::partial_sort(cands.begin(), cands.begin() + static_cast<std::ptrdiff_t>(n), cands.end(), better);
            for (size_t i = 0; i < n; ++i) {
                const double d = swap_delta(e, cands[i].f);
                if (d < -0.5 || (!cands[i].fall_only && d < 0.5)) {
                    const int32_t b = rank_of_[static_cast<size_t>(cands[i].f)];
                    move(e, b);
                    move(cands[i].f, a);
                    ++taken;
                    break;
                }
            }
        }
        return taken;
    }

private:
    // Adds `sign` times row's part of the rows count, A and P.
    void account(int64_t row, double sign) {
        const int32_t* ids = rp_.ids(row);
        const int32_t h = home(row);
        int64_t n = 0, d = 0;  // experts, distinct ranks
        for (int64_t j = 0; j < rp_.k; ++j) {
            if (ids[j] < 0) continue;
            ex_[static_cast<size_t>(n)] = ids[j];
            const int32_t r = rank_of_[static_cast<size_t>(ids[j])];
            rk_[static_cast<size_t>(n++)] = r;
            int64_t i = 0;
            while (i < d && ranks_[static_cast<size_t>(i)] != r) ++i;
            if (i == d) {
                ranks_[static_cast<size_t>(d)] = r;
                counts_[static_cast<size_t>(d++)] = 0;
            }
            ++counts_[static_cast<size_t>(i)];
        }
        for (int64_t i = 0; i < d; ++i) rows_ += sign * (ranks_[static_cast<size_t>(i)] != h);
        for (int64_t x = 0; x < n; ++x) {
            const int32_t own = rk_[static_cast<size_t>(x)];
            double* p = P_.data() + static_cast<size_t>(ex_[static_cast<size_t>(x)]) * static_cast<size_t>(N_);
            if (h >= 0) p[h] += sign;
            for (int64_t i = 0; i < d; ++i) {
                const int32_t r = ranks_[static_cast<size_t>(i)];
                if (r == h) continue;
                if (r != own)
                    p[r] += sign;
                else if (counts_[static_cast<size_t>(i)] >= 2)
                    p[r] += sign;
                else
                    A_[static_cast<size_t>(ex_[static_cast<size_t>(x)])] += sign;  // alone on a rank not its home
            }
        }
    }

    // The row's remote ranks with expert e on rank eb and f on fb (e, f = -1: as placed).
    int64_t cost(int64_t row, int32_t e, int32_t eb, int32_t f, int32_t fb) {
        const int32_t* ids = rp_.ids(row);
        int64_t n = 0;
        for (int64_t j = 0; j < rp_.k; ++j) {
            if (ids[j] < 0) continue;
            rk_[static_cast<size_t>(n++)] = ids[j] == e ? eb : ids[j] == f ? fb : rank_of_[static_cast<size_t>(ids[j])];
        }
        return distinct_other_than(rk_.data(), n, home(row));
    }

    // The row's home rank, or -1 when the search counts every rank a row touches (the home left out).
    int32_t home(int64_t row) const { return by_home_ ? rp_.home[static_cast<size_t>(row)] : -1; }

    const Replay& rp_;
    bool by_home_;
    int64_t E_, N_;
    std::vector<int32_t> rank_of_;
    std::vector<double> A_, P_, L_;  // P_: [E * N]; L_: rows computed per rank
    std::vector<std::vector<int32_t>> on_rank_;
    double rows_ = 0;
    std::vector<int32_t> ex_, rk_, ranks_, counts_;  // scratch, one row's worth
};

// Co-activation (tokens selecting both; float: counts exact to 2^24, beyond that only their order matters) and load
// (assignments) per expert, over every layer and token of the trace.
struct Coactivation {
    int64_t E = 0;
    std::vector<float> co;     // [E, E]
    std::vector<double> load;  // [E]
    float at(int64_t a, int64_t b) const { return co[static_cast<size_t>(a * E + b)]; }
};

Coactivation coactivation(const RoutingTrace& t) {
    Coactivation s;
    s.E = t.num_experts;
    s.co.assign(static_cast<size_t>(s.E * s.E), 0.0f);
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
                    if (b != a && row[b] >= 0) s.co[static_cast<size_t>(row[a] * s.E + row[b])] += 1.0f;
            }
        }
    }
    return s;
}

// Pairwise swaps from contiguous blocks on the co-activation counts (the search moebench place ran before the
// row-exact one; kept as a start): first those that put co-selected experts together without raising the heavier of
// the two ranks above contiguous's heaviest, then those that lower the heavier rank's load without losing
// co-location. O(E^2) per pass, O(E) per swap taken.
std::vector<int32_t> pairwise_swaps(const Coactivation& s, int64_t N) {
    const int64_t E = s.E, per = E / N;
    std::vector<int32_t> rank_of(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) rank_of[static_cast<size_t>(e)] = static_cast<int32_t>(e / per);
    std::vector<double> aff(static_cast<size_t>(E * N), 0.0), L(static_cast<size_t>(N), 0.0);
    for (int64_t e = 0; e < E; ++e) {
        L[static_cast<size_t>(rank_of[static_cast<size_t>(e)])] += s.load[static_cast<size_t>(e)];
        for (int64_t f = 0; f < E; ++f)
            if (f != e) aff[static_cast<size_t>(e * N + rank_of[static_cast<size_t>(f)])] += s.at(e, f);
    }
    const double cap = *std::max_element(L.begin(), L.end());  // never heavier than contiguous's heaviest rank
    for (int phase = 0; phase < 2; ++phase)
        for (int64_t pass = 0; pass < kMaxSweeps; ++pass) {
            bool improved = false;
            for (int64_t e = 0; e < E; ++e)
                for (int64_t f = e + 1; f < E; ++f) {
                    const int64_t a = rank_of[static_cast<size_t>(e)], b = rank_of[static_cast<size_t>(f)];
                    if (a == b) continue;
                    const double cef = s.at(e, f);
                    const double gain =
                        (aff[static_cast<size_t>(e * N + b)] - cef) - aff[static_cast<size_t>(e * N + a)] +
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
                    rank_of[static_cast<size_t>(e)] = static_cast<int32_t>(b);
                    rank_of[static_cast<size_t>(f)] = static_cast<int32_t>(a);
                    L[static_cast<size_t>(a)] = la;
                    L[static_cast<size_t>(b)] = lb;
                    improved = true;
                }
            if (!improved) break;
        }
    return rank_of;
}

// A start from the co-activation graph: groups of experts merged greedily by their co-activation (the heaviest link
// between two groups that fit on one rank together, in experts and under `cap` in load, first), then packed onto
// ranks, largest group first, each onto the rank with room and the least load. `w` is the co-activation matrix,
// merged in place; `expert_load` and `cap` in the same unit.
std::vector<int32_t> cluster_start(std::vector<float> w, const std::vector<double>& expert_load, int64_t N,
                                   double cap) {
    const int64_t E = static_cast<int64_t>(expert_load.size()), per = E / N;
    std::vector<int64_t> size(static_cast<size_t>(E), 1);
    std::vector<double> load = expert_load;
    std::vector<char> alive(static_cast<size_t>(E), 1);
    std::vector<std::vector<int32_t>> members(static_cast<size_t>(E));
    for (int32_t e = 0; e < E; ++e) members[static_cast<size_t>(e)] = {e};
    std::vector<float> best_w(static_cast<size_t>(E), 0.0f);
    std::vector<int32_t> best(static_cast<size_t>(E), -1);
    const auto fits = [&](int64_t x, int64_t y) {
        return size[static_cast<size_t>(x)] + size[static_cast<size_t>(y)] <= per &&
               load[static_cast<size_t>(x)] + load[static_cast<size_t>(y)] <= cap + 0.5;
    };
    const auto refresh = [&](int64_t x) {
        best_w[static_cast<size_t>(x)] = 0.0f;
        best[static_cast<size_t>(x)] = -1;
        for (int64_t y = 0; y < E; ++y)
            if (y != x && alive[static_cast<size_t>(y)] &&
                w[static_cast<size_t>(x * E + y)] > best_w[static_cast<size_t>(x)] && fits(x, y)) {
                best_w[static_cast<size_t>(x)] = w[static_cast<size_t>(x * E + y)];
                best[static_cast<size_t>(x)] = static_cast<int32_t>(y);
            }
    };
    for (int64_t x = 0; x < E; ++x) refresh(x);
    for (;;) {
        int64_t c = -1;
        for (int64_t x = 0; x < E; ++x)
            if (alive[static_cast<size_t>(x)] && best[static_cast<size_t>(x)] >= 0 &&
                (c < 0 || best_w[static_cast<size_t>(x)] > best_w[static_cast<size_t>(c)]))
                c = x;
        if (c < 0) break;
        const int64_t p = best[static_cast<size_t>(c)];
        for (int64_t y = 0; y < E; ++y) {
            w[static_cast<size_t>(c * E + y)] += w[static_cast<size_t>(p * E + y)];
            w[static_cast<size_t>(y * E + c)] = w[static_cast<size_t>(c * E + y)];
        }
        alive[static_cast<size_t>(p)] = 0;
        size[static_cast<size_t>(c)] += size[static_cast<size_t>(p)];
        load[static_cast<size_t>(c)] += load[static_cast<size_t>(p)];
        auto& mc = members[static_cast<size_t>(c)];
        mc.insert(mc.end(), members[static_cast<size_t>(p)].begin(), members[static_cast<size_t>(p)].end());
        refresh(c);
        for (int64_t y = 0; y < E; ++y) {
            if (!alive[static_cast<size_t>(y)] || y == c) continue;
            const int32_t by = best[static_cast<size_t>(y)];
            if (by == p || (by == c && !fits(y, c)))
                refresh(y);
            else if (fits(y, c) && w[static_cast<size_t>(y * E + c)] > 0 &&
                     w[static_cast<size_t>(y * E + c)] >= best_w[static_cast<size_t>(y)]) {
                best_w[static_cast<size_t>(y)] = w[static_cast<size_t>(y * E + c)];  // links to c only grew
                best[static_cast<size_t>(y)] = static_cast<int32_t>(c);
            }
        }
    }
    std::vector<int64_t> groups;
    for (int64_t x = 0; x < E; ++x)
        if (alive[static_cast<size_t>(x)]) groups.push_back(x);
    std::stable_sort(groups.begin(), groups.end(), [&](int64_t x, int64_t y) {  // largest, then heaviest, first
        const auto i = static_cast<size_t>(x), j = static_cast<size_t>(y);
        return size[i] > size[j] || (size[i] == size[j] && load[i] > load[j]);
    });
    std::vector<int32_t> rank_of(static_cast<size_t>(E), -1);
    std::vector<int64_t> room(static_cast<size_t>(N), per);
    std::vector<double> L(static_cast<size_t>(N), 0.0);
    const auto lightest_with_room = [&](int64_t need) {
        int64_t best_r = -1;
        for (int64_t r = 0; r < N; ++r)
            if (room[static_cast<size_t>(r)] >= need &&
                (best_r < 0 || L[static_cast<size_t>(r)] < L[static_cast<size_t>(best_r)]))
                best_r = r;
        return best_r;
    };
    for (int64_t g : groups) {
        const int64_t whole = lightest_with_room(size[static_cast<size_t>(g)]);
        for (int32_t e : members[static_cast<size_t>(g)]) {  // the group together, else where the slots are
            const int64_t r = whole >= 0 ? whole : lightest_with_room(1);
            rank_of[static_cast<size_t>(e)] = static_cast<int32_t>(r);
            --room[static_cast<size_t>(r)];
            L[static_cast<size_t>(r)] += expert_load[static_cast<size_t>(e)];
        }
    }
    return rank_of;
}

}  // namespace

// Replicas added one at a time, modeled on the loads under the run's replica rule (ExpertPlacement::dest_rank): an
// expert's rows from a rank that holds it stay there, the rest spread evenly over its replicas. load_per_copy: the
// expert with the most load per copy, on the least-loaded rank with room, O(E) per replica. heaviest_rank: one of the
// heaviest rank's experts (the first heaviest on ties; the next heaviest rank when none of its experts has a rank with
// room left), on the rank with room, so that the heaviest rank afterwards is lightest (ties: the smaller sum of
// squared rank loads): only a replica of the heaviest rank's experts can lower the maximum, and each (expert, rank) is
// evaluated in O(1) from the expert's holders, O(slots N) per replica.
ExpertPlacement add_replicas(const std::vector<double>& expert_load, const std::vector<double>& home_load,
                             int64_t num_ranks, const std::vector<int32_t>& rank_of, int64_t replicas, ReplicaRule rule,
                             const std::string& source, const std::function<void(int64_t)>& tick) {
    const int64_t E = static_cast<int64_t>(expert_load.size()), N = num_ranks, slots = (E + replicas) / N;
    MOEBENCH_CHECK(
        static_cast<int64_t>(rank_of.size()) == E && (replicas == 0 || static_cast<int64_t>(home_load.size()) == N * E),
        "add_replicas: {} experts, {} ranks, {} home loads", rank_of.size(), N, home_load.size());
    const bool by_load_per_copy = rule == ReplicaRule::load_per_copy;
    const auto home = [&](int64_t r, int64_t e) { return home_load[static_cast<size_t>(r * E + e)]; };
    std::vector<std::vector<int32_t>> holders(static_cast<size_t>(E)), on_rank(static_cast<size_t>(N));
    std::vector<int64_t> held(static_cast<size_t>(N), 0);
    std::vector<double> away(static_cast<size_t>(E)), L(static_cast<size_t>(N), 0.0);
    for (int64_t e = 0; e < E; ++e) {
        const int32_t r = rank_of[static_cast<size_t>(e)];
        holders[static_cast<size_t>(e)].push_back(r);
        on_rank[static_cast<size_t>(r)].push_back(static_cast<int32_t>(e));
        ++held[static_cast<size_t>(r)];
        if (replicas > 0) away[static_cast<size_t>(e)] = expert_load[static_cast<size_t>(e)] - home(r, e);
        L[static_cast<size_t>(r)] += expert_load[static_cast<size_t>(e)];
    }
    const auto close = [](double x, double y) { return std::fabs(x - y) <= 1e-9 * std::max(1.0, std::fabs(y)); };
    std::vector<int64_t> mark(static_cast<size_t>(N), -1), order(static_cast<size_t>(N));
    for (int64_t n = 0; n < replicas; ++n) {
        int64_t best_e = -1, best_r = -1;
        double best_key = 0, best_tie = 0;
        const auto offer = [&](int64_t e, int64_t r, double key, double tie) {  // smaller is better
            if (best_e < 0 || (key < best_key && !close(key, best_key)) ||
                (close(key, best_key) && tie < best_tie && !close(tie, best_tie)))
                best_e = e, best_r = r, best_key = key, best_tie = tie;
        };
        order.resize(static_cast<size_t>(N));
        std::iota(order.begin(), order.end(), 0);
        if (by_load_per_copy) {  // ranks lightest first
            std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
                return L[static_cast<size_t>(x)] < L[static_cast<size_t>(y)];
            });
            order.erase(std::remove_if(order.begin(), order.end(),
                                       [&](int64_t r) { return held[static_cast<size_t>(r)] >= slots; }),
                        order.end());
        } else {  // heaviest first
            std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
                return L[static_cast<size_t>(x)] > L[static_cast<size_t>(y)];
            });
        }
        double sq = 0;
        for (double x : L) sq += x * x;
        const auto evaluate = [&](int64_t e) {
            const auto& hs = holders[static_cast<size_t>(e)];
            for (int32_t r : hs) mark[static_cast<size_t>(r)] = e;
            const auto m = static_cast<double>(hs.size());
            if (by_load_per_copy) {
                for (int64_t r : order)
                    if (mark[static_cast<size_t>(r)] != e) {
                        offer(e, r, -expert_load[static_cast<size_t>(e)] / m, L[static_cast<size_t>(r)]);
                        break;
                    }
                return;
            }
            double hmax = -std::numeric_limits<double>::infinity(), hsum = 0;
            for (int32_t r : hs) {
                hmax = std::max(hmax, L[static_cast<size_t>(r)]);
                hsum += L[static_cast<size_t>(r)];
            }
            int64_t top1 = -1;  // the two heaviest ranks that do not hold e
            double v1 = -std::numeric_limits<double>::infinity(), v2 = v1;
            for (int64_t r : order) {
                if (mark[static_cast<size_t>(r)] == e) continue;
                if (top1 < 0) {
                    top1 = r;
                    v1 = L[static_cast<size_t>(r)];
                } else {
                    v2 = L[static_cast<size_t>(r)];
                    break;
                }
            }
            const double a = away[static_cast<size_t>(e)];
            for (int64_t r = 0; r < N; ++r) {
                if (held[static_cast<size_t>(r)] >= slots || mark[static_cast<size_t>(r)] == e) continue;
                const double a2 = a - home(r, e), share = a2 / (m + 1), delta = share - a / m;
                const double Lr = L[static_cast<size_t>(r)] + home(r, e) + share;
                const double key = std::max({r == top1 ? v2 : v1, hmax + delta, Lr});
                const double tie = sq + 2 * delta * hsum + m * delta * delta + Lr * Lr -
                                   L[static_cast<size_t>(r)] * L[static_cast<size_t>(r)];
                offer(e, r, key, tie);
            }
        };
        if (by_load_per_copy) {
            for (int64_t e = 0; e < E; ++e) evaluate(e);
        } else {
            for (int64_t h : order) {  // heaviest first
                for (int32_t e : on_rank[static_cast<size_t>(h)]) evaluate(e);
                if (best_e >= 0) break;
            }
        }
        MOEBENCH_CHECK(best_e >= 0, "placement: no rank has room for replica {} of {}", n, replicas);
        auto& hs = holders[static_cast<size_t>(best_e)];
        const auto m = static_cast<double>(hs.size());
        const double a = away[static_cast<size_t>(best_e)], a2 = a - home(best_r, best_e);
        for (int32_t r : hs) L[static_cast<size_t>(r)] += a2 / (m + 1) - a / m;
        L[static_cast<size_t>(best_r)] += home(best_r, best_e) + a2 / (m + 1);
        away[static_cast<size_t>(best_e)] = a2;
        hs.push_back(static_cast<int32_t>(best_r));
        on_rank[static_cast<size_t>(best_r)].push_back(static_cast<int32_t>(best_e));
        ++held[static_cast<size_t>(best_r)];
        if (tick) tick(n);
    }
    ExpertPlacement p;
    p.num_experts = E;
    p.num_ranks = N;
    p.experts_on_rank.assign(static_cast<size_t>(N), {});
    for (int64_t e = 0; e < E; ++e)
        for (int32_t r : holders[static_cast<size_t>(e)])
            p.experts_on_rank[static_cast<size_t>(r)].push_back(static_cast<int32_t>(e));
    for (auto& on_rank : p.experts_on_rank) std::sort(on_rank.begin(), on_rank.end());
    p = placement_from_json(placement_to_json(p), E, N, source);  // indexes the replicas, checks the result
    p.source = source;
    return p;
}

PlacementSearch search_placement(const RoutingTrace& trace, int64_t num_ranks, int64_t replicas, int64_t batch,
                                 const PlacementProgress& progress) {
    const int64_t E = trace.num_experts, N = num_ranks;
    if (N < 1 || E % N != 0)
        config_error(flag_of("ep"), fmt::format("must divide the trace's {} experts", E), std::to_string(N),
                     "use a divisor of the expert count");
    if (replicas < 0 || replicas % N != 0)
        config_error(flag_of("replicas"),
                     fmt::format("must be a multiple of {} {} (every rank holds as many experts)", flag_of("ep"), N),
                     std::to_string(replicas), fmt::format("use 0, {}, {} ...", N, 2 * N));
    if (replicas > E * (N - 1))
        config_error(flag_of("replicas"), fmt::format("exceeds a copy of every expert on every rank ({})", E * (N - 1)),
                     std::to_string(replicas), "use fewer replicas");
    if (batch < N)
        config_error(flag_of("batch"), fmt::format("gives some of the {} ranks no sequence", N), std::to_string(batch),
                     fmt::format("use {} {} or more", flag_of("batch"), N));

    // The search sees at most kSearchPairs (row, selection, selection) triples of the replay: every stride-th (layer,
    // step), evenly spread; the final choice replays them all (score_placement, O(k^2) per row and candidate).
    const int64_t per = E / N, k = trace.top_k, steps = trace.num_tokens / batch;
    const double Ed = static_cast<double>(E), Nd = static_cast<double>(N), kd = static_cast<double>(k);
    const double all_rows = static_cast<double>(trace.num_layers * steps * batch);
    const int64_t stride = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(all_rows * kd * kd / kSearchPairs)));
    const double rows = static_cast<double>((trace.num_layers * steps + stride - 1) / stride * batch);
    // The work in elementary updates, estimated before anything is sized by it. Search, per pass of a row-exact start:
    // O(E N) for the gains, the swap estimates of each expert's target ranks, and the rows of the swapped experts
    // (k^2 each, every expert about twice a pass); the pairwise start O(E^2) per pass; the clustering O(E^2) and more.
    // Replicas, per replica and candidate: the ranks sorted (N log N), and O(E) (load per copy) or O(slots N) (the
    // heaviest rank's experts). Replays: k^2 per row and candidate. Only the replicas can exceed the bound: the rest
    // is bounded by E <= 4096 and the search's sample.
    const double pass_work =
        Ed * Nd + Ed * 2.0 * static_cast<double>(std::min<int64_t>(kTargets, N - 1) * per) + 2.0 * rows * kd * kd;
    const double pairwise_pass_work = Ed * Ed, cluster_work = 4.0 * Ed * Ed;
    // {contiguous, clusters} x {remote rows, ranks per token}; with one expert per rank only contiguous by remote rows
    // (every placement touches as many ranks per token; nothing to cluster or to co-locate pairwise)
    const int exact_starts = per > 1 ? 4 : 1;
    const int primaries = (per > 1 ? 2 : 1) + exact_starts;  // with contiguous blocks and the pairwise swaps
    const double coactivation_work = static_cast<double>(trace.num_layers * trace.num_tokens) * kd * kd;
    const double search_work =
        static_cast<double>(exact_starts * kMaxSweeps) * pass_work +
        (per > 1 ? 2.0 * static_cast<double>(kMaxSweeps) * pairwise_pass_work + cluster_work : 0.0);
    const double slots = static_cast<double>((E + replicas) / N);
    const double replica_work = static_cast<double>(replicas) * static_cast<double>(primaries) *
                                (Ed + 2.0 * Nd * std::log2(Nd + 1.0) + slots * Nd);
    const double candidate_replay = all_rows * kd * kd;
    const double replay_work = candidate_replay * static_cast<double>(1 + primaries * (replicas > 0 ? 2 : 1));
    if (replica_work > kMaxPlacementWork) {
        const double per_replica = replica_work / static_cast<double>(replicas);
        const int64_t fit = static_cast<int64_t>(kMaxPlacementWork / per_replica) / N * N;
        config_error(
            flag_of("replicas"),
            fmt::format("needs about {:.2g} load updates with {} experts on {} ranks, beyond the bound of "
                        "{:.0e} (about a minute)",
                        replica_work, E, N, kMaxPlacementWork),
            std::to_string(replicas),
            fit > 0 ? fmt::format("use {} {} or fewer, or fewer {} ranks", flag_of("replicas"), fit, flag_of("ep"))
                    : fmt::format("use fewer {} ranks: even one replica per rank is beyond the bound", flag_of("ep")));
    }

    const double total_work = replay_work + rows * kd + coactivation_work + search_work + replica_work;
    double done_work = 0;
    const auto report = [&](double add, const std::string& stage) {
        done_work += add;
        if (progress) progress(std::min(1.0, done_work / std::max(1.0, total_work)), stage);
    };

    PlacementSearch out;
    out.contiguous = score_placement(trace, contiguous_placement(E, N), batch);
    report(candidate_replay, "replaying contiguous placement");
    const Replay rp = replay_rows(trace, N, batch, stride, replicas > 0);
    const Coactivation co = coactivation(trace);
    report(rows * kd + coactivation_work, "counting co-activation");

    std::vector<int32_t> blocks(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) blocks[static_cast<size_t>(e)] = static_cast<int32_t>(e / per);
    // The load bound of the row-exact search: contiguous placement's heaviest rank (rows computed, summed over the
    // replay) plus two standard deviations of a count that size (2 sqrt), the trace's own sampling noise: structure
    // found in a short trace is not refused for noise, a placement that piles load on one rank is.
    double heaviest = 0;
    for (int64_t r = 0; r < N; ++r) {
        double l = 0;
        for (int64_t e = r * per; e < (r + 1) * per; ++e) l += rp.load[static_cast<size_t>(e)];
        heaviest = std::max(heaviest, l);
    }
    const double cap = heaviest + 2.0 * std::sqrt(heaviest);

    struct Start {
        std::string name;
        std::vector<int32_t> rank_of;
    };
    std::vector<Start> found;
    const auto keep = [&](const std::string& name, const std::vector<int32_t>& rank_of) {
        const auto same = [&](const Start& x) { return x.rank_of == rank_of; };
        if (std::none_of(found.begin(), found.end(), same)) found.push_back({name, rank_of});
    };
    keep("contiguous blocks", blocks);
    if (per > 1) {
        keep("pairwise co-activation swaps", pairwise_swaps(co, N));
        report(2.0 * static_cast<double>(kMaxSweeps) * pairwise_pass_work, "pairwise co-activation swaps");
    }
    std::vector<int32_t> clusters;
    for (int s = 0; s < exact_starts; ++s) {
        const bool by_home = s % 2 == 0;
        const std::string name =
            std::string(s < 2 ? "swaps from contiguous blocks" : "swaps from co-activation clusters") +
            (by_home ? " (remote rows)" : " (ranks per token)");
        if (s == 2) {
            clusters = cluster_start(co.co, rp.load, N, cap);
            report(cluster_work, "clustering the co-activation graph");
        }
        Partition part(rp, s < 2 ? blocks : clusters, by_home);
        int64_t pass = 0;
        while (pass < kMaxSweeps) {
            ++pass;
            const int64_t taken = part.sweep(cap, out.swaps_evaluated);
            report(pass_work, fmt::format("{}, pass {}", name, pass));
            if (taken == 0) break;
        }
        report(pass_work * static_cast<double>(kMaxSweeps - pass), name);
        keep(name, part.rank_of());
    }

    // Each start with each replica rule, replayed with the run's rules (score_placement): their load models sum over
    // the trace, while the run balances step by step. The choice: the least dedup remote rows and max/mean rank load
    // per step, each relative to contiguous placement's, added (the step time relative to contiguous's if the
    // all-to-all and the experts' work took equal shares of it); ties to fewer rows.
    const auto relative = [](double x, double contiguous) { return contiguous > 0 ? x / contiguous : 1.0 + x; };
    const auto cost = [&](const PlacementScore& sc) {
        return relative(sc.dedup_remote_rows_per_step, out.contiguous.dedup_remote_rows_per_step) +
               relative(sc.max_over_mean_rank_load, out.contiguous.max_over_mean_rank_load);
    };
    bool have = false;
    for (const Start& s : found)
        for (int rule = 0; rule < (replicas > 0 ? 2 : 1); ++rule) {
            std::string name = s.name;
            if (replicas > 0)
                name += rule == 0 ? ", replicas by load per copy" : ", replicas where the heaviest rank gets lightest";
            const double per_tick = replica_work / static_cast<double>(std::max<int64_t>(1, replicas * 2 * primaries));
            ExpertPlacement p = add_replicas(rp.load, rp.home_load, N, s.rank_of, replicas,
                                             rule == 0 ? ReplicaRule::load_per_copy : ReplicaRule::heaviest_rank,
                                             "moebench place", [&](int64_t) { report(per_tick, name); });
            const PlacementScore score = score_placement(trace, p, batch);
            ++out.candidates_scored;
            report(candidate_replay, "replaying the candidates");
            const double c = cost(score), best = have ? cost(out.chosen) : 0.0;
            const bool better =
                !have || c < best - 1e-12 ||
                (c <= best + 1e-12 && score.dedup_remote_rows_per_step < out.chosen.dedup_remote_rows_per_step);
            if (better) {
                out.placement = std::move(p);
                out.chosen = score;
                out.chosen_from = name;
                have = true;
            }
        }
    return out;
}

namespace {

json score_json(const PlacementScore& s, double row_bytes) {
    json j = {{"dedup_remote_rows_per_step", s.dedup_remote_rows_per_step},
              {"per_expert_remote_rows_per_step", s.per_expert_remote_rows_per_step},
              {"max_over_mean_rank_load", s.max_over_mean_rank_load}};
    if (row_bytes > 0) {
        j["dedup_remote_bytes_per_step"] = s.dedup_remote_rows_per_step * row_bytes;
        j["per_expert_remote_bytes_per_step"] = s.per_expert_remote_rows_per_step * row_bytes;
    }
    return j;
}

}  // namespace

json placement_document(const PlacementSearch& r, const RoutingTrace& trace, const std::string& trace_name,
                        int64_t replicas, int64_t batch, int64_t hidden_size) {
    const double row_bytes = 2.0 * static_cast<double>(hidden_size);  // bf16 token rows (0: rows only)
    json doc = placement_to_json(r.placement);
    doc["predicted"] = {{"source", "counted"},
                        {"basis", fmt::format("the trace replayed in decode steps of {} {} tokens, one per "
                                              "sequence, sequences split over ranks as moebench run splits them; "
                                              "bytes: bf16 rows of the model's hidden size",
                                              flag_of("batch"), batch)},
                        {"trace", trace_name},
                        {"trace_layers", trace.num_layers},
                        {"batch", batch},
                        {"steps", r.chosen.steps},
                        {"replicas", replicas},
                        {"candidates_scored", r.candidates_scored},
                        {"chosen_from", r.chosen_from},
                        {"contiguous", score_json(r.contiguous, row_bytes)},
                        {"placed", score_json(r.chosen, row_bytes)}};
    return doc;
}

}  // namespace moebench
