// SPDX-License-Identifier: Apache-2.0
// `moebench plan`: the accounting of one model on one hardware profile (params, FLOPs, memory per GPU, decode floor),
// as a pasteable text table or the stable JSON document "moebench.plan/1" (docs/plan-schema.md).
#include "build_info.hpp"
#include "cli/commands.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/file_identity.hpp"
#include "common/paths.hpp"
#include "config/hardware.hpp"
#include "config/model_config.hpp"
#include "model/accounting.hpp"
#include "model/decode_floor.hpp"
#include "model/memory_plan.hpp"
#include "cli/flag_util.hpp"
#include "config/layout_request.hpp"
#include "config/precision_request.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <cmath>
#include <iostream>
#include <memory>

namespace moebench::cli {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The flags that are not run config fields (those come from config/run_fields.hpp, as in `run`).
struct PlanArgs {
    bool include_mtp = false;
    std::string format = "text";
    std::string out;
};

// The run config fields plan reads: the model, the hardware, the load, the layout and the number formats.
bool plan_field(const RunField& f) {
    static const char* const kKeys[] = {"model", "hardware", "batch", "context", "ep", "tp", "attention_dp",
                                        "moe_tp", "moe_ep", "redundant_experts", "dtype", "expert_dtype",
                                        "kv_dtype"};
    return std::any_of(std::begin(kKeys), std::end(kKeys), [&](const char* k) { return f.key == k; });
}

std::string human_count(double v) {
    double a = std::fabs(v);
    if (a >= 1e12) return fmt::format("{:.3f} T", v / 1e12);
    if (a >= 1e9) return fmt::format("{:.2f} B", v / 1e9);
    if (a >= 1e6) return fmt::format("{:.2f} M", v / 1e6);
    if (a >= 1e3) return fmt::format("{:.2f} K", v / 1e3);
    return fmt::format("{:.0f}", v);
}
std::string human_bytes(double v) {
    double a = std::fabs(v);
    if (a >= 1024.0 * kGiB) return fmt::format("{:.2f} TiB", v / (1024.0 * kGiB));
    if (a >= kGiB) return fmt::format("{:.2f} GiB", v / kGiB);
    if (a >= 1024.0 * 1024.0) return fmt::format("{:.2f} MiB", v / (1024.0 * 1024.0));
    if (a >= 1024.0) return fmt::format("{:.2f} KiB", v / 1024.0);
    return fmt::format("{:.0f} B", v);
}
std::string human_flops(double v) {
    double a = std::fabs(v);
    if (a >= 1e12) return fmt::format("{:.2f} TFLOP", v / 1e12);
    if (a >= 1e9) return fmt::format("{:.2f} GFLOP", v / 1e9);
    if (a >= 1e6) return fmt::format("{:.2f} MFLOP", v / 1e6);
    return fmt::format("{:.0f} FLOP", v);
}
std::string human_time_us(double us) {
    if (us >= 1e6) return fmt::format("{:.2f} s", us / 1e6);
    if (us >= 1e3) return fmt::format("{:.2f} ms", us / 1e3);
    return fmt::format("{:.1f} µs", us);
}
std::string pct(double fraction) { return fmt::format("{:.1f}%", 100.0 * fraction); }
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
        "Per token {} uses {} of its {} parameters ({}), but spends {} per token, {} of the {} (2 x parameters) a dense "
        "model of the same size would. ",
        p.model.name, human_count(active), human_count(total), pct(active / total), human_flops(p.flops.total),
        pct(p.flops.total / dense_flops), human_flops(dense_flops));
    s += fmt::format(
        "The two differ because the input embedding ({} parameters, {} of the active ones) is a table lookup that costs "
        "no FLOPs, while attention over the {}-token context adds {} per token ({} of its FLOPs) that no parameter "
        "accounts for.",
        human_count(emb), pct(emb / active), p.in.context, human_flops(p.flops.attention_context),
        pct(p.flops.attention_context / p.flops.total));
    if (p.model.is_moe_model()) {
        double routed = double(pc.by_component[int(Component::routed_experts)]);
        s += fmt::format(" Routed experts hold {} of all parameters, and a token uses {} of the {} in each MoE layer.",
                         pct(routed / total), p.model.moe.top_k, p.model.moe.num_experts);
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
        if (as_bytes) j[std::string(kComponentNames[c])] = round_bytes(a[c]);
        else j[std::string(kComponentNames[c])] = a[c];
    }
    return j;
}

