// SPDX-License-Identifier: Apache-2.0
#include "config/layout_request.hpp"

#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "config/model_config.hpp"
#include "config/run_fields.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace moebench {

namespace {

std::string label(const std::string& key) { return run_field_label("", key); }

// "1, 2, 4, 8": the divisors of n up to `limit` values, for a fix.
std::string divisors(int64_t n) {
    std::string s;
    for (int64_t d = 1; d <= n; ++d)
        if (n % d == 0) s += (s.empty() ? "" : ", ") + std::to_string(d);
    return s;
}

void factor_range(const char* key, int64_t v, int64_t lo) {
    if (v < lo)
        config_error(label(key), lo == 0 ? "must be >= 0 (0 = derived from the other sizes)" : "must be >= 1",
                     std::to_string(v), std::string("use a GPU count such as 8") + (lo == 0 ? ", or 0" : ""));
    if (v > kMaxLayoutGpus)
        config_error(label(key), "is beyond 65536 GPUs", std::to_string(v), "use the GPU count of the deployment");
}

}  // namespace

Layout resolve_layout(const LayoutRequest& r) {
    factor_range("ep", r.ep, 1);
    for (const auto& [key, v] : {std::pair<const char*, int64_t>{"tp", r.tp},
                                 {"attention_dp", r.attention_dp},
                                 {"moe_tp", r.moe_tp},
                                 {"moe_ep", r.moe_ep}})
        factor_range(key, v, 0);
    if (r.moe_ep > 0 && r.ep > 1 && r.moe_ep != r.ep)
        config_error(label("ep"), "and " + label("moe_ep") + " both set the expert-parallel size, differently",
                     fmt::format("{} {} {} {}", flag_of("ep"), r.ep, flag_of("moe_ep"), r.moe_ep), "give one of them");
    Layout l;
    if (r.a2a == "dedup")
        l.a2a = A2aMode::dedup;
    else if (r.a2a == "per-expert")
        l.a2a = A2aMode::per_expert;
    else
        config_error(label("a2a"), "is not a dispatch mode", r.a2a,
                     "use dedup (a token once per destination rank) or per-expert (a row per assignment)");
    l.placement = r.placement;
    l.attn_tp = r.tp > 0 ? r.tp : 1;
    l.moe_ep = r.moe_ep > 0 ? r.moe_ep : r.ep;
    const int64_t attention_side = l.attn_tp * (r.attention_dp > 0 ? r.attention_dp : 1);
    const int64_t expert_side = (r.moe_tp > 0 ? r.moe_tp : 1) * l.moe_ep;
    const int64_t gpus = std::max(attention_side, expert_side);
    if (gpus > kMaxLayoutGpus)
        config_error(label("tp"), "and the other layout sizes make more than 65536 GPUs",
                     fmt::format("{} x {}", attention_side, expert_side), "use the GPU count of the deployment");
    const std::string given =
        fmt::format("tp {}, attention_dp {}, moe_tp {}, moe_ep {}", r.tp, r.attention_dp, r.moe_tp, l.moe_ep);
    if (gpus % l.attn_tp != 0 || gpus % l.moe_ep != 0)
        config_error(
            label(gpus % l.attn_tp != 0 ? "tp" : "moe_ep"),
            fmt::format("cannot split the {} GPUs the layout needs (each size divides the GPU count)", gpus), given,
            fmt::format("use sizes that divide {} (e.g. {} {} {} {})", gpus, flag_of("tp"), gpus, flag_of("ep"), gpus));
    l.attn_dp = r.attention_dp > 0 ? r.attention_dp : gpus / l.attn_tp;
    l.moe_tp = r.moe_tp > 0 ? r.moe_tp : gpus / l.moe_ep;
    if (l.attn_tp * l.attn_dp != l.moe_tp * l.moe_ep)
        config_error(label(r.attention_dp > 0 ? "attention_dp" : "moe_tp"),
                     fmt::format("attention runs on tp x attention_dp = {} GPUs, the experts on moe_tp x moe_ep = {}: "
                                 "both must be the same GPUs",
                                 l.attn_tp * l.attn_dp, l.moe_tp * l.moe_ep),
                     given, "leave attention_dp or moe_tp out (derived), or make the products equal");
    // Redundant experts: replicas of hot experts in extra slots, the same number on every expert-parallel rank.
    const std::string redundant = label("redundant_experts");
    if (r.redundant_experts < 0)
        config_error(redundant, "must be >= 0 (0 = no replicas)", std::to_string(r.redundant_experts),
                     "use 0, or N such that the experts plus N share the expert-parallel ranks evenly");
    if (r.redundant_experts > kMaxRedundantExperts)
        config_error(redundant, fmt::format("is beyond {} expert slots", kMaxRedundantExperts),
                     std::to_string(r.redundant_experts), "use a few per rank (DeepSeek-V3: 32 over 32 ranks)");
    if (r.redundant_experts > 0 && l.moe_ep == 1)
        config_error(redundant, "replicates experts on other expert-parallel ranks; this layout has one",
                     std::to_string(r.redundant_experts),
                     fmt::format("add {} N, or drop {}", flag_of("ep"), flag_of("redundant_experts")));
    l.redundant_experts = r.redundant_experts;
    // Expert offload: one GPU's cache of resident experts (the policy's name is checked where its table is known).
    if (r.resident_experts < 0)
        config_error(label("resident_experts"), "must be >= 0 (0 = every expert resident)",
                     std::to_string(r.resident_experts), "give the experts per MoE layer kept on the GPU, e.g. 6");
    if (r.resident_experts > kMaxRedundantExperts)
        config_error(label("resident_experts"), fmt::format("is beyond {} experts", kMaxRedundantExperts),
                     std::to_string(r.resident_experts), "give at most the model's routed experts per layer");
    if (!(r.offload_ratio >= 0 && r.offload_ratio < 1))
        config_error(label("offload_ratio"), "must be in [0, 1) (the share of routed experts kept in host memory)",
                     fmt::format("{}", r.offload_ratio), "e.g. " + flag_of("offload_ratio") + " 0.3");
    if (r.resident_experts > 0 && r.offload_ratio > 0)
        config_error(label("offload_ratio"), "and " + flag_of("resident_experts") + " say the same thing twice",
                     fmt::format("{} and {}", r.offload_ratio, r.resident_experts), "give one of them");
    if ((r.resident_experts > 0 || r.offload_ratio > 0) && gpus > 1)
        config_error(label(r.resident_experts > 0 ? "resident_experts" : "offload_ratio"),
                     "offloads experts of one GPU; this layout has " + std::to_string(gpus),
                     r.resident_experts > 0 ? std::to_string(r.resident_experts) : fmt::format("{}", r.offload_ratio),
                     fmt::format("drop {}/{}, or drop the offload", flag_of("ep"), flag_of("tp")));
    l.resident_experts = r.resident_experts;
    l.offload_ratio = r.offload_ratio;
    l.offload_policy = r.offload_policy;
    return l;
}

