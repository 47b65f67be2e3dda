// SPDX-License-Identifier: Apache-2.0
// Expert-load statistics: plain loops, written to be checked by hand on small cases.
#include "metrics/expert_load.hpp"
#include "core/report_keys.hpp"

#include "common/error.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include <fmt/format.h>

namespace moebench {

double coefficient_of_variation(const std::vector<int64_t>& counts) {
    if (counts.empty()) return 0;
    double mean = 0;
    for (int64_t c : counts) mean += static_cast<double>(c);
    mean /= static_cast<double>(counts.size());
    if (mean <= 0) return 0;
    double var = 0;
    for (int64_t c : counts) var += (static_cast<double>(c) - mean) * (static_cast<double>(c) - mean);
    var /= static_cast<double>(counts.size());
    return std::sqrt(var) / mean;
}

double gini_coefficient(const std::vector<int64_t>& counts) {
    // sum_ij |x_i - x_j| / (2 n^2 mean), computed on sorted values: sum_i (2i - n + 1) x_(i) / (n^2 mean).
    const int64_t n = static_cast<int64_t>(counts.size());
    if (n == 0) return 0;
    std::vector<int64_t> sorted(counts);
    std::sort(sorted.begin(), sorted.end());
    double total = 0, weighted = 0;
    for (int64_t i = 0; i < n; ++i) {
        total += static_cast<double>(sorted[i]);
        weighted += static_cast<double>(2 * i - n + 1) * static_cast<double>(sorted[i]);
    }
    if (total <= 0) return 0;
    return weighted / (static_cast<double>(n) * total);
}

ExpertLoad expert_load_from_counts(std::vector<int64_t> tokens_per_expert, int64_t dropped) {
    ExpertLoad l;
    l.num_experts = static_cast<int64_t>(tokens_per_expert.size());
    l.tokens_per_expert = std::move(tokens_per_expert);
    l.dropped = dropped;
    const auto& c = l.tokens_per_expert;
    l.num_assignments = std::accumulate(c.begin(), c.end(), int64_t{0});
    if (l.num_experts == 0) return l;
    l.max = *std::max_element(c.begin(), c.end());
    l.idle_experts = std::count(c.begin(), c.end(), int64_t{0});
    l.mean = static_cast<double>(l.num_assignments) / static_cast<double>(l.num_experts);
    if (l.num_assignments == 0) return l;
    l.max_over_mean = static_cast<double>(l.max) / l.mean;
    l.cv = coefficient_of_variation(c);
    l.gini = gini_coefficient(c);
    std::vector<int64_t> sorted(c);
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    int64_t top3 = 0;
    for (size_t i = 0; i < sorted.size() && i < 3; ++i) top3 += sorted[i];
    l.top3_share = static_cast<double>(top3) / static_cast<double>(l.num_assignments);
    for (int64_t v : c) {
        if (v == 0) continue;
        double p = static_cast<double>(v) / static_cast<double>(l.num_assignments);
        l.entropy_bits -= p * std::log2(p);
    }
    l.entropy_norm = l.num_experts > 1 ? l.entropy_bits / std::log2(static_cast<double>(l.num_experts)) : 1.0;
    return l;
}

std::vector<int64_t> count_tokens_per_expert(const int32_t* ids, int64_t num_tokens, int64_t k, int64_t num_experts,
                                             int64_t* num_missing) {
    std::vector<int64_t> counts(static_cast<size_t>(num_experts), 0);
    int64_t missing = 0;
    for (int64_t i = 0; i < num_tokens * k; ++i) {
        int32_t e = ids[i];
        if (e < 0) {
            MOEBENCH_CHECK(e == -1, "expert id {} below -1", e);
            ++missing;
            continue;
        }
        MOEBENCH_CHECK(e < num_experts, "expert id {} >= num_experts {}", e, num_experts);
        ++counts[static_cast<size_t>(e)];
    }
    if (num_missing) *num_missing = missing;
    return counts;
}

ExpertLoad expert_load(const int32_t* ids, int64_t num_tokens, int64_t k, int64_t num_experts) {
    int64_t missing = 0;
    auto counts = count_tokens_per_expert(ids, num_tokens, k, num_experts, &missing);
    return expert_load_from_counts(std::move(counts), missing);
}

LoadWindows load_windows(const int32_t* ids, int64_t num_tokens, int64_t k, int64_t num_experts,
                         int64_t window_tokens) {
    MOEBENCH_CHECK(window_tokens > 0, "window of {} tokens", window_tokens);
    LoadWindows w;
    w.window_tokens = window_tokens;
    for (int64_t start = 0; start < num_tokens; start += window_tokens) {
        int64_t n = std::min(window_tokens, num_tokens - start);
        auto counts = count_tokens_per_expert(ids + start * k, n, k, num_experts);
        w.start_token.push_back(start);
        w.num_tokens.push_back(n);
        w.max_over_mean.push_back(expert_load_from_counts(counts).max_over_mean);
        w.counts.push_back(std::move(counts));
    }
    return w;
}

namespace {

// Calls pair(a, b), a < b, for every unordered pair of a token's distinct valid experts: once per token.
template <typename Pair>
void for_each_coactivated_pair(const int32_t* ids, int64_t num_tokens, int64_t k, Pair&& pair) {
    std::vector<int32_t> set;
    for (int64_t t = 0; t < num_tokens; ++t) {
        set.clear();
        for (int64_t j = 0; j < k; ++j)
            if (ids[t * k + j] >= 0) set.push_back(ids[t * k + j]);
        std::sort(set.begin(), set.end());
        set.erase(std::unique(set.begin(), set.end()), set.end());
        for (size_t i = 0; i < set.size(); ++i)
            for (size_t j = i + 1; j < set.size(); ++j) pair(set[i], set[j]);
    }
}

}  // namespace

std::vector<int64_t> coactivation_counts(const int32_t* ids, int64_t num_tokens, int64_t k, int64_t num_experts) {
    std::vector<int64_t> m(static_cast<size_t>(num_experts * num_experts), 0);
    for_each_coactivated_pair(ids, num_tokens, k, [&](int32_t a, int32_t b) {
        ++m[static_cast<size_t>(a * num_experts + b)];
        ++m[static_cast<size_t>(b * num_experts + a)];
    });
    return m;
}

std::vector<ExpertPair> top_coactivation_pairs(const int32_t* ids, int64_t num_tokens, int64_t k, int64_t n) {
    std::unordered_map<uint64_t, int64_t> counts;  // key: a << 32 | b, a < b
    for_each_coactivated_pair(ids, num_tokens, k, [&](int32_t a, int32_t b) {
        ++counts[static_cast<uint64_t>(a) << 32 | static_cast<uint32_t>(b)];
    });
    std::vector<ExpertPair> pairs;
    pairs.reserve(counts.size());
    for (const auto& [key, c] : counts)
        pairs.push_back({static_cast<int32_t>(key >> 32), static_cast<int32_t>(key & 0xffffffffu), c});
    const auto before = [](const ExpertPair& x, const ExpertPair& y) {
        return x.count != y.count ? x.count > y.count : x.a != y.a ? x.a < y.a : x.b < y.b;
    };
    const size_t keep = static_cast<size_t>(std::clamp<int64_t>(n, 0, static_cast<int64_t>(pairs.size())));
    std::partial_sort(pairs.begin(), pairs.begin() + static_cast<std::ptrdiff_t>(keep), pairs.end(), before);
    pairs.resize(keep);
    return pairs;
}

LoadBalance load_balance(const std::vector<std::vector<double>>& load_per_layer) {
    LoadBalance b;
    double sum_mean = 0, sum_max = 0, ratio_sum = 0, imbalance_sum = 0;
    for (size_t l = 0; l < load_per_layer.size(); ++l) {
        const std::vector<double>& x = load_per_layer[l];
        if (x.empty()) continue;
        double total = 0, most = 0;
        for (double v : x) total += v, most = std::max(most, v);
        if (!(total > 0)) continue;  // an idle layer has no balance to speak of
        const double mean = total / static_cast<double>(x.size());
        sum_mean += mean;
        sum_max += most;
        ratio_sum += mean / most;
        const double imbalance = (most - mean) / mean;
        imbalance_sum += imbalance;
        if (b.imbalance_max_layer < 0 || imbalance > b.imbalance_max) {
            b.imbalance_max = imbalance;
            b.imbalance_max_layer = static_cast<int64_t>(l);
        }
        ++b.layers;
    }
    if (b.layers == 0) return b;
    b.balancedness = ratio_sum / static_cast<double>(b.layers);
    b.sum_mean_over_sum_max = sum_mean / sum_max;
    b.imbalance_mean = imbalance_sum / static_cast<double>(b.layers);
    return b;
}

json to_json(const LoadBalance& b) {
    return {{"layers", b.layers},
            {"balancedness", b.balancedness},
            {"sum_mean_over_sum_max", b.sum_mean_over_sum_max},
            {"imbalance_mean", b.imbalance_mean},
            {"imbalance_max", b.imbalance_max},
            {"definitions",
             {{"balancedness",
               "mean over layers of (mean load / max load) of the layer's units: SGLang's "
               "per-layer balancedness, averaged over layers (1 = even, 1/N = one unit of N busy)"},
              {"sum_mean_over_sum_max",
               "sum over layers of the mean load / sum over layers of the max load: vLLM "
               "EPLB's logged balancedness (avg_tokens / max_tokens)"},
              {"imbalance_mean", "mean over layers of (max load - mean load) / mean load (0 = even)"},
              {"imbalance_max", "the largest (max load - mean load) / mean load of one layer"}}}};
}

std::vector<double> rank_loads(const std::vector<int64_t>& tokens_per_expert,
                               const std::vector<std::vector<int32_t>>& ranks_of_expert, int64_t num_ranks) {
    std::vector<double> load(static_cast<size_t>(std::max<int64_t>(num_ranks, 0)), 0.0);
    for (size_t e = 0; e < tokens_per_expert.size() && e < ranks_of_expert.size(); ++e) {
        const auto& holders = ranks_of_expert[e];
        if (holders.empty()) continue;
        const double share = static_cast<double>(tokens_per_expert[e]) / static_cast<double>(holders.size());
        for (int32_t r : holders)
            if (r >= 0 && r < num_ranks) load[static_cast<size_t>(r)] += share;
    }
    return load;
}

json to_json(const ExpertLoad& l) {
    return json{{"source", "counted"},
                {"num_experts", l.num_experts},
                {"tokens_per_expert", l.tokens_per_expert},
                {"num_assignments", l.num_assignments},
                {"dropped", l.dropped},
                {"mean", l.mean},
                {"max", l.max},
                {keys::kMaxOverMean, l.max_over_mean},
                {"cv", l.cv},
                {"gini", l.gini},
                {"top3_share", l.top3_share},
                {"idle_experts", l.idle_experts},
                {"entropy_bits", l.entropy_bits},
                {"entropy_norm", l.entropy_norm}};
}

json to_json(const LoadWindows& w) {
    return json{{"source", "counted"},          {"window_tokens", w.window_tokens},
                {"start_token", w.start_token}, {"num_tokens", w.num_tokens},
                {"counts", w.counts},           {keys::kMaxOverMean, w.max_over_mean}};
}

json expert_load_layer(const MoeLayerSamples& s, int64_t num_experts, int64_t num_tokens, int64_t num_steps,
                       const std::string& times_source) {
    const int64_t E = num_experts;
    json l;
    if (s.ids.empty() && !s.counted.empty()) {
        // Routed by counts (the sim's statistical path): the load of the counts; windows and co-activation need ids.
        std::vector<int64_t> counts(static_cast<size_t>(E), 0);
        for (const MoeLayerSamples::CountedSteps& c : s.counted)
            for (size_t e = 0; e < counts.size() && e < c.tokens_per_expert.size(); ++e)
                counts[e] += c.tokens_per_expert[e] * c.steps;
        l = to_json(expert_load_from_counts(std::move(counts)));
        l.erase("source");
        l["layer"] = s.layer;
        l["num_tokens"] = num_tokens * s.counted_steps();
        l["capacity_dropped"] = s.backend_dropped;
        l["k"] = s.k;
    } else {
        const int64_t n_tok = s.k > 0 ? static_cast<int64_t>(s.ids.size()) / s.k : 0;
        l = to_json(expert_load(s.ids.data(), n_tok, s.k, E));
        l.erase("source");
        l["layer"] = s.layer;
        l["num_tokens"] = n_tok;
        l["capacity_dropped"] = s.backend_dropped;  // the backend's count; `dropped` also counts -1 ids of a trace
        l["k"] = s.k;
        const int64_t steps_per_window = std::max<int64_t>(1, (num_steps + 31) / 32);
        l["windows"] = to_json(load_windows(s.ids.data(), n_tok, s.k, E, steps_per_window * num_tokens));
        if (E <= kCoactivationMatrixMaxExperts) {
            const std::vector<int64_t> coact = coactivation_counts(s.ids.data(), n_tok, s.k, E);
            json cm = json::array();
            for (int64_t i = 0; i < E; ++i)
                cm.push_back(std::vector<int64_t>(coact.begin() + i * E, coact.begin() + (i + 1) * E));
            l["coactivation"] = cm;
        } else {
            json pairs = json::array();
            for (const ExpertPair& p : top_coactivation_pairs(s.ids.data(), n_tok, s.k, 256))
                pairs.push_back({{"experts", {p.a, p.b}}, {"count", p.count}});
            l["coactivation_top_pairs"] = pairs;
            l["coactivation_omitted"] = fmt::format(
                "{} experts: the E x E matrix is written up to {} experts; "
                "coactivation_top_pairs holds the 256 most frequent pairs",
                E, kCoactivationMatrixMaxExperts);
        }
    }
    l["expert_gemm_us"] = json::array();
    if (s.gemm_steps > 0) {
        std::vector<double> mean_us(s.expert_gemm_us.size());
        for (size_t e = 0; e < mean_us.size(); ++e)
            mean_us[e] = s.expert_gemm_us[e] / static_cast<double>(s.gemm_steps);
        l["expert_gemm_us"] = mean_us;
        l["expert_gemm_source"] = times_source;
    }
    return l;
}

}  // namespace moebench
