// SPDX-License-Identifier: Apache-2.0
// Decode-step roofline floor: unique experts touched, bytes and FLOPs per GPU, max(bytes/bandwidth, FLOPs/peak).
#include "model/decode_floor.hpp"

#include <algorithm>
#include <cmath>

namespace moebench {

double expected_unique_experts(int64_t num_experts, int64_t top_k, int64_t batch) {
    if (num_experts <= 0 || top_k <= 0 || batch <= 0) return 0.0;
    double e = double(num_experts), miss = 1.0 - double(std::min(top_k, num_experts)) / e;
    return e * (1.0 - std::pow(miss, double(batch)));
}

double peak_flops_for(const HardwareProfile& hw, DType d) {
    switch (dtype_info(d).weight_compute) {
        case ComputeRate::fp8: return hw.fp8_flops > 0 ? hw.fp8_flops : hw.bf16_flops;
        case ComputeRate::fp32: return hw.fp32_flops > 0 ? hw.fp32_flops : hw.bf16_flops;
        case ComputeRate::int4:
        case ComputeRate::bf16: return hw.bf16_flops;
    }
    return hw.bf16_flops;
}

DecodeFloor decode_floor(const ModelConfig& m, const HardwareProfile& hw, const PlanInput& in_given) {
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
    f.unique_experts_per_layer = m.is_moe_model() ? expected_unique_experts(m.moe.num_experts, m.moe.top_k, in.batch) : 0;

    // Non-expert weights are read whole by every attention replica; the input embedding only for this GPU's rows.
    const double rows = double(mem.sequences_per_gpu);
    const double emb_row_bytes = double(m.hidden_size) * in.precision.high_precision_bytes() / tp;
    f.weight_bytes_per_gpu = wb(Component::lm_head) + wb(Component::attention) + wb(Component::norms) +
                             wb(Component::router) + wb(Component::dense_mlp) + wb(Component::shared_experts) +
                             std::min(rows * emb_row_bytes, wb(Component::embedding));
    // Touched experts: this GPU holds E/ep experts, each split over etp ranks; by linearity it expects U/ep of them touched.
    f.expert_bytes_per_gpu = double(f.num_moe_layers) * f.unique_experts_per_layer *
                             double(routed_expert_params(m)) * in.precision.expert_weight_bytes() / n;
    f.kv_bytes_per_gpu = mem.kv_cache_bytes;
    f.bytes_per_gpu = f.weight_bytes_per_gpu + f.expert_bytes_per_gpu + f.kv_bytes_per_gpu;
    f.bytes_per_step = f.bytes_per_gpu * n;

    FlopsPerToken fpt = flops_per_token(m, in.context, AccountingOptions{});
    f.flops_per_step = double(in.batch) * fpt.total;
    f.flops_per_gpu = f.flops_per_step / n;

    f.mem_bw_bytes_per_s = hw.memory_bw_bytes_per_s;
    f.peak_flops = peak_flops_for(hw, in.precision.dense_weights);
    f.memory_time_us = f.bytes_per_gpu / f.mem_bw_bytes_per_s * 1e6;
    f.compute_time_us = f.flops_per_gpu / f.peak_flops * 1e6;
    f.time_us = std::max(f.memory_time_us, f.compute_time_us);
    f.bound = f.memory_time_us >= f.compute_time_us ? "memory" : "compute";
    return f;
}

}  // namespace moebench
