// SPDX-License-Identifier: Apache-2.0
#include "harness/moe_dump.hpp"

#include "comm/communicator.hpp"
#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "common/tensor_file.hpp"

#include <fmt/format.h>

#include <filesystem>

namespace moebench {

namespace {
std::string fmt_num(double v) { return fmt::format("{}", v); }

// Each tensor's rows from every rank, in rank order (= token order: rank r holds the r-th block of sequences).
std::vector<NamedTensor> join_rows(Communicator& comm, std::vector<NamedTensor> mine) {
    for (NamedTensor& t : mine) {
        const std::vector<std::string> parts =
            comm.gather(std::string(reinterpret_cast<const char*>(t.data.data()), t.data.size()), 0);
        if (comm.rank() != 0) continue;
        MOEBENCH_CHECK(!t.shape.empty() && t.numel() > 0, "dump: tensor {} has no rows", t.name);
        const size_t row_bytes = t.data.size() / static_cast<size_t>(t.shape[0]);
        t.data.clear();
        for (const std::string& p : parts) t.data.insert(t.data.end(), p.begin(), p.end());
        t.shape[0] = static_cast<int64_t>(t.data.size() / row_bytes);
    }
    return mine;
}
}  // namespace

void dump_moe_layer(const std::string& dir, const Backend& backend, const ModelConfig& model, const RunConfig& cfg,
                    int64_t slot, int64_t layer, Communicator* comm) {
    const TensorAccess* tensors = backend.capability<TensorAccess>();
    MOEBENCH_CHECK(tensors != nullptr, "dump: backend {} offers no tensors (validation refuses this)", backend.name());
    TensorFile file;
    file.tensors = tensors->moe_block_tensors(slot);
    if (comm) {
        file.tensors = join_rows(*comm, std::move(file.tensors));
        if (comm->rank() != 0) return;
    }
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
    if (comm) {
        file.metadata["expert_parallel"] = fmt::format("{} processes, {} {}, dispatch {}", comm->world_size(),
                                                       flag_of("a2a"), cfg.layout.a2a, cfg.precision.dispatch_dtype);
        file.metadata["weights"] = "not written: each rank holds only its experts";
    }
    write_safetensors((std::filesystem::path(dir) / "moe_layer.safetensors").string(), file);
}

}  // namespace moebench
