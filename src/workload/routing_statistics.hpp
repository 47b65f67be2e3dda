// SPDX-License-Identifier: Apache-2.0
// The statistics of routing whose tokens pick their experts independently of each other (the synthetic workloads
// uniform, zipf/powerlaw, hot, imbalance; the sim's own uniform router): a step's tokens per expert drawn in O(E)
// whatever the number of tokens, and the probability that a token reaches a group of experts (a rank) at least once.
// The sim's statistical routing path (docs/sim-backend.md, "Routing path") is built from them; the approximations
// are stated at each function and checked against per-token routing in tests/cpu/test_routing_statistics.cpp.
#pragma once
#include "workload/sampling.hpp"

#include <cstdint>
#include <memory>
#include <vector>

namespace moebench {

/// The standard normal quantile Phi^-1(u), u in (0, 1) (Acklam's rational approximation: relative error below
/// 1.2e-9; 0 and 1 give -/+ 38, beyond any double's tail).
double normal_quantile(double u);
/// A standard normal draw: normal_quantile of one uniform.
double normal_draw(sampling::Rng& rng);

/// Draws from Binomial(n, p), with the setup done once for many draws of the same (n, p). Exact (inversion from 0,
/// on the rarer outcome) while the rarer outcome's mean is below kBinomialExactMean; above it a normal with the
/// binomial's mean, variance and skewness (Cornish-Fisher's first term), rounded and clamped to [0, n]: at a mean
/// of 16 its quantiles are within about 0.1 standard deviation of the binomial's up to the 99.9th percentile.
class BinomialDraw {
public:
    static constexpr double kBinomialExactMean = 16.0;
    BinomialDraw() = default;
    BinomialDraw(int64_t n, double p);
    int64_t operator()(sampling::Rng& rng) const;
    /// The largest of `count` independent draws, drawn at once: the quantile u^(1/count) of one uniform u.
    int64_t max_of(int64_t count, sampling::Rng& rng) const;
    int64_t n() const { return n_; }
    double p() const { return p_; }

private:
    int64_t n_ = 0;
    double p_ = 0;       // as given
    bool flip_ = false;  // drew the complement (p > 1/2)
    bool exact_ = true;
    struct Table {
        std::vector<double> cdf;      // P(X <= x) of the rarer outcome, x = 0, 1, ... until 1 - 1e-15
        std::vector<uint32_t> guide;  // guide[g]: the first x with cdf[x] >= g / guide.size() (where to start)
    };
    std::shared_ptr<const Table> table_;   // exact branch (copies of a draw share it)
    double mean_ = 0, sd_ = 0, skew_ = 0;  // of the rarer outcome (normal)
    int64_t at_quantile(double u) const;   // the draw at quantile u of the rarer outcome
};

/// One-off draw from Binomial(n, p).
int64_t binomial_draw(int64_t n, double p, sampling::Rng& rng);

/// One step's tokens per expert for `num_tokens` tokens that each pick k distinct experts, expert perm[r] with
/// probability `inclusion[r]` (k times its share; the inclusions sum to k), every token independently of the others.
///
/// Each expert's count is drawn from its exact marginal, Binomial(num_tokens, inclusion). A token's picks are
/// negatively correlated (exactly k of them), which the independent draws leave out: their sum varies about T k.
/// It is then restored to exactly T k one assignment at a time: added to an expert drawn in proportion to its
/// variance inclusion (1 - inclusion), or removed from one drawn in proportion to its count times (1 - inclusion),
/// never above num_tokens or below 0; for small inclusions the two change the number of experts with tokens equally
/// often, so its expectation is kept. An expert every token picks (inclusion 1) gets exactly num_tokens. (A
/// multinomial of T k draws over the shares would keep the sum but give an expert of inclusion 0.9 about ten times
/// the true variance and allow counts above T.)
class ExpertCountDraw {
public:
    ExpertCountDraw(std::vector<double> inclusion, int64_t k, int64_t num_tokens);
    /// counts[perm[r]] for every popularity rank r; `counts` is resized to the number of experts.
    void draw(const std::vector<int32_t>& perm, sampling::Rng& rng, std::vector<int64_t>& counts) const;
    const std::vector<double>& inclusion() const { return inclusion_; }

private:
    std::vector<double> inclusion_;        // by popularity rank
    std::vector<BinomialDraw> setups_;     // one per distinct inclusion
    std::vector<uint32_t> setup_of_rank_;  // by popularity rank: its setup
    std::vector<double> var_cum_;          // cumulative inclusion (1 - inclusion) by rank, for the sum's correction
    bool equal_ = false;                   // every inclusion the same (uniform): the correction adds to any expert
    int64_t k_ = 0, num_tokens_ = 0;
};

/// P(a token picks none of the experts of each group), the groups a partition of the experts (a layer's ranks), for
/// tokens that pick k distinct experts with the inclusion probabilities by popularity rank, expert perm[r] at rank r.
///
/// The joint law of a token's k picks is taken to be conditional Poisson sampling (the maximum-entropy law of k
/// distinct picks with the given inclusion probabilities), its weights fitted once so that each inclusion is met to
/// 1e-10: P(no pick in G) = e_k(w outside G) / e_k(w), e_k the elementary symmetric polynomial. For equal inclusions
/// (uniform) that is exact: the hypergeometric C(E - |G|, k) / C(E, k). The workloads' own sampler for unequal
/// inclusions (systematic sampling over a random order) has the same inclusions; its joint law is close to but not
/// the same as this one (tests/cpu/test_routing_statistics.cpp measures the difference). An expert with inclusion 1 is
/// always picked.
class GroupMissProbability {
public:
    GroupMissProbability(const std::vector<double>& inclusion, int64_t k);
    /// miss[g] for each group of expert ids (groups[g]).
    void miss(const std::vector<int32_t>& perm, const std::vector<std::vector<int32_t>>& groups,
              std::vector<double>& miss) const;

private:
    std::vector<double> weight_;  // by popularity rank: the conditional-Poisson weight (0: never picked)
    std::vector<char> certain_;   // by popularity rank: inclusion 1
    int64_t k_ = 0, num_certain_ = 0;
    bool equal_ = false;  // every inclusion the same (no certain ones): the hypergeometric closed form
};

}  // namespace moebench
