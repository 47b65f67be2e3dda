// SPDX-License-Identifier: Apache-2.0
// The parallel layout of one deployment, as one typed value that plan, run, sweep, place and the sim read: how many
// GPUs (or processes) split attention (tensor parallel x data parallel) and the routed experts (expert tensor parallel
// x expert parallel), where the experts live and how tokens reach them. What a run asks for is resolved and checked
// against the model once, in config/run_layout.hpp.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace moebench {

/// How a token reaches the ranks that hold its experts (expert parallelism).
enum class A2aMode {
    dedup,       // a token once to each rank that holds any of its experts (high-throughput EP kernels)
    per_expert,  // one row per (token, expert) assignment (low-latency EP kernels)
};
std::string_view to_string(A2aMode m);

/// How a MoE layer's tokens reach the GPUs that hold their routed experts, and the experts' outputs come back.
enum class MoeExchange {
    local,       // one GPU: nothing crosses
    all_to_all,  // attention data-parallel only, experts expert-parallel only (attn_tp = moe_tp = 1): dispatch_a2a
                 // sends each token's row to the ranks that hold its experts, combine_a2a brings it back (DeepEP's)
    gather,      // any tensor parallelism: every GPU gathers the step's tokens (moe_allgather, only when attention has
                 // more than one data-parallel replica), computes its own experts' share of them, and the partial
                 // outputs are summed over the GPUs (moe_allreduce): vLLM's all-gather/reduce-scatter, TP MoE's
                 // all-reduce
};
std::string_view to_string(MoeExchange e);

/// attn_tp x attn_dp GPUs run attention (and the dense layers, shared experts, embedding and LM head: split over
/// attn_tp, replicated over attn_dp, each replica holding its share of the sequences); moe_tp x moe_ep GPUs run the
/// routed experts (experts / moe_ep whole experts per EP rank, each split over moe_tp). Both products are the GPU
/// count. Today's runs: `--ep N` = attention DP N with expert EP N (attn_tp = moe_tp = 1).
struct Layout {
    int64_t attn_tp = 1;
    int64_t attn_dp = 1;
    int64_t moe_tp = 1;
    int64_t moe_ep = 1;
    A2aMode a2a = A2aMode::dedup;
    std::string placement;          // expert placement file (moebench place); "" = contiguous blocks
    int64_t redundant_experts = 0;  // extra expert slots per MoE layer, each a replica of a hot expert (EPLB); moe_ep
                                    // divides it (workload/redundant_experts.hpp chooses the replicas)
    // Expert offload (one GPU): routed experts per MoE layer kept on the device, the rest in host memory and fetched
    // on a miss (phase expert_fetch); resident_experts N, or offload_ratio R (N = E - round(R x E), at least 1); 0 and
    // 0: every expert resident. offload_policy: which stay (a row of workload/expert_cache.cpp's policy table).
    int64_t resident_experts = 0;
    double offload_ratio = 0;
    std::string offload_policy = "lru";

    int64_t num_gpus() const { return attn_tp * attn_dp; }
    bool expert_parallel() const { return moe_ep > 1; }
    bool tensor_parallel() const { return attn_tp > 1 || moe_tp > 1; }
    MoeExchange moe_exchange() const {
        if (num_gpus() == 1) return MoeExchange::local;
        return tensor_parallel() ? MoeExchange::gather : MoeExchange::all_to_all;
    }
    /// Copies of the routed experts' weights a MoE layer holds over all its GPUs, relative to one of each:
    /// (E + redundant_experts) / E. What plan and the sim multiply the routed experts' bytes by.
    double expert_copies(int64_t num_experts) const {
        return num_experts > 0 ? 1.0 + static_cast<double>(redundant_experts) / static_cast<double>(num_experts) : 1.0;
    }
    /// Routed experts resident per MoE layer of `num_experts`, or 0 when every expert is (no offload).
    int64_t resident_of(int64_t num_experts) const;
    bool offloads(int64_t num_experts) const { return resident_of(num_experts) > 0; }
    /// "8 GPUs: attention DP 8, experts EP 8" (", 32 redundant experts" when there are): for reports and messages.
    std::string describe() const;
    bool operator==(const Layout&) const = default;
};

/// --ep N alone: data-parallel attention over N ranks, experts over the same N ranks.
Layout ep_layout(int64_t ep);

}  // namespace moebench
