// SPDX-License-Identifier: Apache-2.0
#include "serving/step_pricer.hpp"

#include "config/layout_request.hpp"
#include "core/report_keys.hpp"
#include "harness/runner.hpp"

#include <algorithm>

namespace moebench {

SimStepPricer::SimStepPricer(RunConfig base, int64_t isl, int64_t osl)
    : base_(std::move(base)), isl_(isl), context_(isl + osl / 2), attn_dp_(resolve_layout(base_.layout).attn_dp) {
    base_.backend = "sim";
    base_.layers = 0;  // the whole model
    base_.first_layer = 0;
    base_.warmup = 0;  // a modeled step is the same every time (the statistical path draws once)
    base_.iters = 1;
    base_.max_iters = 1;
    base_.min_time_s = 0;
    base_.max_noise = 0;
    base_.record = "brief";
    base_.include_lm_head = true;
    base_.out.clear();
    base_.dump_tensors.clear();
    base_.check = false;
    base_.measure_ceilings = false;
    // A priced step is no deployment (a decode step of D + B tokens holds no KV cache of D + B sequences): deploy
    // checks the fit of C sequences at I + O itself.
    base_.allow_no_fit = true;  // (run_point is asked not to warn about it)
}

PhaseTimes SimStepPricer::priced(Mode mode, int64_t batch, int64_t seq_len, int64_t context) {
    const auto key = std::make_tuple(static_cast<int>(mode), batch, seq_len, context);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    RunConfig cfg = base_;
    cfg.shape.mode = mode;
    cfg.shape.batch = batch;
    cfg.shape.seq_len = seq_len;
    cfg.shape.context = context;
    const json record = run_point(cfg, PointOptions{.warn_no_fit = false, .cost_energy = false});
    PhaseTimes t;
    const json& phases = record.at(keys::kLatency).at(keys::kPhases);
    for (const PhaseInfo& row : kPhaseTable) {
        const auto it = phases.find(std::string(row.name));
        if (it != phases.end()) t.us[static_cast<size_t>(row.phase)] = it->at(keys::kMeanUs).get<double>();
    }
    memo_.emplace(key, t);
    return t;
}

PhaseTimes SimStepPricer::decode(int64_t batch) { return priced(Mode::decode, batch, 1, context_); }

PhaseTimes SimStepPricer::prompt(int64_t tokens) { return priced(Mode::prefill, 1, tokens, 0); }

namespace {
constexpr Phase kContextPhases[] = {Phase::attention, Phase::linear_attention};
}

double SimStepPricer::prompts_on_busiest_replica(double share) const {
    return share <= 1 ? share : std::max(1.0, share / static_cast<double>(attn_dp_));
}

PhaseTimes SimStepPricer::mixed(int64_t decode_batch, int64_t prefill_tokens) {
    if (prefill_tokens <= 0) return decode(decode_batch);
    // The chunk's attention: its share of the whole prompt's (the chunks of one prompt see, together, the pairs of
    // one causal prefill of isl tokens). More than a prompt's tokens are other requests' prompts, which attention data
    // parallelism spreads over its replicas (an engine schedules a request on one): the busiest replica computes
    // the attention of share / attn_dp prompts, at least one.
    const PhaseTimes whole_prompt = prompt(isl_);
    const double share = static_cast<double>(prefill_tokens) / static_cast<double>(isl_);
    PhaseTimes t;
    if (decode_batch <= 0) {
        if (prefill_tokens == isl_) return whole_prompt;
        // Whole prompts: the sim's own prefill step of that many sequences, spread over the replicas as the sim
        // spreads any batch (one sequence of all their tokens would put them on one replica).
        if (prefill_tokens % isl_ == 0) return priced(Mode::prefill, prefill_tokens / isl_, isl_, 0);
        if (prefill_tokens < isl_) {
            t = prompt(prefill_tokens);
            for (Phase p : kContextPhases)
                t.us[static_cast<size_t>(p)] = whole_prompt.us[static_cast<size_t>(p)] * share;
            return t;
        }
        t = decode(prefill_tokens);  // the tokens' phases, spread over the replicas
        for (Phase p : kContextPhases)
            t.us[static_cast<size_t>(p)] = whole_prompt.us[static_cast<size_t>(p)] * prompts_on_busiest_replica(share);
        t.us[static_cast<size_t>(Phase::lm_head)] = whole_prompt.us[static_cast<size_t>(Phase::lm_head)];
        return t;
    }
    t = decode(decode_batch + prefill_tokens);  // every phase that sees the step's tokens, not their contexts
    const PhaseTimes alone = decode(decode_batch);
    for (Phase p : kContextPhases)
        t.us[static_cast<size_t>(p)] = alone.us[static_cast<size_t>(p)] +
                                       whole_prompt.us[static_cast<size_t>(p)] * prompts_on_busiest_replica(share);
    // The LM head computes the decoding sequences' next tokens (a prompt chunk's rows need none but the last).
    t.us[static_cast<size_t>(Phase::lm_head)] = alone.us[static_cast<size_t>(Phase::lm_head)];
    return t;
}

}  // namespace moebench
