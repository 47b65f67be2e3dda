// SPDX-License-Identifier: Apache-2.0
// The steps a serving steady state needs, priced by the sim through the harness (run_point, as `moebench run
// --backend sim --record brief` prices them: the same phases, layout, number formats and routing), memoized per
// shape. A step that mixes decoding sequences and prompt chunks is composed from the sim's own steps (docs/deploy.md,
// "Mixed steps"): the phases that see tokens, not contexts, from a decode step of all the step's tokens; attention and
// the LM head from the decode batch alone; the chunk's attention as its share of the whole prompt's.
#pragma once
#include "config/run_config.hpp"
#include "serving/steady_state.hpp"

#include <cstdint>
#include <map>
#include <tuple>

namespace moebench {

class SimStepPricer {
public:
    /// `base`: model, hardware, layout, precision, routing and seed of the deployment (its shape is set here); the
    /// decode steps' context is isl + osl / 2, the mean of contexts spread uniformly over isl .. isl + osl.
    SimStepPricer(RunConfig base, int64_t isl, int64_t osl);
    /// A decode step of `batch` sequences at the mean context.
    PhaseTimes decode(int64_t batch);
    /// A prefill step of one prompt of `tokens` tokens from an empty cache.
    PhaseTimes prompt(int64_t tokens);
    /// `decode` sequences decoding beside `prefill_tokens` prompt tokens (chunks of prompts of isl tokens).
    PhaseTimes mixed(int64_t decode, int64_t prefill_tokens);
    int64_t decode_context() const { return context_; }
    /// Distinct sim steps priced so far.
    int64_t steps_priced() const { return static_cast<int64_t>(memo_.size()); }

private:
    PhaseTimes priced(Mode mode, int64_t batch, int64_t seq_len, int64_t context);
    /// Of a step's `share` prompts (its prompt tokens / isl), those whose attention the busiest attention replica
    /// computes: a chunk of one prompt whole on one replica, more spread over attn_dp.
    double prompts_on_busiest_replica(double share) const;
    RunConfig base_;
    int64_t isl_, context_, attn_dp_;
    std::map<std::tuple<int, int64_t, int64_t, int64_t>, PhaseTimes> memo_;
};

}  // namespace moebench