// The memory plan per GPU (modeled) and what it assumes.
json memory_json(const Plan& p) {
    const MemoryPlan& mem = p.mem;
    return {
        {"source", "modeled"},
        {"assumptions",
         "GPUs = max(ep, tp); attention, dense MLP, shared experts, embedding and LM head split over tp; routed experts "
         "over all GPUs (ep ranks x expert-tp), E + redundant_experts expert copies per MoE layer; norms and router "
         "replicated. Quantised dtypes apply to linear layers; "
         "embedding, head, norms and router stay bf16 (fp32 with --dtype fp32); block scales counted (fp8-block 1 fp32 "
         "per 128x128, nvfp4 1 fp8 per 16, mxfp4 1 e8m0 per 32, int4 1 bf16 per 128; per-tensor scales not). KV: GQA "
         "heads split over tp, MLA latent replicated; batch split over dp = GPUs/tp replicas."},
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
        {"max_concurrent_sequences", mem.max_concurrent_sequences}};
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
    j["tool"] = {{"name", "moebench"}, {"version", MOEBENCH_VERSION}, {"git_rev", MOEBENCH_GIT_REV}};
    j["model"] = {{"name", m.name}, {"family", m.family}, {"source", m.source}, {"unconfirmed", m.unconfirmed},
                  {"notes", m.notes}, {"num_layers", m.num_layers}, {"num_moe_layers", m.num_moe_layers()},
                  {"num_experts", m.moe.num_experts}, {"top_k", m.moe.top_k},
                  {"attention", to_string(m.attn.kind)}, {"num_mtp_layers", m.num_mtp_layers}};
    j["hardware"] = {{"name", p.hw.name}, {"display_name", p.hw.display_name}, {"source", p.hw.source}};
    j["inputs"] = {{"dtype", to_string(p.in.precision.dense_weights)},
                   {"expert_dtype", to_string(p.in.precision.expert_weights)},
                   {"kv_dtype", to_string(p.in.precision.kv_cache)}, {"ep", par.moe_ep}, {"tp", par.attn_tp},
                   {"num_gpus", par.num_gpus()}, {"dp", par.attn_dp}, {"expert_tp", par.moe_tp},
                   {"redundant_experts", par.redundant_experts},
                   {"batch", p.in.batch}, {"context", p.in.context}, {"include_mtp", p.in.include_mtp},
                   {"layout_auto", !p.layout_note.empty()}, {"layout_note", p.layout_note}};
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

std::string plan_to_text(const Plan& p) {
    const auto& m = p.model;
    const Layout& par = p.in.layout;
    const ParamCounts& pc = p.params;
    std::string s;
    auto line = [&](const std::string& l) { s += l + "\n"; };
    line(fmt::format("moebench plan: {} on {} ({})", m.name, p.hw.name, p.hw.display_name));
    if (!p.layout_note.empty()) line("  NOTE: " + p.layout_note);
    if (m.unconfirmed) line(fmt::format("  NOTE: unconfirmed model shape. {}", m.notes));
    // Not "EP x TP": the expert and attention groups overlay the same GPUs (GPUs = max(ep, tp)).
    line(fmt::format("  weights {}{}, KV {}, EP {}{} and TP {} on {} GPU{}, batch {}, context {}{}",
                     to_string(p.in.precision.dense_weights),
                     p.in.precision.expert_weights != p.in.precision.dense_weights
                         ? fmt::format(" (experts {})", to_string(p.in.precision.expert_weights))
                         : std::string(),
                     to_string(p.in.precision.kv_cache), par.moe_ep,
                     par.redundant_experts > 0 ? fmt::format(" (+{} redundant experts)", par.redundant_experts)
                                               : std::string(),
                     par.attn_tp, par.num_gpus(),
                     par.num_gpus() > 1 ? "s" : "", p.in.batch, p.in.context, p.in.include_mtp ? ", MTP included" : ""));
    line("");
    line(fmt::format("{:<26} {:>12} {:>14}   {:>12}", "Parameters (counted)", "total", "active/token", "FLOPs/token"));
    for (int c = 0; c < kNumComponents; ++c) {
        if (pc.by_component[c] == 0 && p.flops.by_component[c] == 0) continue;
        std::string name(kComponentNames[c]);
        if (c == int(Component::mtp) && !p.in.include_mtp) name += " (excl.)";
        line(fmt::format("  {:<24} {:>12} {:>14}   {:>12}", name, human_count(double(pc.by_component[c])),
                         human_count(double(pc.active_by_component[c])), human_flops(p.flops.by_component[c])));
    }
    line(fmt::format("  {:<24} {:>12} {:>14}   {:>12}", "total", human_count(double(pc.total)),
                     human_count(double(pc.active)), human_flops(p.flops.total)));
    line(fmt::format("  active per token: {} of total ({} excluding the input embedding: {})",
                     pct(double(pc.active) / double(pc.total)), human_count(double(pc.active_excluding_embedding)),
                     pct(double(pc.active_excluding_embedding) / double(pc.total))));
    double dense_flops = 2.0 * double(pc.total);
    line(fmt::format("  FLOPs per token at context {}: {} = {} of a dense {} model ({}); attention over the context: {}",
                     p.in.context, human_flops(p.flops.total), pct(p.flops.total / dense_flops),
                     human_count(double(pc.total)), human_flops(dense_flops), human_flops(p.flops.attention_context)));
    line("");
    line("Why % of parameters and % of FLOPs differ:");
    line("  " + p.explanation);
    line("");
    const MemoryPlan& mem = p.mem;
    line(fmt::format("Memory per GPU (modeled) on {} ({} capacity)", p.hw.name, human_bytes(mem.capacity_bytes)));
    auto row = [&](const std::string& label, double bytes, const std::string& note) {
        line(fmt::format("  {:<30} {:>12}{}", label, human_bytes(bytes), note.empty() ? "" : "   " + note));
    };
    const Precision& pr = p.in.precision;
    row(pr.expert_weights != pr.dense_weights && m.is_moe_model()
            ? fmt::format("weights ({}, experts {})", to_string(pr.dense_weights), to_string(pr.expert_weights))
            : fmt::format("weights ({})", to_string(pr.dense_weights)),
        mem.weights_bytes, "");
    row(fmt::format("KV cache ({} seq x {} tok)", mem.sequences_per_gpu, p.in.context), mem.kv_cache_bytes,
        fmt::format("{}/token on this GPU, {}/token whole model", human_bytes(mem.kv_bytes_per_token_per_gpu),
                    human_bytes(mem.kv_bytes_per_token)));
    if (mem.linear_state_bytes_per_sequence_per_gpu > 0)
        line(fmt::format("  {:<30} {:>12}   fixed per sequence ({} linear-attention layers, fp32), in the KV cache",
                         "of which recurrent state", human_bytes(double(mem.sequences_per_gpu) *
                                                                 mem.linear_state_bytes_per_sequence_per_gpu),
                         m.num_linear_attention_layers()));
    row("activations + workspace", mem.activation_bytes,
        fmt::format("{} for {} tokens/step + {} workspace", human_bytes(mem.activation_only_bytes),
                    mem.activation_tokens, human_bytes(mem.workspace_bytes)));
    row("free", mem.free_bytes, mem.fits ? "" : "DOES NOT FIT: lower --batch or --context, or add GPUs");
    line(fmt::format("  max concurrent sequences at context {}: {}", p.in.context, mem.max_concurrent_sequences));
    line("");
    const DecodeFloor& f = p.floor;
    line(fmt::format("Decode-step floor (modeled, uniform routing, batch {}, context {})", f.batch, f.context));
    if (m.is_moe_model())
        line(fmt::format("  unique experts per MoE layer  {:.2f} of {} (E*(1-(1-k/E)^B), k = {})",
                         f.unique_experts_per_layer, m.moe.num_experts, m.moe.top_k));
    line(fmt::format("  bytes read per GPU            {}  (weights {}, touched experts {}, KV {})",
                     human_bytes(f.bytes_per_gpu), human_bytes(f.weight_bytes_per_gpu),
                     human_bytes(f.expert_bytes_per_gpu), human_bytes(f.kv_bytes_per_gpu)));
    line(fmt::format("  FLOPs per step                {}  ({} per GPU)", human_flops(f.flops_per_step),
                     human_flops(f.flops_per_gpu)));
    std::string peaks;
    for (const auto& [format, peak] : f.peak_flops_by_format)
        peaks += fmt::format("{}{} {:.0f}", peaks.empty() ? "" : ", ", format, peak / 1e12);
    line(fmt::format("  memory time {} at {:.0f} GB/s; compute time {} at {:.0f} TFLOP/s effective (peaks: {})",
                     human_time_us(f.memory_time_us), f.mem_bw_bytes_per_s / 1e9, human_time_us(f.compute_time_us),
                     f.peak_flops / 1e12, peaks));
    line(fmt::format("  floor {} per step, {}-bound: at most {:.0f} tokens/s per sequence, {:.0f} tokens/s total",
                     human_time_us(f.time_us), f.bound, 1e6 / f.time_us, double(f.batch) * 1e6 / f.time_us));
    line("  (a lower bound: no communication, activation traffic or kernel overheads; see docs/plan-schema.md)");
    return s;
}

// The largest value in [1, hi] for which `fits` holds (monotone: true up to some point), or 0 when none.
int64_t largest_fitting(int64_t hi, const std::function<bool(int64_t)>& fits) {
    if (!fits(1)) return 0;
    int64_t lo = 1;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo + 1) / 2;
        if (fits(mid)) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

// The user asked for this batch and context (--batch/--context given): when the KV cache does not fit beside the
// weights, that is the answer, exit 2, with the largest batch and context that do fit. Without the flags the plan
// is accounting at default values and only marks the shortfall.
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
    if (max_batch > 0) fix += fmt::format("at context {} at most --batch {} fits; ", p.in.context, max_batch);
    if (max_context > 0) fix += fmt::format("at batch {} at most --context {} fits; ", p.in.batch, max_context);
    fix += "or add GPUs (--ep/--tp)";
    if (p.in.precision.kv_cache != DType::fp8) fix += ", or use --kv-dtype fp8";
    config_error("--batch/--context",
                 fmt::format("does not fit: the KV cache needs {} per GPU, {} is left after the weights and activations "
                             "on {} ({} GPU{})",
                             human_bytes(p.mem.kv_cache_bytes), human_bytes(std::max(0.0, p.mem.free_bytes + p.mem.kv_cache_bytes)),
                             p.hw.name, p.in.layout.num_gpus(), p.in.layout.num_gpus() > 1 ? "s" : ""),
                 fmt::format("--batch {} --context {}", p.in.batch, p.in.context), fix);
}

