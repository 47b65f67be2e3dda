// SPDX-License-Identifier: Apache-2.0
// RoutingTrace: a recorded (or generated) routing stream, and its on-disk form (safetensors, docs/trace-format.md).
// Layer slot j of a trace is the j-th MoE layer of the model it was recorded on.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace moebench {

inline constexpr const char* kTraceFormatVersion = "1";

/// Bounds on what a trace may claim, checked before anything is sized by them. Far above real models (384 routed
/// experts and fewer than 100 MoE layers as of 2025), and small enough that trace info's per-expert tables (an
/// [E, E] co-activation count per layer) stay within a few hundred MB.
inline constexpr int64_t kMaxTraceExperts = 4096;
inline constexpr int64_t kMaxTraceLayers = 4096;
/// Token positions (JSONL token_idx) beyond this are refused: no recorded sequence is that long.
inline constexpr int64_t kMaxTraceTokenIndex = int64_t{1} << 40;

struct RoutingTrace {
    int64_t num_layers = 0;  // MoE layers recorded
    int64_t num_tokens = 0;
    int64_t top_k = 0;
    int64_t num_experts = 0;          // of the model it was recorded on (ids are < num_experts, or -1)
    std::vector<int32_t> topk_ids;    // [layers, tokens, k]; -1 = no selection recorded
    std::vector<float> topk_weights;  // empty, or [layers, tokens, k]
    std::vector<int32_t> token_ids;   // empty, or [tokens]
    std::vector<int64_t> seq_starts;  // first token of each sequence; starts with 0 when num_tokens > 0
    std::string model;
    std::string source;  // how it was made ("moebench trace gen zipf:1.2 seed=0", "convert x.jsonl")
    std::map<std::string, std::string> extra_metadata;  // any other metadata, kept on round trips

    const int32_t* layer_ids(int64_t layer) const { return topk_ids.data() + layer * num_tokens * top_k; }
    const float* layer_weights(int64_t layer) const {
        return topk_weights.empty() ? nullptr : topk_weights.data() + layer * num_tokens * top_k;
    }
    /// Selections equal to -1 (all layers).
    int64_t num_missing() const;
};

/// The trace token a run replays at stream position `pos`. With a decode batch (`batch` > 0) over a trace of several
/// sequences, the sequences are interleaved: row pos % batch of step pos / batch reads sequence (row mod S), the
/// copies of one sequence spread along it, one token further each step; otherwise the stream in order, wrapping.
/// The trace workload and `moebench place` both replay by it.
int64_t trace_token_at(const RoutingTrace& trace, int64_t pos, int64_t batch);

/// Checks sizes and ranges (num_experts and num_layers within the bounds above, ids in [-1, num_experts), no expert
/// twice in a token, finite weights, sequences sorted and starting at 0); ConfigError naming `where` (a file).
void validate_trace(const RoutingTrace& t, const std::string& where);

/// An expert id that appears more than once among one token's k ids (-1, no selection, may repeat), or -1.
int32_t repeated_expert(const int32_t* ids, int64_t k);

/// The model layer index of each layer slot, from the `layer_indices` metadata that trace gen writes; empty when the
/// trace does not give one valid index per slot (e.g. after trace convert).
std::vector<int64_t> model_layers_of(const RoutingTrace& t);

/// Writes the safetensors form atomically (validates first).
void write_trace(const std::string& path, const RoutingTrace& t);
/// Reads and validates; a malformed file or inconsistent metadata is a ConfigError naming the file.
RoutingTrace read_trace(const std::string& path);

}  // namespace moebench
