// SPDX-License-Identifier: Apache-2.0
// `moebench offload`: a routing trace replayed through each MoE layer's expert cache (workload/expert_cache.hpp).
// The order: the trace's tokens in order (sequence by sequence, token by token; the caches carry over from one
// sequence to the next, as on a server), in each token the layers in order, in each layer the token's experts in
// selection order; a selection the trace lacks (-1) is skipped. A policy that prefetches is handed, after layer l of a
// token, the experts predicted for its layer l+1.
#pragma once
#include "workload/expert_cache.hpp"
#include "workload/trace.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace moebench {

/// Reuse distance of an access: tokens since this layer last selected the same expert (1 = the previous token).
/// Bucket b holds distances in (2^(b-1), 2^b] (bucket 0: exactly 1); first uses are counted apart.
inline constexpr int kReuseBuckets = 21;  // up to 2^20 tokens; farther ones go to the last bucket
std::string reuse_bucket_label(int b);    // "1", "2", "3-4", "5-8", ..., ">524288"

struct OffloadCounts {
    int64_t tokens = 0;            // tokens with at least one selection (per layer); the trace's tokens (total)
    int64_t accesses = 0;          // expert accesses (selections present)
    int64_t hits = 0;              // the expert was resident when accessed
    int64_t misses = 0;            // fetched on demand
    int64_t prefetch_fetches = 0;  // fetched ahead of use (policy prefetch): bytes too, not misses
    // Reuse distances of the accesses.
    std::vector<int64_t> reuse_buckets = std::vector<int64_t>(kReuseBuckets, 0);
    int64_t first_uses = 0;
    double reuse_median_tokens = 0;  // median over accesses with a previous use; 0 when none
    // The layer-to-layer predictor (policy prefetch, layers after the first): experts predicted, those the token then
    // selected, and the selections of the layers with a prediction.
    int64_t predicted = 0, predicted_used = 0, predictable_accesses = 0;

    double hit_rate() const { return accesses > 0 ? static_cast<double>(hits) / static_cast<double>(accesses) : 0.0; }
    int64_t fetches() const { return misses + prefetch_fetches; }
    double precision() const { return predicted > 0 ? double(predicted_used) / double(predicted) : 0.0; }
    double recall() const {
        return predictable_accesses > 0 ? double(predicted_used) / double(predictable_accesses) : 0.0;
    }
};

struct OffloadReplay {
    std::string policy;
    int64_t resident = 0;            // N asked for
    int64_t resident_effective = 0;  // min(N, E)
    int64_t num_experts = 0, top_k = 0;
    std::vector<OffloadCounts> layers;  // per trace layer slot
    OffloadCounts total;                // summed over layers (tokens: the trace's tokens)
};

/// The predictor's table for `num_layers` - 1 layer pairs of `num_experts` squared counts (policy prefetch): refused
/// (ConfigError naming `field`) above this many bytes.
inline constexpr double kMaxPredictorBytes = 2.0 * 1024 * 1024 * 1024;

/// Replays `trace` with `resident` experts per layer under `policy`. resident >= 1 (checked by the caller).
OffloadReplay replay_offload(const RoutingTrace& trace, int64_t resident, const OffloadPolicy& policy);

/// The expert caches of a run's steps (the sim prices their misses, the cpu backend copies them): one online cache
/// per MoE layer slot, carried from step to step. A step's experts of a layer go through it once each, in the order
/// its tokens first select them (a batch needs each of its experts once; at batch 1 this is the trace replay's
/// order). Policies that read the future (offline) or prefetch are refused by the caller.
class StepExpertCaches {
public:
    StepExpertCaches(int64_t num_slots, int64_t num_experts, int64_t resident, const OffloadPolicy& policy);
    /// The experts of `ids` (num_tokens x k, -1 left out) through slot `slot`'s cache: the ones fetched, in order.
    std::vector<int32_t> access(int64_t slot, const std::vector<int32_t>& ids);
    /// Counts over every access so far (all slots).
    int64_t accesses() const { return accesses_; }
    int64_t hits() const { return hits_; }
    int64_t resident() const { return resident_; }

private:
    std::vector<std::unique_ptr<ExpertCache>> caches_;
    int64_t num_experts_ = 0, resident_ = 0, accesses_ = 0, hits_ = 0;
};

/// Each layer slot's accesses in replay order (the ids of its tokens' selections in order, -1 left out).
std::vector<int32_t> layer_accesses(const RoutingTrace& trace, int64_t layer);

}  // namespace moebench