LayoutRequest layout_request_of(const Layout& l) {
    LayoutRequest r;
    r.ep = l.moe_ep;
    r.tp = l.attn_tp;
    r.attention_dp = l.attn_dp;
    r.moe_tp = l.moe_tp;
    r.moe_ep = l.moe_ep;
    r.a2a = std::string(to_string(l.a2a));
    r.placement = l.placement;
    r.redundant_experts = l.redundant_experts;
    r.resident_experts = l.resident_experts;
    r.offload_ratio = l.offload_ratio;
    r.offload_policy = l.offload_policy;
    return r;
}

void check_layout_for_model(const ModelConfig& m, const Layout& l) {
    // The shorthand (--ep N: attention DP N, experts EP N) is named as the user most likely typed it.
    const std::string ep_key = l.attn_tp == 1 && l.moe_tp == 1 && l.attn_dp == l.moe_ep ? "ep" : "moe_ep";
    if (!m.is_moe_model() && l.moe_ep > 1)
        config_error(label(ep_key), "expert parallelism needs a MoE model", std::to_string(l.moe_ep),
                     m.name + " has no routed experts; use " + flag_of("tp") + " for a dense model");
    // Every expert-parallel rank holds as many expert slots: (E + redundant experts) / moe_ep, the short ranks of the
    // contiguous base placement filled by replicas where moe_ep does not divide E (DeepSeek-V3's decode: 256 + 32
    // slots on 144 GPUs).
    const int64_t E = m.moe.num_experts, R = l.redundant_experts, ep = l.moe_ep;
    if (m.is_moe_model() && ep > E)
        config_error(label(ep_key), fmt::format("is more ranks than the {} routed experts of {}", E, m.name),
                     std::to_string(ep), "use one of: " + divisors(E));
    if (m.is_moe_model() && (E + R) % ep != 0) {
        const int64_t up = R + ep - (E + R) % ep, down = R - (E + R) % ep;  // the nearest R that share evenly
        if (R == 0)
            config_error(label(ep_key), fmt::format("does not divide the {} routed experts of {}", E, m.name),
                         std::to_string(ep),
                         fmt::format("use one of: {}; or keep it with {} {} ({} + {} = {} slots, {} per rank)",
                                     divisors(E), flag_of("redundant_experts"), up, E, up, E + up, (E + up) / ep));
        config_error(
            label("redundant_experts"),
            fmt::format("makes {} + {} = {} expert slots, which {} expert-parallel ranks cannot hold evenly "
                        "(every rank holds as many)",
                        E, R, E + R, ep),
            std::to_string(R),
            down > 0 || (down == 0 && E % ep == 0) ? fmt::format("use {} or {}", down, up) : fmt::format("use {}", up));
    }
    if (m.is_moe_model() && l.redundant_experts > m.moe.num_experts * (l.moe_ep - 1))
        config_error(
            label("redundant_experts"),
            fmt::format("exceeds a copy of each of the {} experts of {} on every other rank ({})", m.moe.num_experts,
                        m.name, m.moe.num_experts * (l.moe_ep - 1)),
            std::to_string(l.redundant_experts),
            fmt::format("use at most {} (DeepSeek-V3 serves 256 experts with 32)", m.moe.num_experts * (l.moe_ep - 1)));
    if (m.attn.num_heads > 0 && m.attn.num_heads % l.attn_tp != 0)
        config_error(label("tp"), fmt::format("does not divide the {} attention heads of {}", m.attn.num_heads, m.name),
                     std::to_string(l.attn_tp), "use one of: " + divisors(m.attn.num_heads));
    if (m.is_moe_model() && l.moe_tp > 1 && m.moe.expert_intermediate_size % l.moe_tp != 0)
        config_error(label("moe_tp"),
                     fmt::format("does not divide the expert width {} of {}", m.moe.expert_intermediate_size, m.name),
                     std::to_string(l.moe_tp), "use a size that divides the expert width, or more expert parallelism");
}

}  // namespace moebench
