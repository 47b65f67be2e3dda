// SPDX-License-Identifier: Apache-2.0
// Routing statistics: switch rate between consecutive tokens, and router entropy / confidence from logits.
#include "metrics/routing_stats.hpp"

#include "common/error.hpp"
#include "metrics/timing_stats.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace moebench {

namespace {

/// Sorted, de-duplicated valid ids of one token.
std::vector<int32_t> expert_set(const int32_t* row, int64_t k) {
    std::vector<int32_t> s;
    for (int64_t j = 0; j < k; ++j)
        if (row[j] >= 0) s.push_back(row[j]);
    std::sort(s.begin(), s.end());
    s.erase(std::unique(s.begin(), s.end()), s.end());
    return s;
}

}  // namespace

SwitchStats switch_stats(const int32_t* ids, int64_t num_tokens, int64_t k, const std::vector<int64_t>& seq_starts) {
    SwitchStats s;
    if (k <= 0) return s;
    size_t next_start = 0;
    double overlap_sum = 0;
    std::vector<int32_t> prev;
    for (int64_t t = 0; t < num_tokens; ++t) {
        bool starts_sequence = (t == 0);
        while (next_start < seq_starts.size() && seq_starts[next_start] <= t) {
            if (seq_starts[next_start] == t) starts_sequence = true;
            ++next_start;
        }
        std::vector<int32_t> cur = expert_set(ids + t * k, k);
        if (!starts_sequence) {
            std::vector<int32_t> common;
            std::set_intersection(prev.begin(), prev.end(), cur.begin(), cur.end(), std::back_inserter(common));
            ++s.num_pairs;
            if (cur != prev) ++s.num_switches;
            overlap_sum += static_cast<double>(common.size()) / static_cast<double>(k);
        }
        prev = std::move(cur);
    }
    if (s.num_pairs > 0) {
        s.switch_rate = static_cast<double>(s.num_switches) / static_cast<double>(s.num_pairs);
        s.mean_overlap = overlap_sum / static_cast<double>(s.num_pairs);
    }
    return s;
}

RoutingCacheStats routing_cache_stats(const int32_t* ids, int64_t num_tokens, int64_t k,
                                      const std::vector<int64_t>& seq_starts, int64_t window) {
    RoutingCacheStats s;
    s.window = window;
    if (k <= 0 || window <= 0) return s;
    std::map<std::vector<int32_t>, int64_t> last_seen;  // expert set -> its latest token in this sequence
    size_t next_start = 0;
    for (int64_t t = 0; t < num_tokens; ++t) {
        bool starts_sequence = (t == 0);
        while (next_start < seq_starts.size() && seq_starts[next_start] <= t) {
            if (seq_starts[next_start] == t) starts_sequence = true;
            ++next_start;
        }
        if (starts_sequence) last_seen.clear();
        if (std::any_of(ids + t * k, ids + (t + 1) * k, [](int32_t e) { return e < 0; }))
            continue;  // missing: no lookup
        std::vector<int32_t> cur = expert_set(ids + t * k, k);
        ++s.lookups;
        auto it = last_seen.find(cur);
        if (it != last_seen.end() && t - it->second <= window) ++s.hits;
        last_seen[std::move(cur)] = t;
    }
    if (s.lookups > 0) s.hit_rate = static_cast<double>(s.hits) / static_cast<double>(s.lookups);
    return s;
}

json to_json(const RoutingCacheStats& s) {
    return {{"source", "counted"},
            {"window", s.window},
            {"lookups", s.lookups},
            {"hits", s.hits},
            {"hit_rate", s.hit_rate},
            {"basis",
             "share of tokens whose expert set repeats one of the previous `window` tokens of its sequence "
             "(the first token of a sequence misses; tokens with a missing selection are not looked up)"}};
}

