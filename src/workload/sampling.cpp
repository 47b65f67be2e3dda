// SPDX-License-Identifier: Apache-2.0
// Seeded sampling primitives for synthetic routing (see sampling.hpp).
#include "workload/sampling.hpp"

#include "common/error.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

namespace moebench::sampling {

std::vector<int32_t> permutation(int64_t n, uint64_t key) {
    std::vector<int32_t> p(static_cast<size_t>(n));
    std::iota(p.begin(), p.end(), 0);
    Rng rng(key);
    for (int64_t i = n - 1; i > 0; --i) std::swap(p[static_cast<size_t>(i)], p[static_cast<size_t>(rng.below(i + 1))]);
    return p;
}

void cap_shares(std::vector<double>& shares, int64_t top_k) {
    const double cap = 1.0 / static_cast<double>(top_k);
    std::vector<bool> capped(shares.size(), false);
    // Each pass caps at least one more expert, so at most E passes.
    for (size_t pass = 0; pass <= shares.size(); ++pass) {
        double fixed = 0, free_sum = 0;
        bool over = false;
        for (size_t i = 0; i < shares.size(); ++i) {
            if (!capped[i] && shares[i] > cap * (1 + 1e-12)) {
                capped[i] = true;
                over = true;
            }
        }
        if (!over) break;
        for (size_t i = 0; i < shares.size(); ++i) {
            if (capped[i]) {
                shares[i] = cap;
                fixed += cap;
            } else {
                free_sum += shares[i];
            }
        }
        double scale = free_sum > 0 ? (1.0 - fixed) / free_sum : 0;
        for (size_t i = 0; i < shares.size(); ++i)
            if (!capped[i]) shares[i] *= scale;
    }
}

std::vector<double> zipf_shares(int64_t num_experts, int64_t top_k, double exponent) {
    std::vector<double> s(static_cast<size_t>(num_experts));
    double total = 0;
    for (int64_t r = 0; r < num_experts; ++r) total += s[static_cast<size_t>(r)] = std::pow(double(r + 1), -exponent);
    for (double& v : s) v /= total;
    cap_shares(s, top_k);
    return s;
}

void sample_k_of_n(const std::vector<double>& shares, int64_t k, Rng& rng, std::vector<int32_t>& out) {
    const int64_t n = static_cast<int64_t>(shares.size());
    MOEBENCH_CHECK(k <= n, "k {} > n {}", k, n);
    // Random order of the indices, then one uniform start u and picks where the running sum of
    // pi_i = k * share_i crosses u, u + 1, ..., u + k - 1. Since each pi_i <= 1, no index is picked twice,
    // and each index i is picked with probability exactly pi_i whatever the order.
    std::vector<int32_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    for (int64_t i = n - 1; i > 0; --i)
        std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(rng.below(i + 1))]);
    const double u = rng.uniform();
    double cum = 0, target = u;
    const size_t first = out.size();
    for (int64_t i = 0; i < n && static_cast<int64_t>(out.size() - first) < k; ++i) {
        int32_t idx = order[static_cast<size_t>(i)];
        cum += static_cast<double>(k) * shares[static_cast<size_t>(idx)];
        if (cum > target) {
            out.push_back(idx);
            target += 1.0;
        }
    }
    // Rounding can leave the last crossing just short: complete with the largest unpicked shares.
    while (static_cast<int64_t>(out.size() - first) < k) {
        int32_t best = -1;
        for (int32_t i = 0; i < n; ++i) {
            if (std::find(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(), i) != out.end()) continue;
            if (best < 0 || shares[static_cast<size_t>(i)] > shares[static_cast<size_t>(best)]) best = i;
        }
        out.push_back(best);
    }
}

void dirichlet_weights(int64_t k, Rng& rng, float* out) {
    std::vector<double> w(static_cast<size_t>(k));
    double total = 0;
    for (auto& v : w) total += v = -std::log1p(-rng.uniform()) + 1e-12;
    std::sort(w.begin(), w.end(), std::greater<>());
    for (int64_t j = 0; j < k; ++j) out[j] = static_cast<float>(w[static_cast<size_t>(j)] / total);
}

}  // namespace moebench::sampling
