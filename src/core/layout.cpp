// SPDX-License-Identifier: Apache-2.0
#include "core/layout.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace moebench {

std::string_view to_string(A2aMode m) { return m == A2aMode::dedup ? "dedup" : "per-expert"; }

std::string_view to_string(MoeExchange e) {
    switch (e) {
        case MoeExchange::local: return "local";
        case MoeExchange::all_to_all: return "all_to_all";
        case MoeExchange::gather: return "gather";
    }
    return "?";
}

std::string Layout::describe() const {
    if (num_gpus() == 1) return "1 GPU";
    std::string attn = attn_tp > 1 && attn_dp > 1 ? fmt::format("attention TP {} x DP {}", attn_tp, attn_dp)
                       : attn_tp > 1              ? fmt::format("attention TP {}", attn_tp)
                                                  : fmt::format("attention DP {}", attn_dp);
    std::string moe = moe_tp > 1 && moe_ep > 1 ? fmt::format("experts TP {} x EP {}", moe_tp, moe_ep)
                      : moe_tp > 1             ? fmt::format("experts TP {}", moe_tp)
                                               : fmt::format("experts EP {}", moe_ep);
    const std::string redundant = redundant_experts > 0 ? fmt::format(", {} redundant experts", redundant_experts) : "";
    return fmt::format("{} GPUs: {}, {}{}", num_gpus(), attn, moe, redundant);
}

int64_t Layout::resident_of(int64_t num_experts) const {
    int64_t n = resident_experts;
    if (n == 0 && offload_ratio > 0)
        n = std::max<int64_t>(1, num_experts - std::llround(offload_ratio * static_cast<double>(num_experts)));
    return n > 0 && n < num_experts ? n : 0;
}

Layout ep_layout(int64_t ep) {
    Layout l;
    l.attn_dp = ep;
    l.moe_ep = ep;
    return l;
}

}  // namespace moebench
