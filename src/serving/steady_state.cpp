// SPDX-License-Identifier: Apache-2.0
#include "serving/steady_state.hpp"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace moebench {

double PhaseTimes::total_us() const {
    double s = 0;
    for (double v : us) s += v;
    return s;
}

PhaseTimes& PhaseTimes::operator+=(const PhaseTimes& o) {
    for (size_t i = 0; i < us.size(); ++i) us[i] += o.us[i];
    return *this;
}

PhaseTimes PhaseTimes::scaled(double f) const {
    PhaseTimes r = *this;
    for (double& v : r.us) v *= f;
    return r;
}

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The q-quantile (numpy's linear rule over order statistics) of a multiset given as (value, count) pairs.
double quantile_of_counts(std::vector<std::pair<double, int64_t>> values, double q) {
    std::sort(values.begin(), values.end());
    int64_t n = 0;
    for (const auto& [v, c] : values) n += c;
    if (n <= 0) return 0;
    const double rank = q * static_cast<double>(n - 1);
    const auto lo = static_cast<int64_t>(std::floor(rank));
    const auto at = [&](int64_t i) {  // the i-th order statistic (0-based)
        for (const auto& [v, c] : values) {
            if (i < c) return v;
            i -= c;
        }
        return values.back().first;
    };
    const double a = at(lo), b = at(std::min(lo + 1, n - 1));
    return a + (b - a) * (rank - static_cast<double>(lo));
}

}  // namespace

SteadyState steady_state(const ServingLoad& load, const MixedStepPrice& step) {
    SteadyState s;
    const int64_t I = load.isl, O = load.osl, C = load.concurrency, B = load.max_prefill_tokens;
    const int64_t cycle_prompt = C * I;
    s.prefill_steps = ceil_div(cycle_prompt, B);
    s.last_chunk_tokens = cycle_prompt - (s.prefill_steps - 1) * B;
    s.steps = std::max(O, s.prefill_steps);
    s.prefill_bound = s.prefill_steps > O;
    s.decode_batch = std::max<int64_t>(
        1, std::llround(static_cast<double>(C) * static_cast<double>(O) / static_cast<double>(s.steps)));
    const int64_t D = s.decode_batch;

    const PhaseTimes dec = step(D, 0);
    const PhaseTimes last = step(D, s.last_chunk_tokens);
    const PhaseTimes full = s.prefill_steps > 1 ? step(D, B) : PhaseTimes{};
    const int64_t n_full = s.prefill_steps - 1, n_dec = s.steps - s.prefill_steps;
    s.decode_step_us = dec.total_us();
    s.last_chunk_step_us = last.total_us();
    s.full_chunk_step_us = full.total_us();
    PhaseTimes sum = last;
    sum += full.scaled(static_cast<double>(n_full));
    sum += dec.scaled(static_cast<double>(n_dec));
    s.cycle_us = sum.total_us();
    s.mean_step = sum.scaled(1.0 / static_cast<double>(s.steps));
    s.tpot_us = s.cycle_us / static_cast<double>(s.steps);
    s.tpot_p90_us =
        quantile_of_counts({{s.decode_step_us, n_dec}, {s.full_chunk_step_us, n_full}, {s.last_chunk_step_us, 1}}, 0.9);
    s.output_tokens_per_s = static_cast<double>(C * O) / (s.cycle_us * 1e-6);
    s.input_tokens_per_s = static_cast<double>(cycle_prompt) / (s.cycle_us * 1e-6);

    // The request's own prompt: k chunks of at most B, each in a step beside the D - 1 other sequences decoding.
    const int64_t k = ceil_div(I, B), others = D - 1;
    double ttft = step(others, I - (k - 1) * B).total_us();
    if (k > 1) ttft += static_cast<double>(k - 1) * step(others, B).total_us();
    if (s.prefill_bound) s.queue_us = static_cast<double>(std::max<int64_t>(0, s.steps - O - k)) * s.tpot_us;
    s.ttft_us = ttft + s.queue_us;
    return s;
}

}  // namespace moebench
