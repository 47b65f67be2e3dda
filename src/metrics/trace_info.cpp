// SPDX-License-Identifier: Apache-2.0
#include "metrics/trace_info.hpp"

#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "common/host_memory.hpp"
#include "metrics/expert_load.hpp"
#include "metrics/routing_stats.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace moebench {

namespace {

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// A window keeps one count per expert for every window of every layer: refuse a window so small that they would not
// fit (a window of 1 on a long trace of many experts is tens of GB).
void check_window_memory(const RoutingTrace& t, int64_t window) {
    const auto need_bytes = [&](int64_t w) {
        const double windows = std::ceil(static_cast<double>(t.num_tokens) / static_cast<double>(w));
        return static_cast<double>(t.num_layers) * windows * (8.0 * static_cast<double>(t.num_experts) + 64.0);
    };
    const int64_t avail_bytes = mem_available_bytes();
    const double budget_bytes = avail_bytes > 0 ? 0.5 * static_cast<double>(avail_bytes) : 16.0 * (1 << 30);
    if (need_bytes(window) <= budget_bytes) return;
    int64_t fits = window;
    while (fits < t.num_tokens && need_bytes(fits) > budget_bytes) fits *= 2;
    config_error(
        flag_of("window"),
        fmt::format("windows of {} tokens over {} layers x {} tokens x {} experts need about {:.1f} "
                    "GiB of counts, more than half of the memory available",
                    window, t.num_layers, t.num_tokens, t.num_experts, need_bytes(window) / (1024.0 * 1024 * 1024)),
        std::to_string(window), fmt::format("use a larger window, e.g. {} {}", flag_of("window"), fits));
}

}  // namespace

void check_trace_info_request(const TraceInfoRequest& r) {
    if (r.window < 0)
        config_error(flag_of("window"), "must be >= 0", std::to_string(r.window), "e.g. " + flag_of("window") + " 256");
    // (a negative count reached std::vector as a huge size: internal error before)
    if (r.top_pairs < 0)
        config_error(flag_of("top_pairs"), "must be >= 0", std::to_string(r.top_pairs),
                     "e.g. " + flag_of("top_pairs") + " 3");
    if (r.cache_window < 0 || r.cache_window > (int64_t{1} << 40))
        config_error(flag_of("cache_window"), "must be from 0 (off) to 2^40 tokens", std::to_string(r.cache_window),
                     "e.g. " + flag_of("cache_window") + " 16 (the default)");
}

json trace_info_document(const RoutingTrace& t, const TraceInfoRequest& r) {
    check_trace_info_request(r);
    if (r.window > 0) check_window_memory(t, r.window);
    // Rows are labelled by model layer when the trace says which (as run reports are), else by MoE layer slot.
    const std::vector<int64_t> model_layer = model_layers_of(t);
    std::vector<double> mom, switch_rates, cache_rates;  // max/mean load, switch and routing-cache hit rate per layer
    json layers = json::array();
    for (int64_t l = 0; l < t.num_layers; ++l) {
        const int32_t* ids = t.layer_ids(l);
        const ExpertLoad load = expert_load(ids, t.num_tokens, t.top_k, t.num_experts);
        const SwitchStats sw = switch_stats(ids, t.num_tokens, t.top_k, t.seq_starts);
        json pairs = json::array();
        for (const auto& p : top_coactivation_pairs(ids, t.num_tokens, t.top_k, r.top_pairs))
            pairs.push_back({{"experts", {p.a, p.b}}, {"count", p.count}});
        json lj = {{"layer", l}, {"load", to_json(load)}, {"switch", to_json(sw)}, {"coactivation_top_pairs", pairs}};
        if (r.cache_window > 0) {
            const RoutingCacheStats cache =
                routing_cache_stats(ids, t.num_tokens, t.top_k, t.seq_starts, r.cache_window);
            lj["routing_cache"] = to_json(cache);
            cache_rates.push_back(cache.hit_rate);
        }
        if (!model_layer.empty()) lj["model_layer"] = model_layer[static_cast<size_t>(l)];
        if (r.window > 0) lj["windows"] = to_json(load_windows(ids, t.num_tokens, t.top_k, t.num_experts, r.window));
        layers.push_back(lj);
        mom.push_back(load.max_over_mean);
        switch_rates.push_back(sw.switch_rate);
    }
    return {{"schema", "moebench.trace_info/1"},
            {"file", r.file},
            {"model", t.model},
            {"source", t.source},
            {"num_layers", t.num_layers},
            {"num_tokens", t.num_tokens},
            {"top_k", t.top_k},
            {"num_experts", t.num_experts},
            {"num_sequences", static_cast<int64_t>(t.seq_starts.size())},
            {"missing_selections", t.num_missing()},
            {"has_weights", !t.topk_weights.empty()},
            {"metadata", t.extra_metadata},
            {"summary",
             {{"source", "counted"},
              {"max_over_mean_min", *std::min_element(mom.begin(), mom.end())},
              {"max_over_mean_median", median(mom)},
              {"max_over_mean_max", *std::max_element(mom.begin(), mom.end())},
              {"switch_rate_mean", std::accumulate(switch_rates.begin(), switch_rates.end(), 0.0) /
                                       static_cast<double>(switch_rates.size())},
              {"routing_cache_window", r.cache_window},
              {"routing_cache_hit_rate_mean", r.cache_window > 0
                                                  ? json(std::accumulate(cache_rates.begin(), cache_rates.end(), 0.0) /
                                                         static_cast<double>(cache_rates.size()))
                                                  : json(nullptr)}}},
            {"layers", layers}};
}

}  // namespace moebench
