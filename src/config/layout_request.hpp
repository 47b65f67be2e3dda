// SPDX-License-Identifier: Apache-2.0
// What a run, sweep or plan asks of the parallel layout (run fields ep, tp, attention_dp, moe_tp, moe_ep, a2a,
// placement, redundant_experts), resolved into the one Layout value (core/layout.hpp) and checked against a model: the
// only place where divisibility and the layout's rules are checked. Errors name the run fields (run_field_label:
// "tp (--tp)").
#pragma once
#include "core/layout.hpp"

#include <cstdint>
#include <string>

namespace moebench {

struct ModelConfig;

/// 0 = not given (derived). `ep` is the shorthand of today's runs: expert EP ep with attention DP ep.
struct LayoutRequest {
    int64_t ep = 1;            // experts over ep ranks (and attention data-parallel over them unless tp is given)
    int64_t tp = 0;            // attention tensor parallel (also dense layers, shared experts, embedding, LM head)
    int64_t attention_dp = 0;  // attention data-parallel replicas
    int64_t moe_tp = 0;        // each routed expert split over moe_tp GPUs
    int64_t moe_ep = 0;        // routed experts spread over moe_ep GPUs (whole experts); 0: ep
    std::string a2a = "dedup";
    std::string placement;
    int64_t redundant_experts = 0;  // extra expert slots per MoE layer (replicas of the hottest experts)
    int64_t resident_experts = 0;   // expert offload: experts per MoE layer on the GPU (0 = all), or
    double offload_ratio = 0;       // the share offloaded to host memory (0 = none); not both
    std::string offload_policy = "lru";
    bool operator==(const LayoutRequest&) const = default;
};

/// The request as a Layout: GPUs = max(tp x attention_dp, moe_tp x moe_ep) over the given factors; attention_dp and
/// moe_tp, when not given, take what is left (GPUs / tp, GPUs / moe_ep). ConfigError naming the field when a factor
/// is out of range, the two sides cannot cover the same GPUs, ep and moe_ep disagree, a2a is unknown, or
/// redundant_experts is negative or given without expert parallelism. Whether the experts plus redundant_experts
/// share the expert-parallel ranks evenly needs the model: check_layout_for_model.
Layout resolve_layout(const LayoutRequest& r);
/// The resolved layout written back as a request whose every factor is given (what a report records, so that a
/// re-run resolves to the same layout).
LayoutRequest layout_request_of(const Layout& l);
/// The layout against the model: the expert-parallel ranks share the routed experts plus the redundant ones evenly
/// (and are 1 on a dense model),
/// the attention tensor-parallel size divides the attention heads, the expert tensor-parallel size divides each
/// expert's width, the redundant experts are at most a copy of every expert on every other rank. ConfigError naming
/// the field, with the sizes that would.
void check_layout_for_model(const ModelConfig& m, const Layout& l);

/// Upper bound of any layout factor and of the GPU count.
inline constexpr int64_t kMaxLayoutGpus = 65536;
/// Upper bound of redundant_experts (expert slots are counted in int32).
inline constexpr int64_t kMaxRedundantExperts = 1 << 30;

}  // namespace moebench
