// SPDX-License-Identifier: Apache-2.0
#include "metrics/moe_samples.hpp"

namespace moebench {

namespace {
template <class T>
void add_into(std::vector<T>& sum, const std::vector<T>& v) {
    if (sum.size() < v.size()) sum.resize(v.size(), T{});
    for (size_t i = 0; i < v.size(); ++i) sum[i] += v[i];
}
}  // namespace

void add_traffic(RankTraffic& sum, const RankTraffic& step) {
    add_into(sum.dispatch_payload_bytes, step.dispatch_payload_bytes);
    add_into(sum.dispatch_meta_bytes, step.dispatch_meta_bytes);
    add_into(sum.combine_payload_bytes, step.combine_payload_bytes);
    add_into(sum.dispatch_rows, step.dispatch_rows);
    sum.rows_received += step.rows_received;
    sum.expert_rows += step.expert_rows;
    sum.dispatch_wait_us += step.dispatch_wait_us;
    sum.dispatch_exchange_us += step.dispatch_exchange_us;
    sum.combine_wait_us += step.combine_wait_us;
    sum.combine_exchange_us += step.combine_exchange_us;
}

void add_counted_step(MoeLayerSamples& s, const std::vector<int64_t>& tokens_per_expert, double a2a_rows) {
    if (!s.counted.empty() && s.counted.back().a2a_rows == a2a_rows &&
        s.counted.back().tokens_per_expert == tokens_per_expert) {
        ++s.counted.back().steps;
        return;
    }
    s.counted.push_back({tokens_per_expert, a2a_rows, 1});
}

int64_t MoeLayerSamples::counted_steps() const {
    int64_t n = 0;
    for (const CountedSteps& c : counted) n += c.steps;
    return n;
}

}  // namespace moebench
