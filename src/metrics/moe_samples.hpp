// SPDX-License-Identifier: Apache-2.0
// What the measured steps of one MoE layer produced, gathered step after step: the input of the load, routing and
// roofline derivations.
#pragma once
#include "core/step.hpp"

#include <cstdint>
#include <vector>

namespace moebench {

struct MoeLayerSamples {
    int64_t slot = 0;   // index into the layers run
    int64_t layer = 0;  // model layer index
    int64_t k = 0;
    std::vector<int32_t> ids;   // [steps * T, k], steps in order; -1 = dropped
    std::vector<float> logits;  // [logit_tokens, E]
    int64_t logit_tokens = 0;
    std::vector<double> expert_gemm_us;  // per expert, summed over gemm_steps
    int64_t gemm_steps = 0;
    int64_t backend_dropped = 0;  // capacity drops as the backend counted them
    RankTraffic traffic;          // expert parallelism over processes: this rank's, summed over traffic_steps
    int64_t traffic_steps = 0;
    /// Steps routed by counts alone, without ids (the sim's statistical routing path), consecutive equal steps as one
    /// entry: what the load and roofline derivations read in place of ids (per-token figures, such as windows,
    /// co-activation and switches, need ids and are left out).
    struct CountedSteps {
        std::vector<int64_t> tokens_per_expert;  // [E] of one step
        double a2a_rows = 0;                     // rows across ranks in each all-to-all of one step
        int64_t steps = 0;
    };
    std::vector<CountedSteps> counted;
    int64_t counted_steps() const;
};

/// Appends one step routed by counts (merged into the last entry when equal).
void add_counted_step(MoeLayerSamples& s, const std::vector<int64_t>& tokens_per_expert, double a2a_rows);

/// Adds one step's traffic of a layer into a running sum (the byte rows element by element).
void add_traffic(RankTraffic& sum, const RankTraffic& step);

}  // namespace moebench
