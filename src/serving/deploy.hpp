// SPDX-License-Identifier: Apache-2.0
// `moebench deploy`'s documents (moebench.deploy/1, docs/deploy.md): one layout's serving figures from the steady
// state of its sim-priced steps, with its memory fit, cost and energy; the search over layouts, concurrencies and
// hardware with its Pareto frontier; the disaggregated prefill and decode pools.
#pragma once
#include "common/json_util.hpp"
#include "config/run_config.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace moebench {

inline constexpr const char* kDeploySchema = "moebench.deploy/1";
inline constexpr int64_t kDefaultMaxPrefillTokens = 8192;

struct DeployRequest {
    RunConfig base;  // model, hardware, layout, precision, routing, seed, allow_no_fit (run's fields)
    int64_t isl = 0;
    int64_t osl = 0;
    int64_t concurrency = 0;
    int64_t max_prefill_tokens = kDefaultMaxPrefillTokens;
    std::optional<double> price_per_gpu_hour;  // none: the profile's
    double request_overhead_ms = 0;  // added to every TTFT: the server's own time per request (HTTP, tokenizing,
                                     // scheduling, the first token's sampling and streaming), which no step holds
};

/// One layout (kind "point"). A point whose memory does not fit is refused (ConfigError naming what fits) unless
/// base.allow_no_fit.
json deploy_point(const DeployRequest& r);

struct SearchRequest {
    DeployRequest base;  // the layout of base.base is not used
    std::vector<int64_t> gpus;
    std::vector<std::string> hardware;
    std::vector<int64_t> concurrency;
    double ttft_ms_limit = 0;  // 0 = no limit
    double tpot_ms_limit = 0;
};
/// Every layout of each GPU count the layout rules accept for the model, at each concurrency that fits, on each
/// profile (kind "search"): points, the Pareto frontier per hardware, the best point under the limits.
json deploy_search(const SearchRequest& r);

/// The layouts of `gpus` GPUs (tp x attention_dp attention, moe_tp x moe_ep experts over the same GPUs) that the
/// one layout validation accepts for the model.
std::vector<LayoutRequest> candidate_layouts(const ModelConfig& model, int64_t gpus);

/// Indices of the points on the Pareto frontier of (x, y), both larger-is-better: no other point is at least as
/// good on both and better on one. Ordered by x ascending; ties of equal points keep the first.
std::vector<size_t> pareto_frontier(const std::vector<std::pair<double, double>>& points);

struct DisaggRequest {
    DeployRequest base;  // isl, osl, concurrency (of the decode pool), budget, price, model, hardware, formats
    int64_t prefill_gpus = 0, decode_gpus = 0;
    LayoutRequest prefill_layout, decode_layout;
};
/// Disaggregated serving (kind "disagg"): TTFT from the prefill pool plus the KV transfer, TPOT from the decode pool.
json deploy_disagg(const DisaggRequest& r);

/// A compact layout "tp=8,ep=8" (keys ep, tp, attention_dp, moe_tp, moe_ep, redundant_experts) as a request;
/// ConfigError naming `flag` for an unknown key or a value that is no positive whole number.
LayoutRequest parse_compact_layout(const std::string& text, const std::string& flag);

}  // namespace moebench