void run_plan(const PlanArgs& a, const RunFieldFlags& fields) {
    Plan p;
    if (a.format != "text" && a.format != "json")
        config_error("--format", "unknown output format", a.format, "use text or json");
    // Plan's own defaults, then the flags given (parsed and checked as `run` parses them).
    RunConfig cfg;
    cfg.model = "mixtral-8x7b";
    cfg.hardware = "h200-sxm";
    cfg.shape.batch = 1;
    cfg.shape.context = 4096;
    fields.apply(cfg);
    check_precision_request(cfg.precision);
    p.in.precision = resolve_precision(cfg.precision, uniform_precision(DType::bf16));
    p.in.layout = resolve_layout(cfg.layout);
    p.in.batch = cfg.shape.batch;
    p.in.context = cfg.shape.context;
    if (p.in.batch < 1)
        config_error("--batch", "must be at least 1", std::to_string(p.in.batch),
                     "use the number of concurrent sequences, e.g. --batch 1");
    if (p.in.context < 1)
        config_error("--context", "must be at least 1", std::to_string(p.in.context),
                     "use the KV length in tokens, e.g. --context 4096");
    p.in.include_mtp = a.include_mtp;
    const bool layout_given = fields.given("ep") || fields.given("tp") || fields.given("attention_dp") ||
                              fields.given("moe_tp") || fields.given("moe_ep");
    const bool fit_asked = fields.given("batch") || fields.given("context");
    // Bounds that keep every count in range (ceil(batch / dp) and int64 byte counts overflowed near 2^63):
    // 2^30 sequences and 2^40 tokens of context are far beyond any deployment.
    if (p.in.batch > (int64_t{1} << 30))
        config_error("--batch", "is beyond 2^30 concurrent sequences", std::to_string(p.in.batch),
                     "use a realistic batch, e.g. --batch 256");
    if (p.in.context > (int64_t{1} << 40))
        config_error("--context", "is beyond 2^40 tokens", std::to_string(p.in.context),
                     "use a realistic context, e.g. --context 131072");

    // Resolve here so a missing file or unknown short name names the flag the user typed.
    p.model = load_model(resolve_config("models", cfg.model, "--model"));
    p.hw = load_hardware(cfg.hardware);
    refuse_output_over_input({{"--out", a.out}}, {{"--model", p.model.source},
                                                 {"--hardware", resolve_config("hardware", cfg.hardware, "--hardware")}});
    check_layout_for_model(p.model, p.in.layout);

    AccountingOptions opt;
    opt.include_mtp = p.in.include_mtp;
    p.params = count_params(p.model, opt);
    if (p.params.total <= 0) config_error("--model", "has no parameters", cfg.model, "check the model config");
    p.flops = flops_per_token(p.model, p.in.context, opt);
    p.mem = plan_memory(p.model, p.hw, p.in);
    if (!p.mem.weights_fit && !layout_given) {
        // No layout asked for: use the smallest one that fits (so the accounting is always shown), and say so.
        MinLayout ml = min_layout_for_weights(p.model, p.hw, p.in);
        if (ml.found) {
            p.layout_note = fmt::format(
                "layout chosen automatically: {} {} weights do not fit on one {}; the fewest GPUs that fit is {} "
                "(--ep {} --tp {})",
                p.model.name, to_string(p.in.precision.dense_weights), p.hw.name, ml.layout.num_gpus(),
                ml.layout.moe_ep, ml.layout.attn_tp);
            p.in.layout = ml.layout;
            p.mem = plan_memory(p.model, p.hw, p.in);
        }
    }
    require_weights_fit(p.model, p.hw, p.in, p.mem);
    // The JSON holds byte counts as int64: refuse a batch x context whose KV cache cannot be counted that way.
    if (!(p.mem.kv_cache_bytes < 4e18))
        config_error("--batch/--context", "make a KV cache beyond 2^61 bytes per GPU, too large to count",
                     fmt::format("--batch {} --context {}", p.in.batch, p.in.context), "use a smaller batch or context");
    if (fit_asked) require_asked_fit(p);
    p.floor = decode_floor(p.model, p.hw, p.in);
    p.explanation = explain(p);

    std::string text = a.format == "json" ? plan_to_json(p).dump(2) + "\n" : plan_to_text(p);
    if (a.out.empty() || a.out == "-") {
        std::cout << text;
    } else {
        write_file_atomic(a.out, text);
        std::cerr << "moebench: wrote " << a.out << "\n";
    }
}

}  // namespace

