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

}  // namespace moebench
