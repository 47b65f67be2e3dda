// SPDX-License-Identifier: Apache-2.0
// RunConfig: everything one benchmark point needs. Read from configs/runs/*.json (schema in docs/run-schema.md);
// command-line flags override its fields.
#pragma once
#include "common/json_util.hpp"
#include "config/layout_request.hpp"
#include "config/precision_request.hpp"
#include "core/step.hpp"

#include <cstdint>
#include <string>

namespace moebench {

// Upper bounds of a run's shape, far beyond any real step, so that sizes and products stay in range and a typo is
// refused before anything is allocated; also what a report read back may hold (src/report/report_reader.cpp).
inline constexpr int64_t kMaxStepTokens = int64_t{1} << 26;  // batch, seq_len, batch x seq_len (prefill)
inline constexpr int64_t kMaxContext = int64_t{1} << 32;     // tokens in the KV cache
inline constexpr int64_t kMaxThreads = 4096;

struct RunConfig {
    std::string model = "mixtral-8x7b";  // short name, moebench model file or HF config.json
    std::string hardware;                // optional profile for floors / peaks ("" = none)
    std::string backend = "auto";        // auto | cpu | cuda
    StepShape shape;                     // mode, batch, seq_len, context
    int64_t layers = 0;                  // run N layers from first_layer on (0 = all from there)
    int64_t first_layer = 0;             // the model layer the run starts at (0-based)
    std::string routing = "router";      // workload spec, see docs/workloads.md
    std::string routing_path = "auto";   // auto | per-token | statistical (harness/routing_path.hpp)
    RunOptions options;                  // seed, capacity factor, soft top-N, threads, ... (layout and precision:
                                         // resolved from the two requests below)
    LayoutRequest layout;                // ep, tp, attention_dp, moe_tp, moe_ep, a2a, placement
    PrecisionRequest precision;          // dtype, expert_dtype, kv_dtype, dispatch_dtype
    int64_t warmup = 2;
    int64_t iters = 10;
    double min_time_s = 0;  // keep iterating until this much measured time (bounded by max_iters)
    double max_noise = 0;   // stop early once CV of the step time is below this (0 = off)
    int64_t max_iters = 1000;
    bool include_lm_head = true;        // embed/final_norm/lm_head run once per step
    std::string out;                    // report path ("" = results/run-<time>.json, "-" = stdout)
    std::string record = "full";        // full | brief: the record's per-layer and per-expert tables, or not
    std::string dump_tensors;           // folder for moe_layer.safetensors ("" = off)
    bool check = false;                 // compare the first MoE block against the fp32 host reference (cuda, cpu)
    bool measure_ceilings = false;      // measure this machine's bandwidth and GEMM rate for the roofline block
    bool allow_no_fit = false;          // model (sim) a deployment that does not fit the profile's memory anyway
    std::string rank_timeout = "auto";  // under mpirun: seconds a collective may wait for the other ranks, or auto
    double max_cv = 0;                  // gate: exit 1 when a MoE layer's CV of tokens per expert exceeds it (0 = off)
    double min_balancedness = 0;        // gate: exit 1 when the balancedness falls below it (0 = off)
    double prune_below = 0;             // drop each MoE layer's experts with a share of the routing below it (0 = off)
};

/// Parses a run config object; `path` prefixes field names in errors.
RunConfig run_config_from_json(const json& j, const std::string& path);
json run_config_to_json(const RunConfig& r);
/// "decode" | "prefill" -> Mode; anything else -> ConfigError naming `field` (the JSON key or the flag).
Mode parse_mode(const std::string& s, const std::string& field);
/// A seed given as a signed number (JSON, flag); negative -> ConfigError naming `field`.
uint64_t parse_seed(int64_t seed, const std::string& field);
/// --rank-timeout: "auto" -> 0 (the rank deadline's automatic rule); seconds, a finite number in (0, 86400] ->
/// itself; anything else (0, negative, NaN, infinite, text) -> ConfigError naming `field`.
double parse_rank_timeout(const std::string& text, const std::string& field);
/// Checks values (batch >= 1, iters >= 1, ...); ConfigError naming the field. What depends on the backend (its
/// name, --expert-gemm, --cuda-graph, --check, ...) is checked by harness/validate.hpp against its traits.
void validate(const RunConfig& r);

}  // namespace moebench
