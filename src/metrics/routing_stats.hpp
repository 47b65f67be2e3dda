// SPDX-License-Identifier: Apache-2.0
// Routing statistics: switch rate between consecutive tokens of a sequence (counted) and router entropy,
// top-1 probability and logit range from router logits. Definitions are in docs/trace-format.md.
#pragma once
#include "common/json_util.hpp"
#include "core/step.hpp"
#include "metrics/moe_samples.hpp"

#include <cstdint>
#include <vector>

namespace moebench {

/// Consecutive token pairs (t-1, t) inside one sequence; a pair "switches" when the two tokens' expert sets
/// differ (compared as sets, -1 entries ignored). overlap = |A ∩ B| / k averaged over pairs.
struct SwitchStats {
    int64_t num_pairs = 0;
    int64_t num_switches = 0;
    double switch_rate = 0;   // num_switches / num_pairs (0 when there are no pairs)
    double mean_overlap = 0;  // 1 = the same experts every token
};

/// `seq_starts`: first token of each sequence (sorted; empty = one sequence). ids row-major [num_tokens, k].
SwitchStats switch_stats(const int32_t* ids, int64_t num_tokens, int64_t k, const std::vector<int64_t>& seq_starts);

/// How often a token's expert set (unordered) repeats the set of one of the previous `window` tokens of its sequence:
/// the hit rate a cache of routing decisions keyed by the expert set, holding the last `window` tokens, could have.
/// Every token with a complete selection (no -1) is a lookup; the first token of a sequence always misses.
struct RoutingCacheStats {
    int64_t window = 0;
    int64_t lookups = 0;
    int64_t hits = 0;
    double hit_rate = 0;  // hits / lookups (0 when there are none)
};
RoutingCacheStats routing_cache_stats(const int32_t* ids, int64_t num_tokens, int64_t k,
                                      const std::vector<int64_t>& seq_starts, int64_t window);
json to_json(const RoutingCacheStats& s);

/// From router logits [num_tokens, E]: p = softmax(logits) per token (for every family, sigmoid ones included).
struct RouterStats {
    int64_t num_tokens = 0;
    int64_t num_experts = 0;
    double entropy_bits_mean = 0;  // H(p) = -sum p log2 p
    double entropy_bits_p95 = 0;   // 95th percentile over tokens (linear interpolation, as numpy's default)
    double entropy_norm_mean = 0;  // entropy_bits_mean / log2(E)
    double top1_prob_mean = 0;     // mean of max_e p_e
    double logit_min = 0;          // over all tokens and experts
    double logit_max = 0;
    double logit_range_mean = 0;  // mean over tokens of (max - min) logit
};
RouterStats router_stats(const float* logits, int64_t num_tokens, int64_t num_experts);

json to_json(const SwitchStats& s);
json to_json(const RouterStats& r);

/// One MoE layer of a run report's routing.per_layer: switches in stream order (prefill: within each sequence of
/// `shape`) and, where logits were kept, the router statistics.
json routing_layer(const MoeLayerSamples& s, int64_t num_experts, const StepShape& shape);

}  // namespace moebench
