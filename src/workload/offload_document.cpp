// SPDX-License-Identifier: Apache-2.0
// The moebench.offload/1 document (offload_document.hpp): the replays' counts as JSON; its views are report/'s.
#include "workload/offload_document.hpp"

#include "common/error.hpp"

#include <algorithm>

namespace moebench {

namespace {

json counts_json(const OffloadCounts& c, double expert_bytes, bool prefetches) {
    const double tokens = static_cast<double>(std::max<int64_t>(c.tokens, 1));
    json reuse_buckets = json::array();
    for (int b = 0; b < kReuseBuckets; ++b)
        if (c.reuse_buckets[static_cast<size_t>(b)] > 0)
            reuse_buckets.push_back(
                {{"tokens", reuse_bucket_label(b)}, {"count", c.reuse_buckets[static_cast<size_t>(b)]}});
    json j = {{"hit_rate", c.hit_rate()},
              {"tokens", c.tokens},
              {"accesses", c.accesses},
              {"hits", c.hits},
              {"misses", c.misses},
              {"misses_per_token", static_cast<double>(c.misses) / tokens},
              {"fetches_per_token", static_cast<double>(c.fetches()) / tokens},
              {"bytes_fetched_per_token",
               expert_bytes > 0 ? json(static_cast<double>(c.fetches()) * expert_bytes / tokens) : json(nullptr)},
              {"reuse_distance",
               {{"unit", "tokens"},
                {"median", c.reuse_median_tokens},
                {"first_uses", c.first_uses},
                {"buckets", reuse_buckets}}}};
    if (prefetches)
        j["prefetch"] = {{"fetches", c.prefetch_fetches},
                         {"predicted", c.predicted},
                         {"predicted_used", c.predicted_used},
                         {"precision", c.precision()},
                         {"recall", c.recall()}};
    return j;
}

json point_json(const OffloadReplay& r, double expert_bytes) {
    const bool prefetches = offload_policy(r.policy, "policy").prefetches;
    json j = {{"resident", r.resident},
              {"resident_effective", r.resident_effective},
              {"resident_fraction", static_cast<double>(r.resident_effective) / static_cast<double>(r.num_experts)}};
    j.update(counts_json(r.total, expert_bytes, prefetches));
    json layers = json::array();
    for (size_t l = 0; l < r.layers.size(); ++l) {
        json row = {{"layer", static_cast<int64_t>(l)}};
        row.update(counts_json(r.layers[l], expert_bytes, prefetches));
        layers.push_back(row);
    }
    j["per_layer"] = layers;
    return j;
}

}  // namespace

json offload_document(const OffloadContext& ctx, const std::vector<OffloadReplay>& replays) {
    MOEBENCH_CHECK(!replays.empty(), "offload document without a replay");
    const OffloadPolicy& policy = offload_policy(replays.front().policy, "policy");
    json doc = {{"schema", "moebench.offload/1"},
                {"source", "counted"},
                {"trace", ctx.trace},
                {"model", ctx.model.empty() ? json(nullptr) : json(ctx.model)},
                {"policy", policy.name},
                {"policy_description", policy.description},
                {"expert_dtype", ctx.expert_dtype},
                {"expert_bytes", ctx.expert_bytes > 0 ? json(ctx.expert_bytes) : json(nullptr)},
                {"num_layers", ctx.num_layers},
                {"num_tokens", ctx.num_tokens},
                {"num_sequences", ctx.num_sequences},
                {"num_experts", replays.front().num_experts},
                {"top_k", replays.front().top_k},
                {"definitions",
                 {{"hit_rate",
                   "accesses that found the expert resident / expert accesses (a token's experts in "
                   "selection order, each layer its own cache)"},
                  {"misses_per_token",
                   "experts fetched on demand per token (per layer: of that layer; overall: of "
                   "all layers together)"},
                  {"fetches_per_token", "misses plus experts fetched ahead (prefetch), per token"},
                  {"bytes_fetched_per_token", "fetches_per_token x expert_bytes (null without a model)"},
                  {"reuse_distance", "tokens since the same layer last selected the same expert"},
                  {"start", "every policy starts with the layer's N most used experts of the trace resident"}}}};
    if (replays.size() == 1) {
        doc.update(point_json(replays.front(), ctx.expert_bytes));
    } else {
        json points = json::array();
        for (const OffloadReplay& r : replays) points.push_back(point_json(r, ctx.expert_bytes));
        doc["points"] = points;
    }
    return doc;
}

}  // namespace moebench
