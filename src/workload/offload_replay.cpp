// SPDX-License-Identifier: Apache-2.0
// The offload replay (offload_replay.hpp): caches per layer, reuse distances, the prefetch predictor.
#include "workload/offload_replay.hpp"

#include "common/error.hpp"
#include "common/flag_names.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace moebench {

std::string reuse_bucket_label(int b) {
    if (b == 0) return "1";
    if (b == 1) return "2";
    if (b == kReuseBuckets - 1) return fmt::format(">{}", int64_t{1} << (b - 1));
    return fmt::format("{}-{}", (int64_t{1} << (b - 1)) + 1, int64_t{1} << b);
}

namespace {

int reuse_bucket(int64_t distance) {
    int b = 0;
    while (b < kReuseBuckets - 1 && (int64_t{1} << b) < distance) ++b;
    return b;
}

// Layer l+1's experts predicted from layer l's choice: the co-occurrence of the two layers' choices over the tokens
// replayed so far (learnt after each token's layer l+1, never ahead of it); the top-k experts of layer l+1 by the
// summed co-occurrence with the token's layer-l experts, ties the lowest id, only those seen with them at least once.
class LayerPairPredictor {
public:
    LayerPairPredictor(int64_t num_experts, int64_t top_k)
        : E_(num_experts), k_(top_k), counts_(static_cast<size_t>(num_experts * num_experts), 0) {}
    std::vector<int32_t> predict(const int32_t* ids_l) const {
        std::vector<int64_t> score(static_cast<size_t>(E_), 0);
        for (int64_t j = 0; j < k_; ++j) {
            if (ids_l[j] < 0) continue;
            const int32_t* row = counts_.data() + static_cast<size_t>(ids_l[j]) * static_cast<size_t>(E_);
            for (int64_t b = 0; b < E_; ++b) score[static_cast<size_t>(b)] += row[b];
        }
        std::vector<int32_t> order(static_cast<size_t>(E_));
        std::iota(order.begin(), order.end(), 0);
        const auto top = static_cast<size_t>(std::min(k_, E_));
        std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(top), order.end(),
                          [&](int32_t a, int32_t b) {
                              const int64_t sa = score[static_cast<size_t>(a)], sb = score[static_cast<size_t>(b)];
                              return sa != sb ? sa > sb : a < b;
                          });
        order.resize(top);
        order.erase(
            std::remove_if(order.begin(), order.end(), [&](int32_t e) { return score[static_cast<size_t>(e)] == 0; }),
            order.end());
        return order;
    }
    void learn(const int32_t* ids_l, const int32_t* ids_next) {
        for (int64_t a = 0; a < k_; ++a)
            for (int64_t b = 0; b < k_; ++b)
                if (ids_l[a] >= 0 && ids_next[b] >= 0)
                    ++counts_[static_cast<size_t>(ids_l[a]) * static_cast<size_t>(E_) +
                              static_cast<size_t>(ids_next[b])];
    }

private:
    int64_t E_, k_;
    std::vector<int32_t> counts_;
};

void add_counts(OffloadCounts& into, const OffloadCounts& c) {
    into.accesses += c.accesses;
    into.hits += c.hits;
    into.misses += c.misses;
    into.prefetch_fetches += c.prefetch_fetches;
    for (int b = 0; b < kReuseBuckets; ++b)
        into.reuse_buckets[static_cast<size_t>(b)] += c.reuse_buckets[static_cast<size_t>(b)];
    into.first_uses += c.first_uses;
    into.predicted += c.predicted;
    into.predicted_used += c.predicted_used;
    into.predictable_accesses += c.predictable_accesses;
}

// The median of a histogram of exact distances (index = distance); 0 when empty. Lower median for an even count.
double median_of(const std::vector<int64_t>& by_distance) {
    const int64_t n = std::accumulate(by_distance.begin(), by_distance.end(), int64_t{0});
    if (n == 0) return 0;
    int64_t seen = 0;
    for (size_t d = 0; d < by_distance.size(); ++d) {
        seen += by_distance[d];
        if (2 * seen >= n) return static_cast<double>(d);
    }
    return 0;
}

}  // namespace

StepExpertCaches::StepExpertCaches(int64_t num_slots, int64_t num_experts, int64_t resident,
                                   const OffloadPolicy& policy)
    : num_experts_(num_experts), resident_(std::min(resident, num_experts)) {
    MOEBENCH_CHECK(!policy.offline && !policy.prefetches, "step caches: policy {} is not a plain online one",
                   policy.name);
    ExpertCacheInput in;  // no accesses known ahead: the cache starts with experts 0..N-1
    in.num_experts = num_experts;
    in.capacity = resident_;
    for (int64_t s = 0; s < num_slots; ++s) caches_.push_back(policy.make(in));
}

std::vector<int32_t> StepExpertCaches::access(int64_t slot, const std::vector<int32_t>& ids) {
    std::vector<char> seen(static_cast<size_t>(num_experts_), 0);
    std::vector<int32_t> fetched;
    ExpertCache& cache = *caches_[static_cast<size_t>(slot)];
    for (int32_t e : ids) {
        if (e < 0 || seen[static_cast<size_t>(e)]) continue;
        seen[static_cast<size_t>(e)] = 1;
        ++accesses_;
        if (cache.access(e))
            ++hits_;
        else
            fetched.push_back(e);
    }
    return fetched;
}

