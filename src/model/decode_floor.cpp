// SPDX-License-Identifier: Apache-2.0
// Decode-step roofline floor: unique experts touched, bytes and FLOPs per GPU, max(bytes/bandwidth, FLOPs/peak).
#include "model/decode_floor.hpp"

#include "common/error.hpp"
#include "config/hardware_fields.hpp"
#include "config/run_fields.hpp"
#include "core/phase.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <variant>
#include <vector>

namespace moebench {

double expected_unique_experts(int64_t num_experts, int64_t top_k, int64_t batch) {
    if (num_experts <= 0 || top_k <= 0 || batch <= 0) return 0.0;
    double e = double(num_experts), miss = 1.0 - double(std::min(top_k, num_experts)) / e;
    return e * (1.0 - std::pow(miss, double(batch)));
}

std::string_view rate_field(ComputeRate r) {
    switch (r) {
        case ComputeRate::fp32: return "fp32_tflops";
        case ComputeRate::bf16: return "bf16_tflops";
        case ComputeRate::fp8: return "fp8_tflops";
        case ComputeRate::fp4: return "fp4_tflops";
    }
    return "bf16_tflops";
}

double profile_rate(const HardwareProfile& hw, ComputeRate r) {
    // The field table says which member holds the rate (one place for the key and the member).
    const HardwareField* f = find_hardware_field(std::string(rate_field(r)));
    MOEBENCH_CHECK(f && std::holds_alternative<double HardwareProfile::*>(f->member), "no hardware field {}",
                   rate_field(r));
    return hw.*std::get<double HardwareProfile::*>(f->member);
}

double peak_flops_for(const HardwareProfile& hw, DType d, const std::string& field) {
    const DTypeInfo& info = dtype_info(d);
    const double rate = profile_rate(hw, info.weight_compute);
    if (rate > 0) return rate;
    // The weight formats this profile does compute, as the way out.
    std::vector<std::string> ok;
    for (const DTypeInfo& i : dtype_table())
        if (i.weights && profile_rate(hw, i.weight_compute) > 0) ok.emplace_back(i.name);
    std::string formats;
    for (size_t i = 0; i < ok.size(); ++i) formats += (i == 0 ? "" : i + 1 == ok.size() ? " or " : ", ") + ok[i];
    const RunField* rf = find_run_field(field);
    const std::string flag = rf && !rf->flag.empty() ? rf->flag : field;
    const std::string_view key = rate_field(info.weight_compute);
    config_error(
        run_field_label("", field),
        fmt::format("{} computes at the {} peak, which hardware {} does not give ({} is 0 or absent)", info.name,
                    key.substr(0, key.find('_')), hw.name, key),
        fmt::format("{} on {}", info.name, hw.name),
        fmt::format("use {} {} (what {} computes; int4 is weight-only, computed in bf16), or a profile with {}", flag,
                    formats, hw.name, key));
}

std::map<DType, double> compute_peaks(const HardwareProfile& hw, const Precision& p) {
    std::map<DType, double> peaks;
    for (const PhaseInfo& row : kPhaseTable) {
        if (row.matmul == PhaseMatmul::none) continue;
        const DType d = matmul_dtype(row.phase, p);
        peaks[d] = peak_flops_for(hw, d, row.matmul == PhaseMatmul::expert_weights ? "expert_dtype" : "dtype");
    }
    return peaks;
}

DecodeFloor decode_floor(const ModelConfig& m, const HardwareProfile& hw, const PlanInput& in_given) {
    const std::map<DType, double> peaks = compute_peaks(hw, in_given.precision);
    PlanInput in = in_given;
    in.include_mtp = false;
    const Layout& par = in.layout;
    const double n = double(par.num_gpus()), tp = double(par.attn_tp);
    MemoryPlan mem = plan_memory(m, hw, in);
    const auto& w = mem.weights_by_component_bytes;
    auto wb = [&](Component c) { return w[int(c)]; };

    DecodeFloor f;
    f.batch = in.batch;
    f.context = in.context;
    f.num_moe_layers = m.is_moe_model() ? m.num_moe_layers() : 0;
    f.unique_experts_per_layer =
        m.is_moe_model() ? expected_unique_experts(m.moe.num_experts, m.moe.top_k, in.batch) : 0;

    // Non-expert weights are read whole by every attention replica; the input embedding only for this GPU's rows.
    const double rows = double(mem.sequences_per_gpu);
    const double emb_row_bytes = double(m.hidden_size) * in.precision.high_precision_bytes() / tp;
    f.weight_bytes_per_gpu = wb(Component::lm_head) + wb(Component::attention) + wb(Component::norms) +
                             wb(Component::router) + wb(Component::dense_mlp) + wb(Component::shared_experts) +
                             std::min(rows * emb_row_bytes, wb(Component::embedding));
    // Touched experts: this GPU holds E/ep experts, each split over etp ranks; by linearity it expects U/ep of them
    // touched.
    f.expert_bytes_per_gpu = double(f.num_moe_layers) * f.unique_experts_per_layer * double(routed_expert_params(m)) *
                             in.precision.expert_weight_bytes() / n;
    f.kv_bytes_per_gpu = mem.kv_cache_bytes;
    f.bytes_per_gpu = f.weight_bytes_per_gpu + f.expert_bytes_per_gpu + f.kv_bytes_per_gpu;
    f.bytes_per_step = f.bytes_per_gpu * n;

    FlopsPerToken fpt = flops_per_token(m, in.context, AccountingOptions{});
    f.flops_per_step = double(in.batch) * fpt.total;
    f.flops_per_gpu = f.flops_per_step / n;

    // Each part's FLOPs at the peak of the format its matrix products run in, as the sim prices its phases (the
    // phase table's operands): the routed experts at the experts' format, attention's projections, the dense MLP
    // and the shared experts at the dense weights', the LM head and router in high precision, the products over the
    // context at the activations'.
    const Precision& pr = in.precision;
    auto seconds = [&](double flops, DType d) { return flops / peaks.at(d); };
    for (const auto& [d, peak] : peaks) f.peak_flops_by_format[std::string(to_string(d))] = peak;
    auto part = [&](Component c) { return fpt.by_component[int(c)]; };
    const double per_token_s = seconds(part(Component::routed_experts), pr.expert_weights) +
                               seconds(part(Component::attention) - fpt.attention_context + part(Component::dense_mlp) +
                                           part(Component::shared_experts),
                                       pr.dense_weights) +
                               seconds(part(Component::lm_head) + part(Component::router), pr.high_precision_dtype()) +
                               seconds(fpt.attention_context, pr.activations);

    f.mem_bw_bytes_per_s = hw.memory_bw_bytes_per_s;
    f.memory_time_us = f.bytes_per_gpu / f.mem_bw_bytes_per_s * 1e6;
    f.compute_time_us = double(in.batch) * per_token_s / n * 1e6;
    f.peak_flops = f.compute_time_us > 0 ? f.flops_per_gpu / (f.compute_time_us * 1e-6) : peaks.at(pr.dense_weights);
    f.time_us = std::max(f.memory_time_us, f.compute_time_us);
    f.bound = f.memory_time_us >= f.compute_time_us ? "memory" : "compute";
    return f;
}

}  // namespace moebench
