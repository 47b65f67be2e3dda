// SPDX-License-Identifier: Apache-2.0
// The sim's statistical routing path: one MoE layer's per-rank state drawn from the workload's shares
// (sim_routing.hpp).
#include "backends/sim/sim_routing.hpp"

#include "common/error.hpp"
#include "model/phase_work.hpp"

#include <algorithm>
#include <numeric>
#include <utility>

namespace moebench {

using sampling::Rng;

double RowsLaw::max_of(int64_t count, Rng& rng, BinomialSetups& setups) const {
    if (binomial) return static_cast<double>(setups.of(n, p).max_of(count, rng));
    const double u = count > 1 ? std::pow(rng.uniform(), 1.0 / static_cast<double>(count)) : rng.uniform();
    return std::clamp(std::floor(mean + std::sqrt(std::max(var, 0.0)) * normal_quantile(u) + 0.5), 0.0, hi);
}

const BinomialDraw& BinomialSetups::of(int64_t n, double p) {
    if (by_law_.size() > 4096) by_law_.clear();
    auto it = by_law_.find({n, p});
    if (it == by_law_.end()) it = by_law_.emplace(std::make_pair(n, p), BinomialDraw(n, p)).first;
    return it->second;
}

namespace {

// Rank classes of at most this many distinct laws per kind are drawn as maxima; the rest one by one.
constexpr size_t kMaxClasses = 16;

// Ranks alike (the same law) grouped into the first kMaxClasses classes; any other law is a class of one.
void group_laws(const std::vector<RowsLaw>& laws, std::vector<std::pair<RowsLaw, int64_t>>& classes) {
    classes.clear();
    size_t grouped = 0;  // classes [0, grouped) take alike ranks
    for (const RowsLaw& x : laws) {
        if (x.empty()) continue;  // sends or receives nothing
        const auto end = classes.begin() + static_cast<std::ptrdiff_t>(grouped);
        const auto it = std::find_if(classes.begin(), end, [&](const auto& c) { return c.first == x; });
        if (it != end) {
            ++it->second;
            continue;
        }
        classes.push_back({x, 1});
        if (grouped < kMaxClasses && grouped + 1 == classes.size()) ++grouped;
    }
}

// The largest draw of each class: one value per class, appended to `out`.
void push_maxima(const std::vector<std::pair<RowsLaw, int64_t>>& classes, Rng& rng, std::vector<double>& out,
                 BinomialSetups& setups) {
    for (const auto& [law, count] : classes) out.push_back(law.max_of(count, rng, setups));
}

// P(a token misses one group of `g` experts) and P(it misses two) when its k picks are uniform over E: the
// hypergeometric C(E - g, k) / C(E, k) and C(E - 2g, k) / C(E, k).
std::pair<double, double> uniform_misses(int64_t E, int64_t k, int64_t g) {
    double one = 1, two = 1;
    for (int64_t i = 0; i < k; ++i) {
        one *= std::max<double>(0.0, static_cast<double>(E - g - i)) / static_cast<double>(E - i);
        two *= std::max<double>(0.0, static_cast<double>(E - 2 * g - i)) / static_cast<double>(E - i);
    }
    return {one, two};
}

}  // namespace

SimLayerRouting SimStatisticalRouting::draw_dispatch(Rng& rng, SimLayerRouting& out) const {
    A2aLinkBytes& l = out.dispatch_rows;
    push_maxima(laws_.intra_out, rng, l.intra_out, setups_);
    push_maxima(laws_.intra_in, rng, l.intra_in, setups_);
    push_maxima(laws_.inter_out, rng, l.inter_out, setups_);
    push_maxima(laws_.inter_in, rng, l.inter_in, setups_);
    out.cross_rank_rows = laws_.cross_rank_rows;
    return std::move(out);
}

SimStatisticalRouting::SimStatisticalRouting(const ModelConfig& model, const StepShape& shape, const Layout& layout,
                                             int64_t gpus_per_node, std::vector<double> shares_by_rank, uint64_t seed)
    : E_(model.moe.num_experts),
      k_(model.moe.top_k),
      ep_(std::max<int64_t>(layout.moe_ep, 1)),
      dp_(std::max<int64_t>(layout.attn_dp, 1)),
      node_(std::max<int64_t>(gpus_per_node, 1)),
      a2a_(layout.moe_exchange() == MoeExchange::all_to_all),
      dedup_(layout.a2a == A2aMode::dedup),
      seed_(seed),
      shape_(shape) {
    if (shares_by_rank.empty()) shares_by_rank.assign(static_cast<size_t>(E_), 1.0 / static_cast<double>(E_));
    MOEBENCH_CHECK(static_cast<int64_t>(shares_by_rank.size()) == E_, "sim: {} shares for {} experts",
                   shares_by_rank.size(), E_);
    std::vector<double> inclusion(shares_by_rank.size());
    for (size_t r = 0; r < inclusion.size(); ++r)
        inclusion[r] = std::min(1.0, static_cast<double>(k_) * shares_by_rank[r]);
    tokens_.resize(static_cast<size_t>(ep_));
    for (int64_t r = 0; r < ep_; ++r) total_tokens_ += tokens_[static_cast<size_t>(r)] = tokens_on_rank(shape, r, ep_);
    node_tokens_.assign(static_cast<size_t>(ep_), 0);
    for (int64_t first = 0; first < ep_; first += node_) {
        const int64_t last = std::min(ep_, first + node_);
        const int64_t sum = std::accumulate(tokens_.begin() + first, tokens_.begin() + last, int64_t{0});
        for (int64_t r = first; r < last; ++r) node_tokens_[static_cast<size_t>(r)] = sum;
    }
    counts_ = std::make_unique<ExpertCountDraw>(inclusion, k_, total_tokens_);
    if (a2a_ && dedup_) {
        miss_ = std::make_unique<GroupMissProbability>(inclusion, k_);
        const auto [one, two] = uniform_misses(E_, k_, E_ / ep_);
        miss_covariance_ = one > 0 ? two / (one * one) - 1.0 : 0.0;
    }
}

SimLayerRouting SimStatisticalRouting::draw(int64_t layer, const std::vector<int32_t>& given_perm,
                                            const ExpertPlacement& placement) const {
    SimLayerRouting out;
    Rng rng(sampling::stream_key(seed_, sampling::kTagStatistics, static_cast<uint64_t>(layer)));
    std::vector<int32_t> identity;
    if (given_perm.empty()) {
        identity.resize(static_cast<size_t>(E_));
        std::iota(identity.begin(), identity.end(), 0);
    }
    const std::vector<int32_t>& perm = given_perm.empty() ? identity : given_perm;
    counts_->draw(perm, rng, out.tokens_per_expert);
    const auto E = static_cast<size_t>(E_), R = static_cast<size_t>(ep_);
    out.home_rows.resize(static_cast<size_t>(dp_));  // each attention replica: its tokens x k (no drops)
    for (int64_t d = 0; d < dp_; ++d) out.home_rows[static_cast<size_t>(d)] = tokens_on_rank(shape_, d, dp_) * k_;
    out.dispatch_rows = A2aLinkBytes(ep_);
    if (ep_ == 1) {
        out.slot_rows = out.tokens_per_expert;
        out.rank_first = {0, E_};
        return out;
    }
    MOEBENCH_CHECK(placement.num_ranks == ep_ && placement.experts_on_rank.size() == R,
                   "sim: a placement over {} ranks for ep {}", placement.num_ranks, ep_);
    out.rank_first.assign(R + 1, 0);
    out.slot_rows.clear();
    out.slot_rows.reserve(E);
    std::vector<int64_t> assigned(R, 0);
    for (size_t q = 0; q < R; ++q) {
        for (int32_t e : placement.experts_on_rank[q]) {
            MOEBENCH_CHECK(static_cast<size_t>(e) < E, "sim: expert {} beyond {}", e, E);
            out.slot_rows.push_back(out.tokens_per_expert[static_cast<size_t>(e)]);
            assigned[q] += out.slot_rows.back();
        }
        out.rank_first[q + 1] = static_cast<int64_t>(out.slot_rows.size());
    }
    if (!a2a_) return out;  // no all-to-all: the experts' GPUs gather the tokens (the layout's collectives)
    const double T = static_cast<double>(total_tokens_);
    // Only the largest value of each kind sets the time: the per-class maxima replace the per-rank vectors.
    A2aLinkBytes& l = out.dispatch_rows;
    for (auto* v : {&l.intra_out, &l.intra_in, &l.inter_out, &l.inter_in}) v->clear();
    if (dedup_) {
        std::vector<double> miss;
        miss_->miss(perm, placement.experts_on_rank, miss);
        // Layers whose ranks have the same miss probabilities (every layer of a uniform routing) have the same laws:
        // made once, drawn for each layer.
        if (!laws_.miss.empty() && laws_.miss == miss) return draw_dispatch(rng, out);
        // Per node, and over all ranks: the sums of h, of the misses and of their squares.
        std::vector<double> node_h(R, 0.0), node_m(R, 0.0), node_m2(R, 0.0);
        double all_h = 0, all_m = 0, all_m2 = 0;
        for (size_t first = 0; first < R; first += static_cast<size_t>(node_)) {
            const size_t last = std::min(R, first + static_cast<size_t>(node_));
            double sh = 0, sm = 0, sm2 = 0;
            for (size_t q = first; q < last; ++q) sh += 1.0 - miss[q], sm += miss[q], sm2 += miss[q] * miss[q];
            for (size_t q = first; q < last; ++q) node_h[q] = sh, node_m[q] = sm, node_m2[q] = sm2;
            all_h += sh, all_m += sm, all_m2 += sm2;
        }
        // Rows a rank sends to a set Q of other ranks: its tokens each reach sum_Q h ranks on average, with variance
        // sum_Q h (1 - h) + sum over pairs of cov(miss q, miss q'); a token's k picks make its misses of two ranks
        // positively correlated (it reaches at most k ranks), which the pairs' term carries: cov = c m_q m_q', c from
        // the uniform closed forms at E / ep experts per rank (exact for uniform shares).
        // The law drawn is the binomial with that mean and variance (n = mean^2 / (mean - var), p = mean / n): a
        // count, skewed as the sum of indicators is (a normal underestimated the largest of 64 ranks' one-token
        // sends by 9%).
        const auto sends = [&](int64_t tokens, int64_t ranks, double sum_h, double sum_m, double sum_m2) {
            RowsLaw law;
            if (tokens <= 0 || ranks <= 0) return law;
            const double sum_h2 = static_cast<double>(ranks) - 2 * sum_m + sum_m2;  // sum (1 - m)^2
            const double per_token_var = sum_h - sum_h2 + miss_covariance_ * (sum_m * sum_m - sum_m2);
            const double mean = static_cast<double>(tokens) * sum_h;
            const double var = static_cast<double>(tokens) * std::max(per_token_var, 0.0);
            if (mean <= 0) return law;
            if (var >= mean) {  // over-dispersed: not from indicators, but a normal keeps the two moments
                law.binomial = false;
                law.mean = mean;
                law.var = var;
                law.hi = static_cast<double>(tokens * std::min(k_, ranks));
                return law;
            }
            law.n = std::max<int64_t>(1, std::llround(mean * mean / (mean - var)));
            law.p = std::min(1.0, mean / static_cast<double>(law.n));
            return law;
        };
        std::vector<RowsLaw> intra_out(R), intra_in(R), inter_out(R), inter_in(R);
        double cross = 0;
        for (size_t q = 0; q < R; ++q) {
            const double h = 1.0 - miss[q], m = miss[q];
            const int64_t node_size = std::min<int64_t>(node_, ep_ - static_cast<int64_t>(q) / node_ * node_);
            intra_in[q] = {true, node_tokens_[q] - tokens_[q], h};
            inter_in[q] = {true, total_tokens_ - node_tokens_[q], h};
            intra_out[q] = sends(tokens_[q], node_size - 1, node_h[q] - h, node_m[q] - m, node_m2[q] - m * m);
            inter_out[q] =
                sends(tokens_[q], ep_ - node_size, all_h - node_h[q], all_m - node_m[q], all_m2 - node_m2[q]);
            cross += h * (T - static_cast<double>(tokens_[q]));
        }
        laws_.miss = miss;
        laws_.cross_rank_rows = cross;
        group_laws(intra_out, laws_.intra_out);
        group_laws(intra_in, laws_.intra_in);
        group_laws(inter_out, laws_.inter_out);
        group_laws(inter_in, laws_.inter_in);
        return draw_dispatch(rng, out);
    }
    // Per-expert rows: each of q's assignments comes from rank r with probability T_r / T.
    std::vector<int64_t> node_assigned(R, 0);
    int64_t all_assigned = 0;
    for (size_t first = 0; first < R; first += static_cast<size_t>(node_)) {
        const size_t last = std::min(R, first + static_cast<size_t>(node_));
        int64_t sum = 0;
        for (size_t q = first; q < last; ++q) sum += assigned[q];
        for (size_t q = first; q < last; ++q) node_assigned[q] = sum;
        all_assigned += sum;
    }
    for (size_t q = 0; q < R; ++q) {
        const double own = T > 0 ? static_cast<double>(tokens_[q]) / T : 0.0;
        const int64_t remote = assigned[q] - binomial_draw(assigned[q], own, rng);
        const double others = T - static_cast<double>(tokens_[q]);
        const int64_t from_node =
            others > 0 ? binomial_draw(remote, static_cast<double>(node_tokens_[q] - tokens_[q]) / others, rng) : 0;
        l.intra_in.push_back(static_cast<double>(from_node));
        l.inter_in.push_back(static_cast<double>(remote - from_node));
        l.intra_out.push_back(static_cast<double>(binomial_draw(node_assigned[q] - assigned[q], own, rng)));
        l.inter_out.push_back(static_cast<double>(binomial_draw(all_assigned - node_assigned[q], own, rng)));
        out.cross_rank_rows += static_cast<double>(assigned[q]) * (1.0 - own);
    }
    return out;
}

}  // namespace moebench
