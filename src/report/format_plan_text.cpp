// SPDX-License-Identifier: Apache-2.0
// The terminal view of a moebench.plan/1 document (harness/plan_point.hpp): a pasteable table of parameters and
// FLOPs per component, the memory per GPU and the decode-step floor. Everything it prints is in the document.
#include "common/human_units.hpp"

#include "common/flag_names.hpp"
#include "model/accounting.hpp"
#include "report/formats.hpp"

#include <fmt/format.h>

namespace moebench::formats_detail {

std::string render_plan_text(const json& j) {
    const json& m = j["model"];
    const json& hw = j["hardware"];
    const json& in = j["inputs"];
    const json& pc = j["params"];
    const json& fl = j["flops_per_token"];
    const std::string name = m["name"].get<std::string>(), hw_name = hw["name"].get<std::string>();
    const std::string dtype = in["dtype"].get<std::string>(), expert_dtype = in["expert_dtype"].get<std::string>();
    const int64_t gpus = in["num_gpus"].get<int64_t>(), context = in["context"].get<int64_t>();
    const bool include_mtp = in["include_mtp"].get<bool>();
    const std::string layout_note = in["layout_note"].get<std::string>();
    std::string s;
    auto line = [&](const std::string& l) { s += l + "\n"; };
    line(fmt::format("moebench plan: {} on {} ({})", name, hw_name, hw["display_name"].get<std::string>()));
    if (!layout_note.empty()) line("  NOTE: " + layout_note);
    if (m["unconfirmed"].get<bool>())
        line(fmt::format("  NOTE: unconfirmed model shape. {}", m["notes"].get<std::string>()));
    // Not "EP x TP": the expert and attention groups overlay the same GPUs (GPUs = max(ep, tp)).
    const int64_t redundant = in["redundant_experts"].get<int64_t>();
    line(fmt::format("  weights {}{}, KV {}, EP {}{} and TP {} on {} GPU{}, batch {}, context {}{}", dtype,
                     expert_dtype != dtype ? fmt::format(" (experts {})", expert_dtype) : std::string(),
                     in["kv_dtype"].get<std::string>(), in["ep"].get<int64_t>(),
                     redundant > 0 ? fmt::format(" (+{} redundant experts)", redundant) : std::string(),
                     in["tp"].get<int64_t>(), gpus, gpus > 1 ? "s" : "", in["batch"].get<int64_t>(), context,
                     include_mtp ? ", MTP included" : ""));
    line("");
    line(fmt::format("{:<26} {:>12} {:>14}   {:>12}", "Parameters (counted)", "total", "active/token", "FLOPs/token"));
    for (int c = 0; c < kNumComponents; ++c) {
        const std::string component(kComponentNames[c]);
        const double total = pc["by_component"][component].get<double>();
        const double flops = fl["by_component"][component].get<double>();
        if (total == 0 && flops == 0) continue;
        std::string label = component;
        if (c == int(Component::mtp) && !include_mtp) label += " (excl.)";
        line(fmt::format("  {:<24} {:>12} {:>14}   {:>12}", label, human_count(total),
                         human_count(pc["active_by_component"][component].get<double>()), human_flops(flops)));
    }
    const double total = pc["total"].get<double>(), active = pc["active"].get<double>();
    const double flops_total = fl["total"].get<double>();
    line(fmt::format("  {:<24} {:>12} {:>14}   {:>12}", "total", human_count(total), human_count(active),
                     human_flops(flops_total)));
    const double active_ex = pc["active_excluding_embedding"].get<double>();
    line(fmt::format("  active per token: {} of total ({} excluding the input embedding: {})", percent(active / total),
                     human_count(active_ex), percent(active_ex / total)));
    const double dense_flops = 2.0 * total;
    line(
        fmt::format("  FLOPs per token at context {}: {} = {} of a dense {} model ({}); attention over the context: {}",
                    context, human_flops(flops_total), percent(flops_total / dense_flops), human_count(total),
                    human_flops(dense_flops), human_flops(fl["attention_context"].get<double>())));
    line("");
    line("Why % of parameters and % of FLOPs differ:");
    line("  " + j["sparsity"]["explanation"].get<std::string>());
    line("");
    const json& mem = j["memory"];
    const json& gpu = mem["per_gpu"];
    const int64_t sequences = gpu["sequences"].get<int64_t>();
    line(fmt::format("Memory per GPU (modeled) on {} ({} capacity)", hw_name,
                     human_bytes(mem["capacity_bytes"].get<double>())));
    auto row = [&](const std::string& label, double bytes, const std::string& note) {
        line(fmt::format("  {:<30} {:>12}{}", label, human_bytes(bytes), note.empty() ? "" : "   " + note));
    };
    const bool moe_model = m["num_experts"].get<int64_t>() > 0 && m["num_moe_layers"].get<int64_t>() > 0;
    row(expert_dtype != dtype && moe_model ? fmt::format("weights ({}, experts {})", dtype, expert_dtype)
                                           : fmt::format("weights ({})", dtype),
        gpu["weights_bytes"].get<double>(), "");
    const json* offload =
        mem.contains("expert_offload") && mem["expert_offload"].is_object() ? &mem["expert_offload"] : nullptr;
    if (offload) {
        row("of which resident experts", (*offload)["resident_bytes"].get<double>(),
            fmt::format("{} of {} routed experts per MoE layer on the GPU",
                        (*offload)["resident_experts"].get<int64_t>(), m["num_experts"].get<int64_t>()));
        row("of which fetch buffers", (*offload)["fetch_buffer_bytes"].get<double>(),
            fmt::format("{} experts: one layer's top-{}, double-buffered",
                        (*offload)["fetch_buffer_experts"].get<int64_t>(), m["top_k"].get<int64_t>()));
    }
    row(fmt::format("KV cache ({} seq x {} tok)", sequences, context), gpu["kv_cache_bytes"].get<double>(),
        fmt::format("{}/token on this GPU, {}/token whole model",
                    human_bytes(mem["kv_bytes_per_token_per_gpu"].get<double>()),
                    human_bytes(mem["kv_bytes_per_token"].get<double>())));
    const double state_bytes = mem["linear_state_bytes_per_sequence_per_gpu"].get<double>();
    if (state_bytes > 0)
        line(fmt::format("  {:<30} {:>12}   fixed per sequence ({} linear-attention layers, fp32), in the KV cache",
                         "of which recurrent state", human_bytes(double(sequences) * state_bytes),
                         m["num_linear_attention_layers"].get<int64_t>()));
    row("activations + workspace", gpu["activation_bytes"].get<double>(),
        fmt::format("{} for {} tokens/step + {} workspace", human_bytes(gpu["activation_only_bytes"].get<double>()),
                    mem["activation_tokens"].get<int64_t>(), human_bytes(gpu["workspace_bytes"].get<double>())));
    row("free", gpu["free_bytes"].get<double>(),
        mem["fits"].get<bool>()
            ? ""
            : fmt::format("DOES NOT FIT: lower {} or {}, or add GPUs", flag_of("batch"), flag_of("context")));
    line(fmt::format("  max concurrent sequences at context {}: {}", context,
                     mem["max_concurrent_sequences"].get<int64_t>()));
    if (offload)
        line(fmt::format("  host memory (offloaded experts)  {:>12}   {} of {} routed experts x {} MoE layers",
                         human_bytes((*offload)["host_bytes"].get<double>()),
                         m["num_experts"].get<int64_t>() - (*offload)["resident_experts"].get<int64_t>(),
                         m["num_experts"].get<int64_t>(), m["num_moe_layers"].get<int64_t>()));
    line("");
    const json& f = j["decode_floor"];
    line(fmt::format("Decode-step floor (modeled, uniform routing, batch {}, context {})", f["batch"].get<int64_t>(),
                     f["context"].get<int64_t>()));
    if (moe_model)  // ModelConfig::is_moe_model
        line(fmt::format("  unique experts per MoE layer  {:.2f} of {} (E*(1-(1-k/E)^B), k = {})",
                         f["unique_experts_per_layer"].get<double>(), m["num_experts"].get<int64_t>(),
                         m["top_k"].get<int64_t>()));
    line(fmt::format(
        "  bytes read per GPU            {}  (weights {}, touched experts {}, KV {})",
        human_bytes(f["bytes_per_gpu"].get<double>()), human_bytes(f["weight_bytes_per_gpu"].get<double>()),
        human_bytes(f["expert_bytes_per_gpu"].get<double>()), human_bytes(f["kv_bytes_per_gpu"].get<double>())));
    line(fmt::format("  FLOPs per step                {}  ({} per GPU)", human_flops(f["flops_per_step"].get<double>()),
                     human_flops(f["flops_per_gpu"].get<double>())));
    std::string peaks;
    for (const auto& [format, peak] : f["peak_flops_by_format"].items())
        peaks += fmt::format("{}{} {:.0f}", peaks.empty() ? "" : ", ", format, peak.get<double>() / 1e12);
    line(fmt::format("  memory time {} at {:.0f} GB/s; compute time {} at {:.0f} TFLOP/s effective (peaks: {})",
                     human_time_us(f["memory_time_us"].get<double>()), f["mem_bw_bytes_per_s"].get<double>() / 1e9,
                     human_time_us(f["compute_time_us"].get<double>()), f["peak_flops"].get<double>() / 1e12, peaks));
    const double time_us = f["time_us"].get<double>();
    line(fmt::format("  floor {} per step, {}-bound: at most {:.0f} tokens/s per sequence, {:.0f} tokens/s total",
                     human_time_us(time_us), f["bound"].get<std::string>(), 1e6 / time_us,
                     double(f["batch"].get<int64_t>()) * 1e6 / time_us));
    line("  (a lower bound: no communication, activation traffic or kernel overheads; see docs/plan-schema.md)");
    return s;
}

}  // namespace moebench::formats_detail
