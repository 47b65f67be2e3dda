// SPDX-License-Identifier: Apache-2.0
// Memory plan per GPU under expert/tensor parallelism: weights by dtype, KV cache, activation estimate, headroom.
// Pure arithmetic on a ModelConfig and a HardwareProfile (figures are "modeled"; weights and KV are counted from shapes).
#pragma once
#include "config/hardware.hpp"
#include "config/model_config.hpp"
#include "model/accounting.hpp"

#include <array>
#include <cstdint>
#include <string>

namespace moebench {

/// Storage/compute type of the weights (and, for the KV cache, of its elements).
enum class DType { bf16, fp8, int4, fp32 };
const char* to_string(DType d);
/// Parses "bf16|fp8|int4|fp32"; anything else -> ConfigError naming `field`.
DType parse_dtype(const std::string& s, const std::string& field);

/// int4 convention: symmetric groups of kInt4GroupSize weights sharing one bf16 scale -> 0.5 + 2/128 bytes per weight.
inline constexpr int64_t kInt4GroupSize = 128;
/// Bytes per weight of a quantised linear layer (int4 includes its group scales).
double linear_bytes_per_param(DType d);
/// Bytes per weight of the layers that stay in high precision (embedding, LM head, norms, router): 4 for fp32, else 2.
double high_precision_bytes_per_param(DType d);
/// Bytes per KV-cache element: bf16 2, fp8 1, fp32 4 (int4 is refused by parse of --kv-dtype).
double kv_bytes_per_elem(DType d);

/// GPUs = max(ep, tp); the smaller divides the larger. Attention, dense MLP, shared experts, embedding and LM head are split
/// over tp and replicated over dp = GPUs / tp attention replicas (each holding batch / dp sequences). Routed experts are
/// split over ep ranks (experts / ep whole experts each), and each expert over etp = GPUs / ep ranks.
struct ParallelLayout {
    int64_t ep = 1;
    int64_t tp = 1;
    int64_t num_gpus() const { return ep > tp ? ep : tp; }
    int64_t dp() const { return num_gpus() / tp; }
    int64_t expert_tp() const { return num_gpus() / ep; }
};
/// ConfigError when ep/tp are < 1, do not divide each other, ep does not divide the experts (or ep > 1 on a dense model),
/// or tp does not divide the attention heads.
void validate_layout(const ModelConfig& m, const ParallelLayout& p);

struct PlanInput {
    DType dtype = DType::bf16;
    DType kv_dtype = DType::bf16;
    ParallelLayout par;
    int64_t batch = 1;          // concurrent sequences
    int64_t context = 4096;     // tokens per sequence in the KV cache
    bool include_mtp = false;   // MTP module weights (and KV) counted in memory
};

/// Activation estimate constants (see docs/plan-schema.md for the formula).
inline constexpr int64_t kPrefillChunkTokens = 2048;            // chunked prefill: at most this many tokens per step
inline constexpr double kWorkspaceBytes = 1024.0 * 1024 * 1024;  // CUDA context, cuBLAS/NCCL workspaces, allocator slack

struct MemoryPlan {
    // Per GPU, bytes.
    std::array<double, kNumComponents> weights_by_component_bytes{};
    double weights_bytes = 0;
    double kv_bytes_per_token = 0;          // whole model, one token, unsharded (all layers, full attention)
    double kv_bytes_per_token_per_gpu = 0;  // this GPU's share (GQA heads split over tp; MLA latent replicated)
    double kv_bytes_per_sequence_per_gpu = 0;  // one sequence at `context` (sliding-window layers keep <= window tokens;
                                               // linear-attention layers their fixed state, included here)
    double linear_state_bytes_per_sequence_per_gpu = 0;  // of which: the linear-attention recurrent state (fp32)
    int64_t sequences_per_gpu = 0;          // ceil(batch / dp)
    double kv_cache_bytes = 0;              // sequences_per_gpu sequences at `context`
    double activation_only_bytes = 0;       // live activations of one step (formula in the docs)
    double workspace_bytes = 0;
    double activation_bytes = 0;            // activation_only + workspace
    int64_t activation_tokens = 0;          // tokens per GPU per step the estimate assumes
    double capacity_bytes = 0;
    double free_bytes = 0;                  // capacity - weights - kv_cache - activation (negative: does not fit)
    bool weights_fit = false;               // weights + activation <= capacity
    bool fits = false;                      // free_bytes >= 0
    int64_t max_concurrent_sequences = 0;   // over all dp replicas, at `context`
};

MemoryPlan plan_memory(const ModelConfig& m, const HardwareProfile& hw, const PlanInput& in);

/// The smallest layout (fewest GPUs) whose weights + activation fit, searching ep over divisors of the expert count
/// and tp over divisors of the heads. found = false when none up to max(experts, heads) GPUs fits.
struct MinLayout {
    bool found = false;
    ParallelLayout par;
};
MinLayout min_layout_for_weights(const ModelConfig& m, const HardwareProfile& hw, const PlanInput& in);

/// Throws ConfigError ("--ep/--tp: ... use at least N GPUs: --ep A --tp B") when the weights do not fit.
void require_weights_fit(const ModelConfig& m, const HardwareProfile& hw, const PlanInput& in, const MemoryPlan& plan);

}  // namespace moebench
