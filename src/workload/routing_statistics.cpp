// SPDX-License-Identifier: Apache-2.0
// Draws and probabilities of routing with independent tokens (see routing_statistics.hpp).
#include "workload/routing_statistics.hpp"

#include "common/error.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>

namespace moebench {

using sampling::Rng;

double normal_quantile(double u) {
    // Acklam's algorithm: a rational function in the centre, in sqrt(-2 log) in the tails.
    static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                                   1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
    static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                                   6.680131188771972e+01, -1.328068155288572e+01};
    static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                                   -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
    static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                                   3.754408661907416e+00};
    constexpr double low = 0.02425, high = 1 - low;
    if (!(u > 0)) return -38.0;
    if (!(u < 1)) return 38.0;
    if (u < low) {
        const double q = std::sqrt(-2 * std::log(u));
        return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
               ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
    }
    if (u > high) {
        const double q = std::sqrt(-2 * std::log1p(-u));
        return -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
               ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
    }
    const double q = u - 0.5, r = q * q;
    return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
           (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

double normal_draw(Rng& rng) { return normal_quantile(rng.uniform()); }

BinomialDraw::BinomialDraw(int64_t n, double p) : n_(std::max<int64_t>(n, 0)), p_(std::clamp(p, 0.0, 1.0)) {
    flip_ = p_ > 0.5;
    const double pr = flip_ ? 1.0 - p_ : p_;
    mean_ = static_cast<double>(n_) * pr;
    exact_ = mean_ < kBinomialExactMean;
    if (exact_) {
        // P(x + 1) = P(x) (n - x) / (x + 1) odds, from P(0) = (1 - p)^n, until the tail is below 1e-15.
        auto t = std::make_shared<Table>();
        double prob = pr <= 0 ? 1.0 : std::exp(static_cast<double>(n_) * std::log1p(-pr)), sum = prob;
        const double odds = pr < 1 ? pr / (1.0 - pr) : 0.0;
        t->cdf.push_back(sum);
        for (int64_t x = 0; x < n_ && sum < 1.0 - 1e-15 && prob > 0; ++x) {
            prob *= static_cast<double>(n_ - x) / static_cast<double>(x + 1) * odds;
            t->cdf.push_back(sum += prob);
        }
        // A guide table (Chen and Asau): a draw starts its search where its quantile's bucket does, about one step.
        t->guide.resize(4 * t->cdf.size());
        uint32_t x = 0;
        for (size_t g = 0; g < t->guide.size(); ++g) {
            const double at = static_cast<double>(g) / static_cast<double>(t->guide.size());
            while (x + 1 < t->cdf.size() && t->cdf[x] < at) ++x;
            t->guide[g] = x;
        }
        table_ = std::move(t);
    } else {
        sd_ = std::sqrt(mean_ * (1.0 - pr));
        skew_ = (1.0 - 2.0 * pr) / sd_;
    }
}

int64_t BinomialDraw::at_quantile(double u) const {
    int64_t x = 0;
    if (exact_) {  // inversion, from the guide table's start
        const std::vector<double>& cdf = table_->cdf;
        const size_t G = table_->guide.size();
        x = table_->guide[std::min(G - 1, static_cast<size_t>(u * static_cast<double>(G)))];
        const int64_t last = static_cast<int64_t>(cdf.size()) - 1;
        while (x < last && u > cdf[static_cast<size_t>(x)]) ++x;
        return x;
    }
    const double z = normal_quantile(u);
    const double v = mean_ + sd_ * (z + skew_ * (z * z - 1.0) / 6.0);
    return std::clamp<int64_t>(static_cast<int64_t>(std::floor(v + 0.5)), 0, n_);
}

int64_t BinomialDraw::operator()(Rng& rng) const {
    const double u = rng.uniform();
    return flip_ ? n_ - at_quantile(1.0 - u) : at_quantile(u);
}

int64_t BinomialDraw::max_of(int64_t count, Rng& rng) const {
    if (count <= 1) return (*this)(rng);
    const double u = std::pow(rng.uniform(), 1.0 / static_cast<double>(count));
    // The largest draw of the outcome is n minus the smallest draw of the rarer one when flipped.
    return flip_ ? n_ - at_quantile(1.0 - u) : at_quantile(u);
}

int64_t binomial_draw(int64_t n, double p, Rng& rng) { return BinomialDraw(n, p)(rng); }

ExpertCountDraw::ExpertCountDraw(std::vector<double> inclusion, int64_t k, int64_t num_tokens)
    : inclusion_(std::move(inclusion)), k_(k), num_tokens_(num_tokens) {
    setup_of_rank_.reserve(inclusion_.size());
    var_cum_.reserve(inclusion_.size());
    double cum = 0;
    for (size_t r = 0; r < inclusion_.size(); ++r) {
        const double pi = std::clamp(inclusion_[r], 0.0, 1.0);
        // Equal neighbours (uniform, hot, a capped zipf head) share one setup.
        if (r == 0 || inclusion_[r] != inclusion_[r - 1]) setups_.emplace_back(num_tokens, pi);
        setup_of_rank_.push_back(static_cast<uint32_t>(setups_.size() - 1));
        cum += pi * (1.0 - pi);
        var_cum_.push_back(cum);
    }
    equal_ = setups_.size() == 1;
}

void ExpertCountDraw::draw(const std::vector<int32_t>& perm, Rng& rng, std::vector<int64_t>& counts) const {
    const size_t E = inclusion_.size();
    MOEBENCH_CHECK(perm.size() == E, "expert count draw: a permutation of {} for {} experts", perm.size(), E);
    counts.assign(E, 0);
    int64_t sum = 0;
    for (size_t r = 0; r < E; ++r) sum += counts[static_cast<size_t>(perm[r])] = setups_[setup_of_rank_[r]](rng);
    // The sum back to T k, one assignment at a time: added to an expert drawn by its variance inclusion (1 -
    // inclusion), removed from one drawn by its count times (1 - inclusion). For small inclusions the two hit an
    // expert at its edge (0 before an addition, 1 before a removal) equally often (P(0) = P(1) / mean), so the
    // correction leaves the expected number of experts with tokens as it was; an expert of inclusion 1 is never moved.
    int64_t diff = num_tokens_ * k_ - sum;
    if (diff == 0) return;
    thread_local std::vector<double> cum;  // (a scratch: this runs once per layer)
    if (diff > 0) {
        cum = var_cum_;
    } else {
        cum.resize(E);
        double c = 0;
        for (size_t r = 0; r < E; ++r)
            cum[r] = c +=
                static_cast<double>(counts[static_cast<size_t>(perm[r])]) * (1.0 - std::min(1.0, inclusion_[r]));
    }
    const double total = cum.empty() ? 0.0 : cum.back();
    int64_t misses = 0;
    while (diff != 0 && total > 0) {
        const size_t r =
            diff > 0 && equal_
                ? static_cast<size_t>(rng.below(static_cast<int64_t>(E)))  // equal weights
                : std::min(E - 1, static_cast<size_t>(std::upper_bound(cum.begin(), cum.end(), rng.uniform() * total) -
                                                      cum.begin()));
        int64_t& c = counts[static_cast<size_t>(perm[r])];
        if (diff > 0 && c < num_tokens_) {
            ++c;
            --diff;
        } else if (diff < 0 && c > 0) {
            --c;
            ++diff;
        } else if (++misses > 64 * (std::abs(diff) + 16)) {
            // Every expert drawn is full (or empty): take the first that is not, in rank order.
            for (size_t q = 0; q < E && diff != 0; ++q) {
                if (inclusion_[q] <= 0 || inclusion_[q] >= 1) continue;
                int64_t& x = counts[static_cast<size_t>(perm[q])];
                while (diff > 0 && x < num_tokens_) ++x, --diff;
                while (diff < 0 && x > 0) --x, ++diff;
            }
            break;
        }
    }
}

namespace {

constexpr double kCertain = 1.0 - 1e-12;

// Coefficients 0..deg of prod (1 + w_i x) over `w`, truncated at degree `deg`.
void multiply_linear(std::vector<double>& poly, double w, int64_t deg) {
    for (int64_t j = deg; j >= 1; --j) poly[static_cast<size_t>(j)] += w * poly[static_cast<size_t>(j - 1)];
}

std::vector<double> multiply(const std::vector<double>& a, const std::vector<double>& b, int64_t deg) {
    std::vector<double> c(static_cast<size_t>(deg + 1), 0.0);
    for (int64_t i = 0; i <= deg; ++i) {
        if (a[static_cast<size_t>(i)] == 0) continue;
        for (int64_t j = 0; i + j <= deg; ++j)
            c[static_cast<size_t>(i + j)] += a[static_cast<size_t>(i)] * b[static_cast<size_t>(j)];
    }
    return c;
}

// Conditional-Poisson weights whose inclusion probabilities (k picks) are `pi` (each in (0, 1), summing to k):
// w <- w pi / pi(w) until every inclusion is met to 1e-10 (Chen, Dempster and Liu 1994), with
// pi_i(w) = w_i e_{k-1}(w without i) / e_k(w), the e's from prefix and suffix products.
std::vector<double> fit_weights(const std::vector<double>& pi, int64_t k) {
    const size_t n = pi.size();
    std::vector<double> w(n);
    for (size_t i = 0; i < n; ++i) w[i] = pi[i] / (1.0 - pi[i]);
    std::vector<std::vector<double>> pre(n + 1, std::vector<double>(static_cast<size_t>(k + 1), 0.0)), suf = pre;
    for (int iter = 0; iter < 1000; ++iter) {
        double total = 0;
        for (double x : w) total += x;
        for (double& x : w) x *= static_cast<double>(k) / total;  // scale free: keeps the e's near 1
        pre[0].assign(static_cast<size_t>(k + 1), 0.0);
        pre[0][0] = 1;
        for (size_t i = 0; i < n; ++i) {
            pre[i + 1] = pre[i];
            multiply_linear(pre[i + 1], w[i], k);
        }
        suf[n].assign(static_cast<size_t>(k + 1), 0.0);
        suf[n][0] = 1;
        for (size_t i = n; i-- > 0;) {
            suf[i] = suf[i + 1];
            multiply_linear(suf[i], w[i], k);
        }
        const double ek = pre[n][static_cast<size_t>(k)];
        double worst = 0;
        std::vector<double> got(n);
        for (size_t i = 0; i < n; ++i) {
            double ek1 = 0;  // e_{k-1} of the others
            for (int64_t j = 0; j <= k - 1; ++j)
                ek1 += pre[i][static_cast<size_t>(j)] * suf[i + 1][static_cast<size_t>(k - 1 - j)];
            got[i] = w[i] * ek1 / ek;
            worst = std::max(worst, std::abs(got[i] - pi[i]) / pi[i]);
        }
        if (worst < 1e-10) break;
        for (size_t i = 0; i < n; ++i) w[i] *= pi[i] / got[i];
    }
    return w;
}

// The fit depends on the inclusions and k alone, which every layer of a run (and every point of a sweep) shares:
// the last few are kept.
std::shared_ptr<const std::vector<double>> cached_weights(const std::vector<double>& pi, int64_t k) {
    static std::mutex mu;
    static std::vector<std::pair<std::pair<std::vector<double>, int64_t>, std::shared_ptr<const std::vector<double>>>>
        cache;
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& [key, w] : cache)
        if (key.second == k && key.first == pi) return w;
    auto w = std::make_shared<const std::vector<double>>(fit_weights(pi, k));
    if (cache.size() >= 4) cache.erase(cache.begin());
    cache.push_back({{pi, k}, w});
    return w;
}

}  // namespace

