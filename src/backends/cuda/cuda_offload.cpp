// SPDX-License-Identifier: Apache-2.0
// Expert offload on the cuda backend: every run layer's experts also live in pinned host memory (the offloaded
// copies); each MoE layer's cache of N resident experts replays the step's routing (workload/offload_replay.hpp),
// and expert_fetch copies each missed expert's weights from pinned host memory into a device fetch buffer of k
// expert slots with cudaMemcpyAsync on a copy stream, which the step's stream waits for: the phase's events time
// the copies. Reading the routing needs the ids on the host, one synchronisation per MoE layer (offload cannot be
// captured in a CUDA graph, and is refused with --cuda-graph).
#include "backends/cuda/cuda_backend_impl.hpp"

#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "config/run_fields.hpp"
#include "workload/expert_cache.hpp"

#include <fmt/format.h>

namespace moebench::cuda_detail {

void CudaBackend::offload_setup() {
    offload_.reset();
    offload_host_.clear();
    fetched_experts_ = 0;
    const int64_t E = m_.moe.num_experts;
    if (E == 0 || !opt_.layout.offloads(E)) return;
    const OffloadPolicy& policy = offload_policy(opt_.layout.offload_policy, run_field_label("", "offload_policy"));
    if (policy.offline || policy.prefetches)
        config_error(run_field_label("", "offload_policy"),
                     "is not run by the cuda backend, which sees the routing one step at a time", policy.name,
                     "use lru or lfu here; moebench offload " + flag_of("policy") + " " + policy.name +
                         " replays a whole trace");
    if (opt_.cuda_graph)
        config_error(run_field_label("", "cuda_graph"),
                     "cannot capture expert offload (the host reads each layer's "
                     "routing to choose the copies)",
                     "true", "drop " + flag_of("cuda_graph") + ", or drop the offload");
    offload_ =
        std::make_unique<StepExpertCaches>(static_cast<int64_t>(layers_.size()), E, opt_.layout.resident_of(E), policy);
    copy_stream_ = std::make_unique<CudaStream>();
    int64_t per_expert = 0;
    for (const auto& L : layers_) {
        offload_host_.emplace_back();
        if (!L->moe) continue;
        const int64_t gu = L->w_gu.size() / E, down = L->w_down.size() / E;
        per_expert = gu + down;
        PinnedBuffer<bf16>& host = offload_host_.back();
        host.resize(E * per_expert);
        for (int64_t e = 0; e < E; ++e) {  // expert e as [gate|up, down], a copy of the device weights
            MOEBENCH_CUDA_CHECK(cudaMemcpy(host.get() + e * per_expert, L->w_gu.get() + e * gu, gu * sizeof(bf16),
                                           cudaMemcpyDeviceToHost));
            MOEBENCH_CUDA_CHECK(cudaMemcpy(host.get() + e * per_expert + gu, L->w_down.get() + e * down,
                                           down * sizeof(bf16), cudaMemcpyDeviceToHost));
        }
    }
    fetch_slots_ = std::max<int64_t>(k_, 1);
    fetch_dev_.resize(fetch_slots_ * per_expert);
    offload_ids_.resize(T_ * std::max<int64_t>(k_, 1));
    expert_elems_ = per_expert;
}

void CudaBackend::phase_expert_fetch(Layer& L, int64_t slot_idx) {
    if (!L.moe || !offload_) return;
    const int64_t n = T_ * k_;
    MOEBENCH_CUDA_CHECK(
        cudaMemcpyAsync(offload_ids_.get(), L.ids.get(), n * sizeof(int32_t), cudaMemcpyDeviceToHost, s()));
    MOEBENCH_CUDA_CHECK(cudaStreamSynchronize(s()));
    const std::vector<int32_t> ids(offload_ids_.get(), offload_ids_.get() + n);
    const std::vector<int32_t> fetched = offload_->access(slot_idx, ids);
    if (fetched.empty()) return;
    const PinnedBuffer<bf16>& host = offload_host_[static_cast<size_t>(slot_idx)];
    // The copy stream starts after what the step's stream has done so far, and the step waits for its copies.
    MOEBENCH_CUDA_CHECK(cudaEventRecord(copy_ready_.get(), s()));
    MOEBENCH_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_->get(), copy_ready_.get(), 0));
    for (size_t i = 0; i < fetched.size(); ++i)
        MOEBENCH_CUDA_CHECK(cudaMemcpyAsync(
            fetch_dev_.get() + static_cast<int64_t>(i % static_cast<size_t>(fetch_slots_)) * expert_elems_,
            host.get() + fetched[i] * expert_elems_, expert_elems_ * sizeof(bf16), cudaMemcpyHostToDevice,
            copy_stream_->get()));
    MOEBENCH_CUDA_CHECK(cudaEventRecord(copy_done_.get(), copy_stream_->get()));
    MOEBENCH_CUDA_CHECK(cudaStreamWaitEvent(s(), copy_done_.get(), 0));
    fetched_experts_ += static_cast<int64_t>(fetched.size());
}

json CudaBackend::offload_json() const {
    if (!offload_) return nullptr;
    return {{"source", "counted"},
            {"what",
             "expert_fetch: cudaMemcpyAsync of each missed expert's bf16 weights from pinned host memory into a "
             "device fetch buffer on a copy stream, timed by the phase's events (measured)"},
            {"policy", opt_.layout.offload_policy},
            {"resident_experts", offload_->resident()},
            {"num_experts", m_.moe.num_experts},
            {"accesses", offload_->accesses()},
            {"hits", offload_->hits()},
            {"fetched_experts", fetched_experts_},
            {"expert_bytes", expert_elems_ * static_cast<int64_t>(sizeof(bf16))}};
}

}  // namespace moebench::cuda_detail