void add_plan_command(CLI::App& app) {
    auto args = std::make_shared<PlanArgs>();
    auto* cmd = app.add_subcommand(
        "plan", "Parameters, FLOPs, memory per GPU and the decode-step floor of a model on a hardware profile (no GPU needed)");
    auto fields = std::make_shared<RunFieldFlags>(cmd, plan_field);
    fields->option("model")->description(
        "Model: short name in configs/models, a moebench model JSON or a Hugging Face config.json (default "
        "mixtral-8x7b)");
    fields->option("hardware")->description(
        "Hardware profile: short name in configs/hardware or a JSON path (default h200-sxm)");
    fields->option("batch")->description(
        "Concurrent sequences (default 1). Given with or without --context, it asks whether they fit: exit 2 when "
        "they do not");
    fields->option("context")->description("Tokens per sequence in the KV cache (default 4096)");
    fields->option("ep")->description(
        "Expert-parallel GPUs; must divide the routed experts. GPUs = max(ep, tp). Default 1, or the fewest GPUs that "
        "fit when no layout flag is given and one GPU is too small");
    fields->option("dtype")->description(
        "Weights: " + dtype_names_for(TensorClass::dense_weights) +
        " (default bf16 = auto; bytes with scales and peak rates: docs/plan-schema.md)");
    fields->option("kv_dtype")->description("KV cache: " + dtype_names_for(TensorClass::kv_cache) + " (default bf16)");
    cmd->add_flag("--include-mtp", args->include_mtp, "Count multi-token-prediction modules (DeepSeek-V3) in params and memory");
    cmd->add_option("--format", args->format, "Output: text|json (default text; json schema moebench.plan/1)");
    cmd->add_option("--out", args->out, "Write the output to FILE (atomically) instead of stdout")->type_name("FILE");
    cmd->callback([args, fields] { run_plan(*args, *fields); });
}

}  // namespace moebench::cli