GroupMissProbability::GroupMissProbability(const std::vector<double>& inclusion, int64_t k) : k_(k) {
    const size_t E = inclusion.size();
    weight_.assign(E, 0.0);
    certain_.assign(E, 0);
    std::vector<double> pi;
    std::vector<size_t> at;
    for (size_t r = 0; r < E; ++r) {
        if (inclusion[r] >= kCertain) {
            certain_[r] = 1;
            ++num_certain_;
        } else if (inclusion[r] > 0) {
            pi.push_back(inclusion[r]);
            at.push_back(r);
        }
    }
    const int64_t rest = k_ - num_certain_;
    equal_ = num_certain_ == 0 && pi.size() == E &&
             std::all_of(pi.begin(), pi.end(), [&](double x) { return x == pi.front(); });
    if (equal_ || rest <= 0 || pi.empty()) {
        for (size_t i = 0; i < at.size(); ++i) weight_[at[i]] = 1.0;
        return;
    }
    const auto w = cached_weights(pi, rest);
    for (size_t i = 0; i < at.size(); ++i) weight_[at[i]] = (*w)[i];
}

void GroupMissProbability::miss(const std::vector<int32_t>& perm, const std::vector<std::vector<int32_t>>& groups,
                                std::vector<double>& miss) const {
    const size_t E = weight_.size(), G = groups.size();
    MOEBENCH_CHECK(perm.size() == E, "group miss probability: a permutation of {} for {} experts", perm.size(), E);
    miss.assign(G, 0.0);
    if (equal_) {  // C(E - m, k) / C(E, k), one product per group size
        std::map<size_t, double> by_size;
        for (size_t g = 0; g < G; ++g) {
            const size_t m = groups[g].size();
            auto it = by_size.find(m);
            if (it == by_size.end()) {
                double p = 1;
                for (int64_t i = 0; i < k_; ++i)
                    p *=
                        std::max(0.0, static_cast<double>(E - m) - static_cast<double>(i)) / static_cast<double>(E - i);
                it = by_size.emplace(m, p).first;
            }
            miss[g] = it->second;
        }
        return;
    }
    std::vector<size_t> rank_of(E);
    for (size_t r = 0; r < E; ++r) rank_of[static_cast<size_t>(perm[r])] = r;
    const int64_t rest = k_ - num_certain_;
    std::vector<char> has_certain(G, 0);
    std::vector<std::vector<double>> poly(
        G, std::vector<double>(static_cast<size_t>(std::max<int64_t>(rest, 0) + 1), 0.0));
    for (size_t g = 0; g < G; ++g) {
        poly[g][0] = 1;
        for (int32_t e : groups[g]) {
            const size_t r = rank_of[static_cast<size_t>(e)];
            if (certain_[r])
                has_certain[g] = 1;
            else if (rest > 0 && weight_[r] > 0)
                multiply_linear(poly[g], weight_[r], rest);
        }
    }
    if (rest <= 0) {  // the certain experts take every pick
        for (size_t g = 0; g < G; ++g) miss[g] = has_certain[g] ? 0.0 : 1.0;
        return;
    }
    // e_rest of everything outside group g = sum_j prefix_g[j] suffix_g[rest - j].
    std::vector<std::vector<double>> pre(G + 1), suf(G + 1);
    pre[0].assign(static_cast<size_t>(rest + 1), 0.0);
    pre[0][0] = 1;
    for (size_t g = 0; g < G; ++g) pre[g + 1] = multiply(pre[g], poly[g], rest);
    suf[G] = pre[0];
    for (size_t g = G; g-- > 0;) suf[g] = multiply(suf[g + 1], poly[g], rest);
    const double all = pre[G][static_cast<size_t>(rest)];
    for (size_t g = 0; g < G; ++g) {
        if (has_certain[g] || all <= 0) continue;
        double outside = 0;
        for (int64_t j = 0; j <= rest; ++j)
            outside += pre[g][static_cast<size_t>(j)] * suf[g + 1][static_cast<size_t>(rest - j)];
        miss[g] = std::clamp(outside / all, 0.0, 1.0);
    }
}

}  // namespace moebench
