// SPDX-License-Identifier: Apache-2.0
// Expert offload on the cpu backend, the host analogue of a GPU's expert cache: each MoE layer's cache of N
// resident experts replays the step's routing (workload/offload_replay.hpp), and expert_fetch copies each missed
// expert's weights (gate, up and down, fp32) from where they live into a fetch buffer of k expert slots with memcpy:
// a copy between two regions of host memory, timed as the phase, standing in for a host-to-device copy.
#include "backends/cpu/cpu_backend_impl.hpp"

#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "config/run_fields.hpp"
#include "workload/expert_cache.hpp"

#include <fmt/format.h>

#include <cstring>

namespace moebench::cpu {

void CpuBackend::offload_setup() {
    offload_.reset();
    fetch_buf_ = FBuf{};
    fetched_experts_ = fetched_bytes_ = 0;
    if (d_.E == 0 || !opt_.layout.offloads(d_.E)) return;
    const OffloadPolicy& policy = offload_policy(opt_.layout.offload_policy, run_field_label("", "offload_policy"));
    if (policy.offline || policy.prefetches)
        config_error(run_field_label("", "offload_policy"),
                     "is not run by the cpu backend, which sees the routing one step at a time", policy.name,
                     "use lru or lfu here; moebench offload " + flag_of("policy") + " " + policy.name +
                         " replays a whole trace");
    offload_ = std::make_unique<StepExpertCaches>(static_cast<int64_t>(layers_.size()), d_.E,
                                                  opt_.layout.resident_of(d_.E), policy);
    // One slot per expert a token selects: a layer's fetches cycle through them.
    fetch_slots_ = std::max<int64_t>(d_.K, 1);
    fetch_buf_.alloc(fetch_slots_ * expert_floats());
}

int64_t CpuBackend::expert_floats() const {
    for (size_t s = 0; s < layers_.size(); ++s) {
        const LayerWeights& w = w_.layers[s];
        if (w.is_moe) return (w.w_gu.n + w.w_down.n) / d_.E;
    }
    return 0;
}

void CpuBackend::phase_expert_fetch(int64_t slot) {
    LayerWeights& w = lw(slot);
    if (!w.is_moe || !offload_) return;
    const MoeSlotState& st = moe_[static_cast<size_t>(slot)];
    const std::vector<int32_t> ids(ids_.begin(), ids_.begin() + T_ * st.k);
    const std::vector<int32_t> fetched = offload_->access(slot, ids);
    const int64_t gu = w.w_gu.n / d_.E, down = w.w_down.n / d_.E;
    for (size_t i = 0; i < fetched.size(); ++i) {
        float* dst = fetch_buf_.data() + static_cast<int64_t>(i % static_cast<size_t>(fetch_slots_)) * (gu + down);
        std::memcpy(dst, w.w_gu.data() + fetched[i] * gu, sizeof(float) * static_cast<size_t>(gu));
        std::memcpy(dst + gu, w.w_down.data() + fetched[i] * down, sizeof(float) * static_cast<size_t>(down));
    }
    fetched_experts_ += static_cast<int64_t>(fetched.size());
    fetched_bytes_ += static_cast<int64_t>(fetched.size()) * (gu + down) * static_cast<int64_t>(sizeof(float));
}

json CpuBackend::offload_json() const {
    if (!offload_) return nullptr;
    return {{"source", "counted"},
            {"what",
             "host analogue: expert_fetch is a memcpy of each missed expert's fp32 weights between two regions "
             "of host memory (a fetch buffer of k expert slots), measured by host clocks; not a PCIe copy"},
            {"policy", opt_.layout.offload_policy},
            {"resident_experts", offload_->resident()},
            {"num_experts", d_.E},
            {"start", "experts 0..N-1 resident in every layer; warm-up steps fill the caches"},
            {"accesses", offload_->accesses()},
            {"hits", offload_->hits()},
            {"hit_rate", offload_->accesses() > 0
                             ? static_cast<double>(offload_->hits()) / static_cast<double>(offload_->accesses())
                             : 0.0},
            {"fetched_experts", fetched_experts_},
            {"fetched_bytes", fetched_bytes_},
            {"expert_bytes", expert_floats() * static_cast<int64_t>(sizeof(float))}};
}

}  // namespace moebench::cpu
