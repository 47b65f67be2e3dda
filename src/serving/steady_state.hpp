// SPDX-License-Identifier: Apache-2.0
// The steady state of in-flight batching with chunked prefill (docs/deploy.md, "The model"): C requests in flight,
// each cycle every request finishes once and a new one arrives in its place; the cycle's prefill tokens (C x I) packed
// into steps under the chunk budget beside the decode batch. Pure arithmetic over a step pricer, so that tests can
// hand it step times they reason about.
#pragma once
#include "core/phase.hpp"

#include <array>
#include <cstdint>
#include <functional>

namespace moebench {

/// The modeled time of each phase of one whole-model step, microseconds (summed over the layers).
struct PhaseTimes {
    std::array<double, kNumPhases> us{};
    double total_us() const;
    PhaseTimes& operator+=(const PhaseTimes& o);
    PhaseTimes scaled(double f) const;
};

/// Prices one step: `decode` sequences decoding (contexts spread over I .. I + O) beside `prefill_tokens` tokens of
/// prompt chunks (0 = a pure decode step; decode 0 = prompt chunks alone).
using MixedStepPrice = std::function<PhaseTimes(int64_t decode, int64_t prefill_tokens)>;

struct ServingLoad {
    int64_t isl = 0;                 // I: prompt tokens per request
    int64_t osl = 0;                 // O: output tokens per request
    int64_t concurrency = 0;         // C: requests in flight
    int64_t max_prefill_tokens = 0;  // B: prompt tokens one step may carry
};

struct SteadyState {
    // The cycle: every request finishes once.
    int64_t prefill_steps = 0;      // n_p = ceil(C I / B): steps that carry prompt chunks
    int64_t last_chunk_tokens = 0;  // r: the last of them carries C I - (n_p - 1) B (the others B)
    int64_t steps = 0;              // S = max(O, n_p)
    int64_t decode_batch = 0;       // D = round(C O / S), at least 1: sequences decoding in each step
    bool prefill_bound = false;     // n_p > O: the chunk budget, not the decode batch, sets the pace
    double decode_step_us = 0;      // step(D, 0)
    double full_chunk_step_us = 0;  // step(D, B) (0 when n_p = 1)
    double last_chunk_step_us = 0;  // step(D, r)
    double cycle_us = 0;            // (n_p - 1) step(D, B) + step(D, r) + (S - n_p) step(D, 0)
    PhaseTimes mean_step;           // the cycle's steps' phases, averaged over its S steps
    // The figures.
    double ttft_us = 0;              // queue + the request's own chunks, each beside D - 1 decoding sequences
    double queue_us = 0;             // prefill-bound: (S - O - k) mean steps waiting, k = ceil(I / B)
    double tpot_us = 0;              // cycle / S: the mean step
    double tpot_p90_us = 0;          // 90th percentile of the cycle's S step times (linear interpolation)
    double output_tokens_per_s = 0;  // C O / cycle, all GPUs together
    double input_tokens_per_s = 0;   // C I / cycle
};

SteadyState steady_state(const ServingLoad& load, const MixedStepPrice& step);

}  // namespace moebench
