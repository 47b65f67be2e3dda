// SPDX-License-Identifier: Apache-2.0
// CudaBackend's results for metrics, --check and --dump-tensors: routing, counts, per-expert times, MoE block tensors.
#include "backends/cuda/cuda_backend_impl.hpp"

#include <algorithm>
#include <cstring>

namespace moebench::cuda_detail {

namespace {

template <typename T>
std::vector<T> to_host(const T* dev, int64_t n) {
    std::vector<T> h(static_cast<size_t>(std::max<int64_t>(n, 0)));
    if (n > 0) MOEBENCH_CUDA_CHECK(cudaMemcpy(h.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}

/// bf16 bits -> fp32 (exact).
void bf16_to_f32(const uint16_t* src, int64_t count, float* dst) {
    for (int64_t i = 0; i < count; ++i) {
        const uint32_t bits = static_cast<uint32_t>(src[i]) << 16;
        std::memcpy(dst + i, &bits, 4);
    }
}

NamedTensor f32_tensor(const std::string& name, std::vector<int64_t> shape) {
    NamedTensor t;
    t.name = name;
    t.dtype = "F32";
    t.shape = std::move(shape);
    t.data.resize(static_cast<size_t>(t.numel()) * 4);
    return t;
}

/// Segments of seg_elems bf16 elements starting at each of `offsets` (elements into dev), stacked in order, as one
/// fp32 tensor; copied and converted a piece of at most 2^24 elements at a time (no second device copy).
NamedTensor bf16_segments(const std::string& name, std::vector<int64_t> shape, const bf16* dev,
                          const std::vector<int64_t>& offsets, int64_t seg_elems) {
    NamedTensor t = f32_tensor(name, std::move(shape));
    MOEBENCH_CHECK(static_cast<int64_t>(offsets.size()) * seg_elems == t.numel(),
                   "tensor {}: {} segments of {} elements do not fill {} elements", name, offsets.size(), seg_elems,
                   t.numel());
    float* dst = reinterpret_cast<float*>(t.data.data());
    const int64_t piece = int64_t(1) << 24;
    std::vector<uint16_t> chunk;
    for (size_t s = 0; s < offsets.size(); ++s)
        for (int64_t i = 0; i < seg_elems; i += piece) {
            const int64_t c = std::min(piece, seg_elems - i);
            chunk.resize(static_cast<size_t>(c));
            MOEBENCH_CUDA_CHECK(cudaMemcpy(chunk.data(), dev + offsets[s] + i, c * 2, cudaMemcpyDeviceToHost));
            bf16_to_f32(chunk.data(), c, dst + static_cast<int64_t>(s) * seg_elems + i);
        }
    return t;
}

/// A contiguous bf16 device tensor from elem_offset -> fp32 NamedTensor.
NamedTensor bf16_tensor(const std::string& name, std::vector<int64_t> shape, const bf16* dev, int64_t elem_offset = 0) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return bf16_segments(name, std::move(shape), dev, {elem_offset}, n);
}

}  // namespace

MoeLayerResult CudaBackend::moe_result(int64_t layer_slot) const {
    const Layer& L = slot(layer_slot);
    MoeLayerResult r;
    if (!L.moe) return r;
    MOEBENCH_CUDA_CHECK(cudaStreamSynchronize(s()));
    const int64_t E = m_.moe.num_experts;
    r.routing.num_tokens = T_;
    r.routing.k = k_;
    r.routing.ids = to_host(L.ids.get(), T_ * k_);
    r.routing.weights = to_host(L.weights.get(), T_ * k_);
    const std::vector<int32_t> counts = to_host(L.counts.get(), E);
    r.tokens_per_expert.assign(counts.begin(), counts.end());
    r.dropped = to_host(L.dropped.get(), 1)[0];
    r.router_logits = to_host(L.logits.get(), T_ * E);
    // Per-expert GEMM time (loop variant only): event before each active expert's GEMM and after the last.
    if (!L.up_experts.empty() && L.up_experts.size() == L.down_experts.size()) {
        r.expert_gemm_us.assign(static_cast<size_t>(E), 0.0);
        auto add = [&](const std::vector<CudaEvent>& ev, const std::vector<int>& ex) {
            for (size_t i = 0; i < ex.size(); ++i) {
                float ms = 0;
                MOEBENCH_CUDA_CHECK(cudaEventElapsedTime(&ms, ev[i].get(), ev[i + 1].get()));
                r.expert_gemm_us[static_cast<size_t>(ex[i])] += ms * 1e3;
            }
        };
        add(L.up_events, L.up_experts);
        add(L.down_events, L.down_experts);
    }
    return r;
}

std::vector<NamedTensor> CudaBackend::moe_block_tensors(int64_t layer_slot) const {
    return block_tensors(layer_slot, false);
}

std::vector<NamedTensor> CudaBackend::moe_check_tensors(int64_t layer_slot) const {
    return block_tensors(layer_slot, true);
}

std::vector<NamedTensor> CudaBackend::block_tensors(int64_t layer_slot, bool routed_only) const {
    const Layer& L = slot(layer_slot);
    MOEBENCH_CHECK(L.moe, "layer slot {} is not a MoE layer", layer_slot);
    MOEBENCH_CUDA_CHECK(cudaStreamSynchronize(s()));
    const auto& moe = m_.moe;
    const int64_t E = moe.num_experts, I = moe.expert_intermediate_size;
    // The experts whose weights come back: all (the dump), or those this step routed tokens to (--check: DeepSeek-V3
    // holds ~45 GB of expert weights in fp32 on the host otherwise).
    std::vector<int32_t> experts;
    const std::vector<int32_t> counts = to_host(L.counts.get(), E);
    for (int32_t e = 0; e < E; ++e)
        if (!routed_only || counts[static_cast<size_t>(e)] > 0) experts.push_back(e);
    const int64_t R = static_cast<int64_t>(experts.size());
    auto at = [&](int64_t stride, int64_t first) {
        std::vector<int64_t> offsets;
        for (int32_t e : experts) offsets.push_back(first + e * stride);
        return offsets;
    };
    std::vector<NamedTensor> out;
    out.push_back(bf16_tensor("moe_in", {T_, H_}, L.moe_in.get()));
    out.push_back(bf16_tensor("router_weight", {E, H_}, L.router.get()));
    if (moe.router_bias) {
        auto b = to_host(L.router_bias.get(), E);
        out.push_back(NamedTensor::f32("router_bias", {E}, b.data()));
    }
    if (moe.router_correction_bias) {
        auto b = to_host(L.correction.get(), E);
        out.push_back(NamedTensor::f32("e_score_correction_bias", {E}, b.data()));
    }
    if (routed_only) out.push_back(NamedTensor::i32("routed_experts", {R}, experts.data()));
    // w_gu[e] = [gate_e; up_e], each I*H contiguous: one half per expert (stride 2*I*H between experts).
    out.push_back(bf16_segments("w_gate", {R, I, H_}, L.w_gu.get(), at(2 * I * H_, 0), I * H_));
    out.push_back(bf16_segments("w_up", {R, I, H_}, L.w_gu.get(), at(2 * I * H_, I * H_), I * H_));
    out.push_back(bf16_segments("w_down", {R, H_, I}, L.w_down.get(), at(H_ * I, 0), H_ * I));
    if (moe.expert_bias) {
        out.push_back(bf16_segments("b_gate", {R, I}, L.b_gu.get(), at(2 * I, 0), I));
        out.push_back(bf16_segments("b_up", {R, I}, L.b_gu.get(), at(2 * I, I), I));
        out.push_back(bf16_segments("b_down", {R, H_}, L.b_down.get(), at(H_, 0), H_));
    }
    const int64_t Is = moe.num_shared_experts * moe.shared_intermediate_size;
    if (Is > 0) {
        out.push_back(bf16_tensor("shared_w_gate", {Is, H_}, L.w_sgu.get()));
        out.push_back(bf16_tensor("shared_w_up", {Is, H_}, L.w_sgu.get(), Is * H_));
        out.push_back(bf16_tensor("shared_w_down", {H_, Is}, L.w_sdown.get()));
        if (moe.shared_expert_gate) out.push_back(bf16_tensor("shared_gate_weight", {1, H_}, L.shared_gate_w.get()));
    }
    auto ids = to_host(L.ids.get(), T_ * k_);
    auto w = to_host(L.weights.get(), T_ * k_);
    out.push_back(NamedTensor::i32("topk_ids", {T_, k_}, ids.data()));
    out.push_back(NamedTensor::f32("topk_weights", {T_, k_}, w.data()));
    out.push_back(bf16_tensor("moe_out", {T_, H_}, L.moe_out.get()));
    return out;
}

}  // namespace moebench::cuda_detail
