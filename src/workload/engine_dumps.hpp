// SPDX-License-Identifier: Apache-2.0
// The per-token routed-expert dumps serving engines write, read into a RoutingTrace (`moebench trace convert`):
// vLLM's returned routed experts (a raw or base64 .npy [tokens, layers, k]; the v0.21 nested lists), SGLang's
// meta_info.routed_experts (base64 of raw integers, shaped by the model's layers and top-k), Megatron's router trace
// (JSONL, one record per step and layer) and its chat completions' moe_topk_indices. Formats, with the engine sources
// they follow, in docs/trace-format.md ("Engine dumps").
#pragma once
#include "config/model_config.hpp"
#include "workload/trace.hpp"
#include "workload/trace_import.hpp"

#include <string>

namespace moebench {

/// Which engine dump the file at `path` is, by content: "npy", "vllm", "sglang", "megatron-chat", "megatron-trace", or
/// "" (not an engine dump: the JSONL and text forms of trace_import.hpp). Aggregate load files (SGLang's
/// logical_count JSON and its legacy layer_id,expert_id,count CSV) are refused here: they hold counts, not each
/// token's experts.
std::string engine_dump_kind(const std::string& path);

/// Reads an engine dump of `kind`. `model` (may be null) says which rows of a dump's layer axis are MoE layers (vLLM
/// and SGLang give every layer a row; dense rows are dropped), the top-k, the expert count and, for SGLang's raw
/// integers, the layer count; `num_experts` (0 = the model's, else the largest id + 1) overrides it. Each request (or
/// each choice of one, or each step of a Megatron trace) is one sequence. Malformed input: ConfigError naming the file,
/// the field and the fix.
RoutingTrace trace_from_engine_dump(const std::string& path, const std::string& kind, const ModelConfig* model,
                                    int64_t num_experts, ImportSummary* summary);

}  // namespace moebench
