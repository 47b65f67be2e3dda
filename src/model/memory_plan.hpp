// SPDX-License-Identifier: Apache-2.0
// Memory plan per GPU under expert/tensor parallelism: weights by dtype, KV cache, activation estimate, headroom.
// Pure arithmetic on a ModelConfig and a HardwareProfile (figures are "modeled"; weights and KV are counted from
// shapes).
#pragma once
#include "config/hardware.hpp"
#include "config/layout_request.hpp"
#include "config/model_config.hpp"
#include "core/precision.hpp"
#include "model/accounting.hpp"

#include <array>
#include <cstdint>
#include <string>

namespace moebench {

/// What a plan is of: the number formats of the weights and KV cache (plan counts no activations' format but the one
/// that goes with the dense weights), the layout, and the load. The layout: attention (and dense layers, shared
/// experts, embedding, LM head) split over attn_tp and replicated over attn_dp, each replica holding batch / attn_dp
/// sequences; routed experts split over every GPU (moe_ep whole-expert ranks x moe_tp); norms and router replicated.
struct PlanInput {
    Precision precision = uniform_precision(DType::bf16);
    Layout layout;
    int64_t batch = 1;         // concurrent sequences
    int64_t context = 4096;    // tokens per sequence in the KV cache
    bool include_mtp = false;  // MTP module weights (and KV) counted in memory
};

/// Activation estimate constants (see docs/plan-schema.md for the formula).
inline constexpr int64_t kPrefillChunkTokens = 2048;  // chunked prefill: at most this many tokens per step
inline constexpr double kWorkspaceBytes =
    1024.0 * 1024 * 1024;  // CUDA context, cuBLAS/NCCL workspaces, allocator slack

struct MemoryPlan {
    // Per GPU, bytes.
    std::array<double, kNumComponents> weights_by_component_bytes{};
    double weights_bytes = 0;
    double kv_bytes_per_token = 0;             // whole model, one token, unsharded (all layers, full attention)
    double kv_bytes_per_token_per_gpu = 0;     // this GPU's share (GQA heads split over tp; MLA latent replicated)
    double kv_bytes_per_sequence_per_gpu = 0;  // one sequence at `context` (sliding-window layers keep <= window
                                               // tokens; linear-attention layers their fixed state, included here)
    double linear_state_bytes_per_sequence_per_gpu = 0;  // of which: the linear-attention recurrent state (fp32)
    int64_t sequences_per_gpu = 0;                       // ceil(batch / dp)
    double kv_cache_bytes = 0;                           // sequences_per_gpu sequences at `context`
    double activation_only_bytes = 0;                    // live activations of one step (formula in the docs)
    double workspace_bytes = 0;
    double activation_bytes = 0;    // activation_only + workspace
    int64_t activation_tokens = 0;  // tokens per GPU per step the estimate assumes
    double capacity_bytes = 0;
    double free_bytes = 0;                 // capacity - weights - kv_cache - activation (negative: does not fit)
    bool weights_fit = false;              // weights + activation <= capacity
    bool fits = false;                     // free_bytes >= 0
    int64_t max_concurrent_sequences = 0;  // over all dp replicas, at `context`
    // Expert offload (layout resident_experts / offload_ratio): the routed experts component above holds N experts
    // of each MoE layer plus the fetch buffers; the offloaded experts stay in host memory.
    int64_t resident_experts = 0;      // N per MoE layer (0: no offload, every expert resident)
    int64_t fetch_buffer_experts = 0;  // 2 x top-k: one layer's experts, double-buffered
    double fetch_buffer_bytes = 0;     // per GPU, in the routed experts component
    double host_expert_bytes = 0;      // (E - N) x MoE layers x one expert, in host memory
};

MemoryPlan plan_memory(const ModelConfig& m, const HardwareProfile& hw, const PlanInput& in);

/// The smallest layout (fewest GPUs) whose weights + activation fit (with `whole`: weights, KV cache and activations,
/// MemoryPlan::fits), searching ep over divisors of the expert count and tp over divisors of the heads (the layouts
/// of --ep and --tp alone). found = false when none up to max(experts, heads) GPUs fits.
struct MinLayout {
    bool found = false;
    Layout layout;
};
MinLayout min_layout_for_weights(const ModelConfig& m, const HardwareProfile& hw, const PlanInput& in,
                                 bool whole = false);

/// Why a deployment does not fit (plan.fits false: weights + KV cache + activations and workspace over the
/// capacity) and what would, as the parts of a refusal (config_error): the flags to change, what needs how much, the
/// layout and formats given, and the fix: when the weights fit, the largest batch that fits, the fp8 KV cache or
/// more GPUs; else the largest weight format the profile computes that fits these GPUs (--dtype, else
/// --expert-dtype), and the fewest GPUs of an --ep/--tp layout that fit in the formats given.
struct FitAdvice {
    std::string field, what, value, fix;
};
FitAdvice fit_advice(const ModelConfig& m, const HardwareProfile& hw, const PlanInput& in, const MemoryPlan& plan);

/// Throws ConfigError (naming the layout's fields: "use at least N GPUs: --ep A --tp B") when the weights do not fit.
void require_weights_fit(const ModelConfig& m, const HardwareProfile& hw, const PlanInput& in, const MemoryPlan& plan);

}  // namespace moebench