RouterStats router_stats(const float* logits, int64_t num_tokens, int64_t num_experts) {
    RouterStats r;
    r.num_tokens = num_tokens;
    r.num_experts = num_experts;
    if (num_tokens <= 0 || num_experts <= 0) return r;
    std::vector<double> entropies;
    entropies.reserve(static_cast<size_t>(num_tokens));
    double top1_sum = 0, range_sum = 0;
    r.logit_min = logits[0];
    r.logit_max = logits[0];
    for (int64_t t = 0; t < num_tokens; ++t) {
        const float* row = logits + t * num_experts;
        double mx = row[0], mn = row[0];
        for (int64_t e = 1; e < num_experts; ++e) {
            mx = std::max(mx, static_cast<double>(row[e]));
            mn = std::min(mn, static_cast<double>(row[e]));
        }
        double z = 0;
        for (int64_t e = 0; e < num_experts; ++e) z += std::exp(static_cast<double>(row[e]) - mx);
        double h = 0;
        for (int64_t e = 0; e < num_experts; ++e) {
            double p = std::exp(static_cast<double>(row[e]) - mx) / z;
            if (p > 0) h -= p * std::log2(p);
        }
        entropies.push_back(h);
        top1_sum += 1.0 / z;  // the largest probability is exp(0) / z
        range_sum += mx - mn;
        r.logit_min = std::min(r.logit_min, mn);
        r.logit_max = std::max(r.logit_max, mx);
    }
    double n = static_cast<double>(num_tokens);
    double h_sum = 0;
    for (double h : entropies) h_sum += h;
    r.entropy_bits_mean = h_sum / n;
    std::sort(entropies.begin(), entropies.end());
    r.entropy_bits_p95 = percentile_sorted(entropies, 95);  // linear interpolation, as the timing percentiles
    r.entropy_norm_mean = num_experts > 1 ? r.entropy_bits_mean / std::log2(static_cast<double>(num_experts)) : 0.0;
    r.top1_prob_mean = top1_sum / n;
    r.logit_range_mean = range_sum / n;
    return r;
}

json to_json(const SwitchStats& s) {
    return json{{"source", "counted"},
                {"num_pairs", s.num_pairs},
                {"num_switches", s.num_switches},
                {"switch_rate", s.switch_rate},
                {"mean_overlap", s.mean_overlap}};
}

json to_json(const RouterStats& r) {
    return json{{"source", "counted"},
                {"num_tokens", r.num_tokens},
                {"num_experts", r.num_experts},
                {"entropy_bits_mean", r.entropy_bits_mean},
                {"entropy_bits_p95", r.entropy_bits_p95},
                {"entropy_norm_mean", r.entropy_norm_mean},
                {"top1_prob_mean", r.top1_prob_mean},
                {"logit_min", r.logit_min},
                {"logit_max", r.logit_max},
                {"logit_range_mean", r.logit_range_mean}};
}

json routing_layer(const MoeLayerSamples& s, int64_t num_experts, const StepShape& shape) {
    const int64_t n_tok = s.k > 0 ? static_cast<int64_t>(s.ids.size()) / s.k : 0;
    // Stream order (step after step, row after row); prefill sequences are contiguous runs of seq_len tokens.
    std::vector<int64_t> seq_starts;
    if (shape.mode == Mode::prefill)
        for (int64_t t = 0; t < n_tok; t += shape.seq_len) seq_starts.push_back(t);
    const SwitchStats sw = switch_stats(s.ids.data(), n_tok, s.k, seq_starts);
    json r = {{"layer", s.layer},
              {"switch_rate", sw.switch_rate},
              {"switch_pairs", sw.num_pairs},
              {"mean_overlap", sw.mean_overlap}};
    if (s.logit_tokens > 0) {
        const RouterStats rs = router_stats(s.logits.data(), s.logit_tokens, num_experts);
        r["entropy_bits_mean"] = rs.entropy_bits_mean;
        r["entropy_bits_p95"] = rs.entropy_bits_p95;
        r["entropy_normalized"] = rs.entropy_norm_mean;
        r["top1_prob_mean"] = rs.top1_prob_mean;
        r["logit_min"] = rs.logit_min;
        r["logit_max"] = rs.logit_max;
        r["logit_range_mean"] = rs.logit_range_mean;
        r["logit_tokens"] = s.logit_tokens;
    }
    return r;
}

}  // namespace moebench
