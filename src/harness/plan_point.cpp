// SPDX-License-Identifier: Apache-2.0
// The plan document: the model's counted parameters and FLOPs, the memory plan per GPU and the decode floor
// (model/), on a hardware profile and a layout; the layout chosen when none was asked for and one GPU is too small.
#include "harness/plan_point.hpp"

#include "common/document_context.hpp"
#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "common/human_units.hpp"
#include "config/hardware.hpp"
#include "config/model_config.hpp"
#include "model/accounting.hpp"
#include "model/decode_floor.hpp"
#include "model/memory_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>

namespace moebench {

namespace {

int64_t round_bytes(double b) { return int64_t(std::llround(b)); }

struct Plan {
    ModelConfig model;
    HardwareProfile hw;
    PlanInput in;
    ParamCounts params;
    FlopsPerToken flops;
    MemoryPlan mem;
    DecodeFloor floor;
    std::string explanation;
    std::string layout_note;  // set when the layout was chosen automatically
};

// Two or three sentences, with the model's own numbers, on why "% of parameters" and "% of FLOPs" per token differ.
std::string explain(const Plan& p) {
    const ParamCounts& pc = p.params;
    double total = double(pc.total), active = double(pc.active);
    double dense_flops = 2.0 * total;
    double emb = double(pc.active_by_component[int(Component::embedding)]);
    std::string s = fmt::format(
        "Per token {} uses {} of its {} parameters ({}), but spends {} per token, {} of the {} (2 x parameters) a "
        "dense "
        "model of the same size would. ",
        p.model.name, human_count(active), human_count(total), percent(active / total), human_flops(p.flops.total),
        percent(p.flops.total / dense_flops), human_flops(dense_flops));
    s += fmt::format(
        "The two differ because the input embedding ({} parameters, {} of the active ones) is a table lookup that "
        "costs "
        "no FLOPs, while attention over the {}-token context adds {} per token ({} of its FLOPs) that no parameter "
        "accounts for.",
        human_count(emb), percent(emb / active), p.in.context, human_flops(p.flops.attention_context),
        percent(p.flops.attention_context / p.flops.total));
    if (p.model.is_moe_model()) {
        double routed = double(pc.by_component[int(Component::routed_experts)]);
        s += fmt::format(" Routed experts hold {} of all parameters, and a token uses {} of the {} in each MoE layer.",
                         percent(routed / total), p.model.moe.top_k, p.model.moe.num_experts);
    }
    return s;
}

json component_json_int(const std::array<int64_t, kNumComponents>& a) {
    json j = json::object();
    for (int c = 0; c < kNumComponents; ++c) j[std::string(kComponentNames[c])] = a[c];
    return j;
}
json component_json_double(const std::array<double, kNumComponents>& a, bool as_bytes) {
    json j = json::object();
    for (int c = 0; c < kNumComponents; ++c) {
        if (as_bytes)
            j[std::string(kComponentNames[c])] = round_bytes(a[c]);
        else
            j[std::string(kComponentNames[c])] = a[c];
    }
    return j;
}

// Expert offload: what stays on the GPU and what in host memory; null without offload.
json offload_json(const Plan& p) {
    const MemoryPlan& mem = p.mem;
    if (mem.resident_experts == 0) return nullptr;
    const double one_expert = mem.fetch_buffer_bytes / double(mem.fetch_buffer_experts);
    return {
        {"resident_experts", mem.resident_experts},
        {"num_experts", p.model.moe.num_experts},
        {"resident_bytes", round_bytes(double(mem.resident_experts) * double(p.model.num_moe_layers()) * one_expert)},
        {"fetch_buffer_experts", mem.fetch_buffer_experts},
        {"fetch_buffer_bytes", round_bytes(mem.fetch_buffer_bytes)},
        {"host_bytes", round_bytes(mem.host_expert_bytes)},
        {"expert_bytes", round_bytes(one_expert)},
        {"assumptions",
         "N routed experts of every MoE layer resident on the GPU (weights_by_component_bytes."
         "routed_experts holds them and the fetch buffers); fetch buffers for one layer's top-k "
         "experts, double-buffered (2 x top-k experts); the other E - N experts of every MoE layer "
         "in host memory (host_bytes). What the misses cost: moebench offload, and run with " +
             flag_of("resident_experts") + " (expert_fetch)"}};
}

// The memory plan per GPU (modeled) and what it assumes.
json memory_json(const Plan& p) {
    const MemoryPlan& mem = p.mem;
    return {
        {"source", "modeled"},
        {"assumptions",
         "GPUs = max(ep, tp); attention, dense MLP, shared experts, embedding and LM head split over tp; routed "
         "experts "
         "over all GPUs (ep ranks x expert-tp), E + redundant_experts expert copies per MoE layer; norms and router "
         "replicated. Quantised dtypes apply to linear layers; embedding, head, norms and router stay bf16 (fp32 "
         "with " +
             flag_of("dtype") +
             " fp32); block scales counted (fp8-block 1 fp32 per 128x128, nvfp4 1 fp8 per 16, mxfp4 1 "
             "e8m0 per 32, int4 1 bf16 per 128; per-tensor scales not). KV: GQA heads split over tp, MLA latent "
             "replicated; "
             "batch split over dp = GPUs/tp replicas."},
        {"capacity_bytes", round_bytes(mem.capacity_bytes)},
        {"per_gpu",
         {{"weights_bytes", round_bytes(mem.weights_bytes)},
          {"weights_by_component_bytes", component_json_double(mem.weights_by_component_bytes, true)},
          {"kv_cache_bytes", round_bytes(mem.kv_cache_bytes)},
          {"activation_bytes", round_bytes(mem.activation_bytes)},
          {"activation_only_bytes", round_bytes(mem.activation_only_bytes)},
          {"workspace_bytes", round_bytes(mem.workspace_bytes)},
          {"free_bytes", round_bytes(mem.free_bytes)},
          {"sequences", mem.sequences_per_gpu}}},
        {"kv_bytes_per_token", mem.kv_bytes_per_token},
        {"kv_bytes_per_token_per_gpu", mem.kv_bytes_per_token_per_gpu},
        {"kv_bytes_per_sequence_per_gpu", mem.kv_bytes_per_sequence_per_gpu},
        {"linear_state_bytes_per_sequence_per_gpu", mem.linear_state_bytes_per_sequence_per_gpu},
        {"activation_tokens", mem.activation_tokens},
        {"fits", mem.fits},
        {"max_concurrent_sequences", mem.max_concurrent_sequences},
        {"expert_offload", offload_json(p)}};
}

// The decode floor (modeled, a lower bound) and what it assumes.
json decode_floor_json(const Plan& p) {
    const auto& m = p.model;
    const DecodeFloor& f = p.floor;
    return {
        {"source", "modeled"},
        {"assumptions",
         "Uniform routing, top-k without replacement per token; expected unique experts E*(1-(1-k/E)^B) per MoE layer; "
         "each GPU reads its non-expert weights, its share of the touched experts and the KV of its sequences once; "
         "work spread evenly over GPUs, each part's FLOPs at its format's peak (experts, dense weights, LM head and "
         "router in high precision, attention over the context in the activations'); no communication, activation "
         "traffic or launch overhead (a lower bound). "
         "MTP modules excluded."},
        {"batch", f.batch},
        {"context", f.context},
        {"num_experts", m.moe.num_experts},
        {"top_k", m.moe.top_k},
        {"unique_experts_per_layer", f.unique_experts_per_layer},
        {"bytes_per_step", f.bytes_per_step},
        {"flops_per_step", f.flops_per_step},
        {"bytes_per_gpu", f.bytes_per_gpu},
        {"flops_per_gpu", f.flops_per_gpu},
        {"weight_bytes_per_gpu", f.weight_bytes_per_gpu},
        {"expert_bytes_per_gpu", f.expert_bytes_per_gpu},
        {"kv_bytes_per_gpu", f.kv_bytes_per_gpu},
        {"mem_bw_bytes_per_s", f.mem_bw_bytes_per_s},
        {"peak_flops", f.peak_flops},
        {"peak_flops_by_format", f.peak_flops_by_format},
        {"memory_time_us", f.memory_time_us},
        {"compute_time_us", f.compute_time_us},
        {"time_us", f.time_us},
        {"bound", f.bound}};
}

json plan_to_json(const Plan& p) {
    const auto& m = p.model;
    const Layout& par = p.in.layout;
    json j;
    j["schema"] = "moebench.plan/1";
    j["tool"] = tool_block();
    j["model"] = {{"name", m.name},
                  {"family", m.family},
                  {"source", m.source},
                  {"unconfirmed", m.unconfirmed},
                  {"notes", m.notes},
                  {"num_layers", m.num_layers},
                  {"num_moe_layers", m.num_moe_layers()},
                  {"num_linear_attention_layers", m.num_linear_attention_layers()},
                  {"num_experts", m.moe.num_experts},
                  {"top_k", m.moe.top_k},
                  {"attention", to_string(m.attn.kind)},
                  {"num_mtp_layers", m.num_mtp_layers}};
    j["hardware"] = {{"name", p.hw.name}, {"display_name", p.hw.display_name}, {"source", p.hw.source}};
    j["inputs"] = {{"dtype", to_string(p.in.precision.dense_weights)},
                   {"expert_dtype", to_string(p.in.precision.expert_weights)},
                   {"kv_dtype", to_string(p.in.precision.kv_cache)},
                   {"ep", par.moe_ep},
                   {"tp", par.attn_tp},
                   {"num_gpus", par.num_gpus()},
                   {"dp", par.attn_dp},
                   {"expert_tp", par.moe_tp},
                   {"redundant_experts", par.redundant_experts},
                   {"batch", p.in.batch},
                   {"context", p.in.context},
                   {"include_mtp", p.in.include_mtp},
                   {"layout_auto", !p.layout_note.empty()},
                   {"layout_note", p.layout_note}};
    const ParamCounts& pc = p.params;
    j["params"] = {{"source", "counted"},
                   {"total", pc.total},
                   {"active", pc.active},
                   {"active_excluding_embedding", pc.active_excluding_embedding},
                   {"total_excluding_embedding", pc.total_excluding_embedding},
                   {"active_fraction", double(pc.active) / double(pc.total)},
                   {"by_component", component_json_int(pc.by_component)},
                   {"active_by_component", component_json_int(pc.active_by_component)}};
    double dense_flops = 2.0 * double(pc.total);
    j["flops_per_token"] = {{"source", "counted"},
                            {"context", p.in.context},
                            {"total", p.flops.total},
                            {"attention_context", p.flops.attention_context},
                            {"by_component", component_json_double(p.flops.by_component, false)},
                            {"dense_equivalent", dense_flops},
                            {"fraction_of_dense_equivalent", p.flops.total / dense_flops}};
    j["sparsity"] = {{"source", "counted"},
                     {"active_param_fraction", double(pc.active) / double(pc.total)},
                     {"flops_fraction_of_dense_equivalent", p.flops.total / dense_flops},
                     {"explanation", p.explanation}};
    j["memory"] = memory_json(p);
    j["decode_floor"] = decode_floor_json(p);
    return j;
}

// The largest value in [1, hi] for which `fits` holds (monotone: true up to some point), or 0 when none.
int64_t largest_fitting(int64_t hi, const std::function<bool(int64_t)>& fits) {
    if (!fits(1)) return 0;
    int64_t lo = 1;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo + 1) / 2;
        if (fits(mid))
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

// The user asked for this batch and context: when the KV cache does not fit beside the weights, that is the answer,
// exit 2, with the largest batch and context that do fit. Without them the plan is accounting at default values
// and only marks the shortfall.
void require_asked_fit(const Plan& p) {
    if (p.mem.fits) return;
    const auto fits_with = [&](int64_t batch, int64_t context) {
        PlanInput in = p.in;
        in.batch = batch;
        in.context = context;
        return plan_memory(p.model, p.hw, in).fits;
    };
    const int64_t max_batch = largest_fitting(p.in.batch, [&](int64_t b) { return fits_with(b, p.in.context); });
    const int64_t max_context = largest_fitting(p.in.context, [&](int64_t c) { return fits_with(p.in.batch, c); });
    std::string fix;
    const std::string batch = flag_of("batch"), context = flag_of("context");
    if (max_batch > 0) fix += fmt::format("at context {} at most {} {} fits; ", p.in.context, batch, max_batch);
    if (max_context > 0) fix += fmt::format("at batch {} at most {} {} fits; ", p.in.batch, context, max_context);
    fix += fmt::format("or add GPUs ({}/{})", flag_of("ep"), flag_of("tp"));
    if (p.in.precision.kv_cache != DType::fp8) fix += ", or use " + flag_of("kv_dtype") + " fp8";
    config_error(
        batch + "/" + context,
        fmt::format("does not fit: the KV cache needs {} per GPU, {} is left after the weights and activations "
                    "on {} ({} GPU{})",
                    human_bytes(p.mem.kv_cache_bytes),
                    human_bytes(std::max(0.0, p.mem.free_bytes + p.mem.kv_cache_bytes)), p.hw.name,
                    p.in.layout.num_gpus(), p.in.layout.num_gpus() > 1 ? "s" : ""),
        fmt::format("{} {} {} {}", batch, p.in.batch, context, p.in.context), fix);
}

// The request's number formats, layout and load, checked and resolved (plan's own: bf16 when "auto").
PlanInput plan_input(const PlanRequest& r) {
    check_precision_request(r.precision);
    PlanInput in;
    in.precision = resolve_precision(r.precision, uniform_precision(DType::bf16));
    in.layout = resolve_layout(r.layout);
    in.batch = r.batch;
    in.context = r.context;
    in.include_mtp = r.include_mtp;
    const std::string batch = flag_of("batch"), context = flag_of("context");
    if (in.batch < 1)
        config_error(batch, "must be at least 1", std::to_string(in.batch),
                     "use the number of concurrent sequences, e.g. " + batch + " 1");
    if (in.context < 1)
        config_error(context, "must be at least 1", std::to_string(in.context),
                     "use the KV length in tokens, e.g. " + context + " 4096");
    // Bounds that keep every count in range (ceil(batch / dp) and int64 byte counts overflowed near 2^63):
    // 2^30 sequences and 2^40 tokens of context are far beyond any deployment.
    if (in.batch > (int64_t{1} << 30))
        config_error(batch, "is beyond 2^30 concurrent sequences", std::to_string(in.batch),
                     "use a realistic batch, e.g. " + batch + " 256");
    if (in.context > (int64_t{1} << 40))
        config_error(context, "is beyond 2^40 tokens", std::to_string(in.context),
                     "use a realistic context, e.g. " + context + " 131072");
    return in;
}

}  // namespace

void check_plan_request(const PlanRequest& r) { (void)plan_input(r); }

json plan_document(const PlanRequest& r) {
    Plan p;
    p.in = plan_input(r);
    p.model = load_model(r.model);
    p.hw = load_hardware(r.hardware);
    check_layout_for_model(p.model, p.in.layout);

    AccountingOptions opt;
    opt.include_mtp = p.in.include_mtp;
    p.params = count_params(p.model, opt);
    if (p.params.total <= 0) config_error(flag_of("model"), "has no parameters", r.model, "check the model config");
    p.flops = flops_per_token(p.model, p.in.context, opt);
    p.mem = plan_memory(p.model, p.hw, p.in);
    if (!p.mem.weights_fit && !r.layout_given) {
        // No layout asked for: use the smallest one that fits (so the accounting is always shown), and say so.
        MinLayout ml = min_layout_for_weights(p.model, p.hw, p.in);
        if (ml.found) {
            p.layout_note = fmt::format(
                "layout chosen automatically: {} {} weights do not fit on one {}; the fewest GPUs that fit is {} "
                "({} {} {} {})",
                p.model.name, to_string(p.in.precision.dense_weights), p.hw.name, ml.layout.num_gpus(), flag_of("ep"),
                ml.layout.moe_ep, flag_of("tp"), ml.layout.attn_tp);
            p.in.layout = ml.layout;
            p.mem = plan_memory(p.model, p.hw, p.in);
        }
    }
    require_weights_fit(p.model, p.hw, p.in, p.mem);
    // The JSON holds byte counts as int64: refuse a batch x context whose KV cache cannot be counted that way.
    if (!(p.mem.kv_cache_bytes < 4e18))
        config_error(flag_of("batch") + "/" + flag_of("context"),
                     "make a KV cache beyond 2^61 bytes per GPU, too large to count",
                     fmt::format("{} {} {} {}", flag_of("batch"), p.in.batch, flag_of("context"), p.in.context),
                     "use a smaller batch or context");
    if (r.fit_asked) require_asked_fit(p);
    p.floor = decode_floor(p.model, p.hw, p.in);
    p.explanation = explain(p);
    return plan_to_json(p);
}

}  // namespace moebench
