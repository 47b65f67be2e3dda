// SPDX-License-Identifier: Apache-2.0
// --check: recomputes one MoE block on the host in fp32 from the tensors a backend ran it on (moe_block_tensors)
// and compares the output (relative L2) and the selected experts (exactly, except near-ties).
#pragma once
#include "common/json_util.hpp"
#include "common/tensor_file.hpp"
#include "config/model_config.hpp"
#include "core/step.hpp"
#include "engine/backend.hpp"  // CheckOptions: the tolerances a backend states in its traits

#include <cstdint>
#include <string>
#include <vector>

namespace moebench {

struct CheckResult {
    int64_t layer = -1;  // model layer index (set by the caller)
    int64_t tokens = 0;
    int64_t k = 0;
    double rel_l2_error = 0;  // ||out - ref|| / ||ref|| (absolute when ||ref|| == 0)
    double max_abs_error = 0;
    double ref_l2_norm = 0;
    double tolerance = 0;
    double tie_epsilon = 0;
    int64_t ids_mismatched = 0;        // tokens whose expert set differs from the reference (not near-ties)
    int64_t ids_near_tie = 0;          // tokens whose expert set differs where the k-th and (k+1)-th scores tie
    double weights_max_abs_error = 0;  // combine weights, over tokens whose expert sets agree
    std::string routing_from;          // how the reference chose the experts
    bool passed = false;
    std::string failure;  // why it failed ("" when passed)
};

/// Recomputes the MoE block of `tensors` (moe_in, router_weight, [router_bias], [e_score_correction_bias], w_gate,
/// w_up, w_down, [b_gate, b_up, b_down], [shared_w_gate, shared_w_up, shared_w_down, [shared_gate_weight]],
/// topk_ids, topk_weights, moe_out; docs/report-schema.md) in fp32 with OpenBLAS and compares.
/// Routing: logits = moe_in . router_weight^T (+ router_bias), then the family's route_row (or soft top-N) from
/// core/moe_core.cuh, or `override_routing` when a workload imposed the step's selection; then the capacity
/// drops of opt.capacity_factor. Where the backend's expert set differs from the reference only at a near-tie,
/// the reference adopts the backend's choice for that token (counted in ids_near_tie) so that the output
/// comparison stays meaningful. Missing or misshapen tensors -> Error.
CheckResult check_moe_block(const ModelConfig& m, const RunOptions& opt, const std::vector<NamedTensor>& tensors,
                            const LayerRouting* override_routing, const CheckOptions& o);

/// Whether one token's expert selection sits at a near-tie, as check_moe_block excuses one: in the family's
/// selection domain (or soft top-N's), `logits` the token's E router logits (router bias included), `corr` the
/// score-correction bias (nullptr if none), scores a, b tying when |a - b| <= eps * max(1, |a|, |b|).
bool routing_near_tie(const ModelConfig& m, const RunOptions& opt, const float* logits, const float* corr, double eps);

/// The report's `check` block: {source, layer, rel_l2_error, tolerance, ids_mismatched, ids_near_tie, tokens,
/// passed, ...} (docs/report-schema.md).
json to_json(const CheckResult& r);

}  // namespace moebench
