// SPDX-License-Identifier: Apache-2.0
// `moebench bench moe`: the MoE block of one layer on the cpu backend, phase by phase, against the physical floor of
// this machine (touched weight bytes / measured read bandwidth vs FLOPs / measured sgemm rate, same run). The
// document is "moebench.bench_moe/1"; its views are the format table's (report/formats.hpp).
#pragma once
#include "common/json_util.hpp"
#include "core/step.hpp"

#include <cstdint>
#include <string>

namespace moebench {

/// What to measure. The fields are checked by bench_moe (ConfigError naming the field).
struct BenchMoeRequest {
    std::string model;   // short name, moebench model file or HF config.json
    int64_t layer = -1;  // model layer; -1 = the first MoE layer
    Mode mode = Mode::decode;
    int64_t num_tokens = 0;          // tokens of the step; 0 = the mode's default (bench_moe_default_tokens)
    std::string routing = "router";  // workload spec (workload/routing_spec.hpp)
    int64_t threads = 0;             // 0 = all cores
    int64_t iters = 10;              // measured iterations
    int64_t warmup = 2;              // iterations run first, not measured
    int64_t seed = 0;                // weights, inputs and synthetic routing
    bool warm_cache = false;         // false: the LLC is evicted before each iteration
    std::string expert_gemm = "auto";
    std::string dump_routing;  // the routing used, written here (safetensors); "" = not written
};

/// The tokens of a step when the request gives none: decode 8, prefill 4096.
int64_t bench_moe_default_tokens(Mode mode);

/// The request's fields, checked before anything is loaded or measured (ConfigError naming the field).
void check_bench_moe_request(const BenchMoeRequest& r);

/// validate -> prepare -> measure -> derive -> record on the engine's MoE-block plan, between read passes that also
/// evict the LLC; returns the moebench.bench_moe/1 document (and writes dump_routing when asked).
json bench_moe(const BenchMoeRequest& r);

}  // namespace moebench
