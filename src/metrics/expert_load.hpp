// SPDX-License-Identifier: Apache-2.0
// Expert-load statistics (counted): tokens per expert, imbalance, Gini, windows over the stream, co-activation.
// Pure functions shared by the run report and `moebench trace info`; definitions are in docs/trace-format.md.
#pragma once
#include "common/json_util.hpp"
#include "metrics/moe_samples.hpp"

#include <cstdint>
#include <vector>

namespace moebench {

/// Load of one layer. Every figure is `counted` (derived from the expert ids, no timing involved).
struct ExpertLoad {
    int64_t num_experts = 0;
    std::vector<int64_t> tokens_per_expert;  // [E]: (token, expert) assignments that reached each expert
    int64_t num_assignments = 0;             // sum of tokens_per_expert
    int64_t dropped = 0;                     // assignments that reached no expert (capacity drops, -1 ids)
    double mean = 0;                         // num_assignments / E
    int64_t max = 0;
    double max_over_mean = 0;  // 0 when nothing was assigned
    double cv = 0;             // population stdev / mean
    double gini = 0;           // sum_ij |x_i - x_j| / (2 E^2 mean): 0 = even, (E-1)/E = one expert
    double top3_share = 0;     // share of assignments taken by the 3 busiest experts
    int64_t idle_experts = 0;  // experts with no assignment
    double entropy_bits = 0;   // entropy of the load distribution, in bits
    double entropy_norm = 0;   // entropy_bits / log2(E): 1 = perfectly even
};

/// Statistics of a given count vector; `dropped` is carried through.
ExpertLoad expert_load_from_counts(std::vector<int64_t> tokens_per_expert, int64_t dropped = 0);

/// Counts ids in a row-major [num_tokens, k] array. Ids of -1 are counted in *num_missing; ids outside
/// [-1, num_experts) are an internal error (callers validate first).
std::vector<int64_t> count_tokens_per_expert(const int32_t* ids, int64_t num_tokens, int64_t k, int64_t num_experts,
                                             int64_t* num_missing = nullptr);

/// count_tokens_per_expert + expert_load_from_counts; -1 ids count as dropped.
ExpertLoad expert_load(const int32_t* ids, int64_t num_tokens, int64_t k, int64_t num_experts);

double gini_coefficient(const std::vector<int64_t>& counts);
double coefficient_of_variation(const std::vector<int64_t>& counts);

/// Load over successive windows of the stream (heatmap data: experts x time). The last window may be short.
struct LoadWindows {
    int64_t window_tokens = 0;
    std::vector<int64_t> start_token;          // [W]
    std::vector<int64_t> num_tokens;           // [W]
    std::vector<std::vector<int64_t>> counts;  // [W][E]
    std::vector<double> max_over_mean;         // [W]
};
LoadWindows load_windows(const int32_t* ids, int64_t num_tokens, int64_t k, int64_t num_experts, int64_t window_tokens);

/// Co-activation: entry [a * E + b] counts the tokens that chose both a and b (a != b; symmetric; diagonal 0).
std::vector<int64_t> coactivation_counts(const int32_t* ids, int64_t num_tokens, int64_t k, int64_t num_experts);

struct ExpertPair {
    int32_t a = 0, b = 0;  // a < b
    int64_t count = 0;
};
/// The n pairs chosen together by the most tokens, most frequent first; ties by (a, b) ascending. Counted from the
/// ids alone (O(T k^2), no E x E table), so any expert count is cheap.
std::vector<ExpertPair> top_coactivation_pairs(const int32_t* ids, int64_t num_tokens, int64_t k, int64_t n);

/// Largest expert count whose E x E co-activation matrix a report holds; above it the layer carries the top pairs
/// instead (a 20000-expert matrix would take gigabytes).
inline constexpr int64_t kCoactivationMatrixMaxExperts = 512;

/// The balance figures serving engines log, over the per-layer loads of some unit (the ranks of an expert-parallel
/// layout, or the experts themselves). Layers whose load is all zero are left out. Definitions (docs/report-schema.md,
/// "Balance"): with mean_l and max_l the mean and the largest load of layer l's units,
///   balancedness            = (1/L) sum_l mean_l / max_l           (SGLang's per-layer "balancedness", averaged)
///   sum_mean_over_sum_max   = sum_l mean_l / sum_l max_l            (vLLM EPLB's logged "balancedness")
///   imbalance_{mean,max}    = (max_l - mean_l) / mean_l, averaged over the layers and at the worst layer
/// 1, 1, 0 = perfectly even; a single busy unit of N gives 1/N, 1/N, N - 1.
struct LoadBalance {
    int64_t layers = 0;
    double balancedness = 0;
    double sum_mean_over_sum_max = 0;
    double imbalance_mean = 0;
    double imbalance_max = 0;
    int64_t imbalance_max_layer = -1;  // index into the given layers of the worst one
};
LoadBalance load_balance(const std::vector<std::vector<double>>& load_per_layer);
/// {"layers", "balancedness", "sum_mean_over_sum_max", "imbalance_mean", "imbalance_max", "definitions"}; the caller
/// adds source and unit.
json to_json(const LoadBalance& b);

/// A layer's load on each rank of an expert-parallel placement: the rank's experts' assignments, an expert held by
/// several ranks (replicas) split evenly over them.
std::vector<double> rank_loads(const std::vector<int64_t>& tokens_per_expert,
                               const std::vector<std::vector<int32_t>>& ranks_of_expert, int64_t num_ranks);

/// {"source":"counted", tokens_per_expert, max_over_mean, cv, gini, top3_share, idle_experts, dropped, ...}
json to_json(const ExpertLoad& load);
json to_json(const LoadWindows& windows);

/// One MoE layer of a run report's expert_load.per_layer: the load of the measured steps' ids, windows over the
/// stream (about 32, whole steps of `num_tokens`), co-activation, and per-expert GEMM times when the backend split
/// them (`times_source` labels them). Steps routed by counts without ids (MoeLayerSamples::counted) give the load of
/// their counts, without windows or co-activation.
json expert_load_layer(const MoeLayerSamples& s, int64_t num_experts, int64_t num_tokens, int64_t num_steps,
                       const std::string& times_source);

}  // namespace moebench