std::vector<int32_t> layer_accesses(const RoutingTrace& trace, int64_t layer) {
    std::vector<int32_t> out;
    out.reserve(static_cast<size_t>(trace.num_tokens * trace.top_k));
    const int32_t* ids = trace.layer_ids(layer);
    for (int64_t i = 0; i < trace.num_tokens * trace.top_k; ++i)
        if (ids[i] >= 0) out.push_back(ids[i]);
    return out;
}

OffloadReplay replay_offload(const RoutingTrace& trace, int64_t resident, const OffloadPolicy& policy) {
    MOEBENCH_CHECK(resident >= 1, "offload replay needs at least one resident expert");
    const int64_t L = trace.num_layers, T = trace.num_tokens, k = trace.top_k, E = trace.num_experts;
    OffloadReplay r;
    r.policy = policy.name;
    r.resident = resident;
    r.resident_effective = std::min(resident, E);
    r.num_experts = E;
    r.top_k = k;
    r.layers.assign(static_cast<size_t>(L), OffloadCounts{});

    std::vector<std::unique_ptr<ExpertCache>> caches;
    for (int64_t l = 0; l < L; ++l) {
        ExpertCacheInput in;
        in.num_experts = E;
        in.capacity = r.resident_effective;
        in.accesses = layer_accesses(trace, l);
        caches.push_back(policy.make(in));
    }
    std::vector<LayerPairPredictor> predictors;
    if (policy.prefetches && L > 1) {
        const double bytes = double(L - 1) * double(E) * double(E) * 4.0;
        if (bytes > kMaxPredictorBytes)
            config_error(flag_of("policy"),
                         fmt::format("prefetch's predictor needs {:.1f} GiB for {} layers of {} experts",
                                     bytes / (1024.0 * 1024 * 1024), L, E),
                         policy.name, "use lru, or a trace of fewer layers");
        predictors.assign(static_cast<size_t>(L - 1), LayerPairPredictor(E, k));
    }
    // Per layer: the token that last selected each expert; exact reuse distances for the medians.
    std::vector<std::vector<int64_t>> last_use(static_cast<size_t>(L),
                                               std::vector<int64_t>(static_cast<size_t>(E), -1));
    std::vector<std::vector<int64_t>> by_distance(static_cast<size_t>(L));
    std::vector<int64_t> all_by_distance;
    std::vector<std::vector<int32_t>> predicted(static_cast<size_t>(L));  // for this token, by layer

    for (int64_t t = 0; t < T; ++t) {
        for (int64_t l = 0; l < L; ++l) {
            OffloadCounts& c = r.layers[static_cast<size_t>(l)];
            ExpertCache& cache = *caches[static_cast<size_t>(l)];
            const int32_t* ids = trace.layer_ids(l) + t * k;
            bool any = false;
            for (int64_t j = 0; j < k; ++j) {
                const int32_t e = ids[j];
                if (e < 0) continue;
                any = true;
                ++c.accesses;
                (cache.access(e) ? c.hits : c.misses) += 1;
                int64_t& last = last_use[static_cast<size_t>(l)][static_cast<size_t>(e)];
                if (last < 0) {
                    ++c.first_uses;
                } else {
                    const int64_t d = t - last;
                    ++c.reuse_buckets[static_cast<size_t>(reuse_bucket(d))];
                    auto& hist = by_distance[static_cast<size_t>(l)];
                    if (hist.size() <= static_cast<size_t>(d)) hist.resize(static_cast<size_t>(d) + 1, 0);
                    ++hist[static_cast<size_t>(d)];
                }
                last = t;
            }
            if (any) ++c.tokens;
            if (predictors.empty()) continue;
            // The prediction made for this layer (from layer l-1) against what the token chose; then learn from it.
            if (l > 0) {
                std::vector<int32_t>& pred = predicted[static_cast<size_t>(l)];
                for (int64_t j = 0; j < k; ++j)
                    if (ids[j] >= 0) ++c.predictable_accesses;
                c.predicted += static_cast<int64_t>(pred.size());
                for (int32_t p : pred)
                    if (std::find(ids, ids + k, p) != ids + k) ++c.predicted_used;
                pred.clear();
                predictors[static_cast<size_t>(l - 1)].learn(trace.layer_ids(l - 1) + t * k, ids);
            }
            if (l + 1 < L) {
                std::vector<int32_t> pred = predictors[static_cast<size_t>(l)].predict(ids);
                OffloadCounts& next = r.layers[static_cast<size_t>(l + 1)];
                // The first prediction last: it ends the most recently used.
                for (auto it = pred.rbegin(); it != pred.rend(); ++it)
                    if (caches[static_cast<size_t>(l + 1)]->prefetch(*it)) ++next.prefetch_fetches;
                predicted[static_cast<size_t>(l + 1)] = std::move(pred);
            }
        }
    }
    for (int64_t l = 0; l < L; ++l) {
        OffloadCounts& c = r.layers[static_cast<size_t>(l)];
        const auto& hist = by_distance[static_cast<size_t>(l)];
        c.reuse_median_tokens = median_of(hist);
        if (all_by_distance.size() < hist.size()) all_by_distance.resize(hist.size(), 0);
        for (size_t d = 0; d < hist.size(); ++d) all_by_distance[d] += hist[d];
        add_counts(r.total, c);
    }
    r.total.tokens = T;
    r.total.reuse_median_tokens = median_of(all_by_distance);
    return r;
}

}  // namespace moebench
