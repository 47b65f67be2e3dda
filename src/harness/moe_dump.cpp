// SPDX-License-Identifier: Apache-2.0
#include "harness/moe_dump.hpp"

#include "common/tensor_file.hpp"

#include <fmt/format.h>

#include <filesystem>

namespace moebench {

namespace {
std::string fmt_num(double v) { return fmt::format("{}", v); }
}  // namespace

void dump_moe_layer(const std::string& dir, const Backend& backend, const ModelConfig& model, const RunConfig& cfg,
                    int64_t slot, int64_t layer) {
    TensorFile file;
    file.tensors = backend.moe_block_tensors(slot);
    const MoeConfig& moe = model.moe;
    file.metadata = {
        {"format", "moebench.moe_layer/1"},
        {"model", model.name},
        {"family", model.family},
        {"layer", std::to_string(layer)},
        {"backend", backend.name()},
        {"seed", std::to_string(cfg.options.seed)},
        {"workload", cfg.routing},
        {"routing", to_string(moe.routing)},
        {"num_experts", std::to_string(moe.num_experts)},
        {"top_k", std::to_string(moe.top_k)},
        {"norm_topk_prob", moe.norm_topk_prob ? "true" : "false"},
        {"routed_scaling_factor", fmt_num(moe.routed_scaling_factor)},
        {"num_groups", std::to_string(moe.num_groups)},
        {"topk_groups", std::to_string(moe.topk_groups)},
        {"router_jitter_noise", fmt_num(moe.router_jitter_noise)},
        {"num_shared_experts", std::to_string(moe.num_shared_experts)},
        {"shared_expert_gate", moe.shared_expert_gate ? "true" : "false"},
        {"router_bias", moe.router_bias ? "true" : "false"},
        {"router_correction_bias", moe.router_correction_bias ? "true" : "false"},
        {"expert_bias", moe.expert_bias ? "true" : "false"},
        {"activation", to_string(model.activation)},
        {"swiglu_limit", fmt_num(model.swiglu_limit)},
        {"capacity_factor", fmt_num(cfg.options.capacity_factor)},
        {"soft_topn", std::to_string(cfg.options.soft_topn)},
        {"mode", to_string(cfg.shape.mode)},
        {"batch", std::to_string(cfg.shape.batch)},
        {"seq_len", std::to_string(cfg.shape.seq_len)},
        {"context", std::to_string(cfg.shape.context)},
        {"tie_break", "higher score wins; equal scores: lower expert id wins"},
    };
    write_safetensors((std::filesystem::path(dir) / "moe_layer.safetensors").string(), file);
}

}  // namespace moebench
