// SPDX-License-Identifier: Apache-2.0
// The CUDA backend: one decoder step in bf16 (fp32 accumulation) on one GPU. cuBLAS for every projection and the expert
// GEMMs (per-expert loop or grouped), own kernels (kernels/launch.hpp) for the rest, CUDA events at every mark, NVTX
// ranges named after the phases, optional whole-step CUDA graph and cold-L2 flush.
#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/nvml.hpp"

#include "kernels/cuda_check.hpp"
#include "backends/cuda/device_buffer.hpp"
#include "backends/cuda/device_info.hpp"
#include "backends/cuda/gemm.hpp"
#include "common/error.hpp"
#include "model/route_params.hpp"
#include "kernels/launch.hpp"
#include "core/moe_core.cuh"

#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

namespace moebench {
namespace {

namespace core = moebench::core;
using kernels::bf16;

constexpr int64_t kCublasWorkspaceBytes = int64_t(32) << 20;
constexpr int64_t kAttnChunk = 256;
// Scales as the CPU backend's initialisers (cpu_weights.cpp): "unit" = U[-sqrt3, sqrt3) (variance 1), norms 1 +- 0.1,
// biases +-0.1, linear layers core::linear_init_scale(fan_in).
const float kUnitScale = std::sqrt(3.0f);

// One MoE or dense decoder layer's weights and per-layer state. Row-major, PyTorch Linear layout ([out, in]).
struct Layer {
    int64_t layer = 0;  // model layer index
    bool moe = false;
    bool sliding = false;
    DeviceBuffer<bf16> attn_norm, ffn_norm, attn_norm_b, ffn_norm_b;  // biases: LayerNorm with norm_bias only
    DeviceBuffer<bf16> post_attn_norm, post_ffn_norm;                // norms_per_layer >= 4 (Grok-1)
    // GQA: w_qkv [(Hq + 2 Hkv) * hd, H] = [q; k; v]; w_o [H, Hq * hd].
    DeviceBuffer<bf16> w_qkv, qkv_bias, w_o, o_bias, q_norm, k_norm;
    DeviceBuffer<float> sinks;
    // MLA: w_q_a [q_lora, H] + q_a_norm + w_q_b [Hq * qhd, q_lora] (or w_q [Hq * qhd, H]); w_kv_a [kv_lora + rope, H];
    // kv_a_norm [kv_lora]; w_kv_b [Hq * (nope + v), kv_lora]; w_o [H, Hq * v].
    DeviceBuffer<bf16> w_q_a, q_a_norm, w_q_b, w_q, w_kv_a, kv_a_norm, w_kv_b;
    // KV cache: GQA k_cache / v_cache [B, cache_len, Hkv * hd]; MLA latent [B, cache_len, kv_lora + rope] in k_cache.
    DeviceBuffer<bf16> k_cache, v_cache;
    // MoE: router [E, H]; w_gu [E, 2I, H] (gate rows then up rows); w_down [E, H, I]; biases (gpt-oss).
    DeviceBuffer<bf16> router, w_gu, w_down, b_gu, b_down;
    DeviceBuffer<float> router_bias, correction;
    // Shared experts fused into one FFN of width S * Is: w_sgu [2 S Is, H] (gates then ups), w_sdown [H, S Is].
    DeviceBuffer<bf16> w_sgu, w_sdown, shared_gate_w;
    // Dense FFN: w_dgu [2 Id, H], w_ddown [H, Id].
    DeviceBuffer<bf16> w_dgu, w_ddown;
    // MoE per-layer results (kept per layer so moe_result / moe_block_tensors can read any layer after the step).
    DeviceBuffer<bf16> moe_in, moe_out;
    DeviceBuffer<float> logits, weights;
    DeviceBuffer<int32_t> ids, counts, offsets, perm_slot, perm_expert, slot_pos, dropped;
    PinnedBuffer<int32_t> counts_host, offsets_host;     // E and E+1, filled in permute
    PinnedBuffer<int32_t> ovr_ids;                       // routing override staging, per layer (a captured graph
    PinnedBuffer<float> ovr_weights;                     // re-reads it at every replay)
    std::vector<int32_t> graph_counts;                   // counts baked into a captured graph
    bool graph_override = false;                         // whether the captured graph copies an override in
    PinnedBuffer<const void*> ptr_host_up, ptr_host_down;
    DeviceBuffer<const void*> ptr_dev_up, ptr_dev_down;
    std::vector<CudaEvent> up_events, down_events;
    std::vector<int> up_experts, down_experts;
    int64_t num_rows = 0;  // permuted rows of the last step
};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

class CudaBackend final : public Backend {
public:
    CudaBackend() {
        MOEBENCH_CUDA_CHECK(cudaGetDevice(&device_));
        stream_ = std::make_unique<CudaStream>();
        cublas_ = std::make_unique<CublasHandle>(stream_->get());
        cublas_ws_.resize(kCublasWorkspaceBytes);
        MOEBENCH_CUBLAS_CHECK(cublasSetWorkspace(cublas_->get(), cublas_ws_.get(), cublas_ws_.bytes()));
    }

    BackendTraits traits() const override { return cuda_backend_traits(); }

    RooflineCeilings measure_ceilings(const RunOptions&) const override {
        RooflineCeilings c;
        c.source = "measured on this machine";
        json m = measure_device_ceilings(device_);
        c.mem_bw_bytes_per_s = m.value("read_bw_bytes_per_s", 0.0);
        c.peak_flops_per_s = m.value("bf16_gemm_flops", 0.0);
        c.detail = m;
        c.note = "cuda: device read bandwidth (own kernel) and cuBLAS bf16 GEMM rate, measured before the run";
        return c;
    }

    json describe() const override {
        json d;
        d["backend"] = "cuda";
        d["device_index"] = device_;
        try {
            json all = cuda_devices_json(false);
            d["libraries"] = all["libraries"];
            if (all["devices"].is_array() && device_ < static_cast<int>(all["devices"].size()))
                d["device"] = all["devices"][static_cast<size_t>(device_)];
        } catch (const Error& e) {
            d["device"] = std::string("not available: ") + e.what();
        }
        d["precision"] = "bf16 weights and activations, fp32 accumulation (cuBLAS CUBLAS_COMPUTE_32F), fp32 router logits";
        d["weights"] = "generated on the device from the seed (moe_core counter-based RNG), no host copies";
        d["kernel_variant"] = {{"expert_gemm", expert_variant_},
                               {"expert_gemm_requested", opt_.expert_gemm},
                               {"topk", topk_variant_},
                               {"attention", fmt::format("split_context(chunk={}) + merge; one block per (token, head, "
                                                         "chunk); prefill uses the same kernel with a causal key range "
                                                         "per query (no tiling: K/V re-read per query)", attn_chunk_)},
                               {"mla", "weight-absorbed (q_nope W_UK, latent cache kv_lora + rope, W_UV after attention)"},
                               {"permute", "block per expert, ordered block scan (deterministic, moe_core order)"}};
        d["expert_gemm_sync"] = "per-expert token counts are copied to the host (one stream sync in permute): cuBLAS "
                                "takes GEMM sizes on the host";
        d["lm_head_rows"] = shape_.mode == Mode::decode ? "every token" : "last token of each sequence";
        d["expert_parallel"] = "not supported on the cuda backend (one GPU): ep_size > 1 is refused before the run";
        d["memory_plan_bytes"] = planned_bytes_;
        d["cold_l2"] = opt_.cold_l2 ? json{{"flush_bytes", l2_flush_.bytes()},
                                           {"how", "cudaMemsetAsync over 2 x L2 before each step (outside the marks)"}}
                                    : json(false);
        if (opt_.cuda_graph) {
            json g;
            g["replays"] = graph_replays_;
            g["replay_us_mean"] = graph_replays_ ? graph_replay_us_sum_ / graph_replays_ : 0.0;
            g["phase_sum_us_mean"] = graph_replays_ ? graph_phase_sum_us_ / graph_replays_ : 0.0;
            g["source"] = "measured";
            g["note"] = "the first step runs eagerly (to learn the expert token counts), the second is captured; every "
                        "step from then on replays the graph. replay_us = events around cudaGraphLaunch";
            d["cuda_graph"] = g;
        } else {
            d["cuda_graph"] = false;
        }
        return d;
    }

    void prepare(const ModelConfig& model, const std::vector<int64_t>& layers, const StepShape& shape,
                 const RunOptions& opt, const Topology& topo = Topology{}) override;

    void set_routing_override(const StepRouting* routing) override { override_ = routing; }

    void begin_step() override;
    void run_phase(Phase phase, int64_t layer_slot) override;
    void mark() override;
    std::vector<double> end_step() override;

    MoeLayerResult moe_result(int64_t layer_slot) const override;
    std::vector<NamedTensor> moe_block_tensors(int64_t layer_slot) const override;

    json read_device_counters() const override {
        char pci[32] = {0};
        if (cudaDeviceGetPCIBusId(pci, sizeof(pci), device_) != cudaSuccess)
            return json{{"available", false}, {"reason", "cudaDeviceGetPCIBusId failed"}};
        return nvml_counters(pci);
    }
    json device_conditions(const json& before, const json& after, int64_t tokens) const override {
        return nvml_conditions(before, after, tokens);
    }

private:
    cudaStream_t s() const { return stream_->get(); }
    cublasHandle_t hb() const { return cublas_->get(); }
    const Layer& slot(int64_t i) const {
        MOEBENCH_CHECK(i >= 0 && i < static_cast<int64_t>(layers_.size()), "layer slot {} out of range", i);
        return *layers_[static_cast<size_t>(i)];
    }
    Layer& slot(int64_t i) { return const_cast<Layer&>(static_cast<const CudaBackend*>(this)->slot(i)); }

    uint64_t base(int64_t layer, uint32_t id) const { return core::rng_base(opt_.seed, core::weight_stream(layer, id)); }
    void fill(DeviceBuffer<bf16>& b, int64_t n, int64_t layer, uint32_t id, float scale, float offset = 0.0f,
              uint64_t first = 0) {
        if (b.size() < n) b.resize(n);
        kernels::launch_fill_bf16(b.get(), n, base(layer, id), first, scale, offset, s());
    }
    void fill_f32(DeviceBuffer<float>& b, int64_t n, int64_t layer, uint32_t id, float scale, float offset = 0.0f) {
        b.resize(n);
        kernels::launch_fill_f32(b.get(), n, base(layer, id), 0, scale, offset, s());
    }
    void fill_norm(DeviceBuffer<bf16>& b, int64_t n, int64_t layer, uint32_t id) { fill(b, n, layer, id, 0.1f, 1.0f); }

    int64_t plan_bytes() const;
    /// Split-attention workspace for the largest call (same shape in every layer; a window only shrinks it).
    int64_t attention_ws_bytes() const {
        kernels::AttentionArgs probe;
        probe.num_tokens = T_;
        probe.tokens_per_seq = tps_;
        probe.pos_base = pos_base_;
        probe.num_heads = m_.attn.num_heads;
        probe.dv = m_.attn.kind == AttentionKind::mla ? m_.attn.kv_lora_rank : m_.attn.head_dim;
        probe.chunk = attn_chunk_;
        return static_cast<int64_t>(kernels::attention_workspace_bytes(probe));
    }
    void allocate_layer(Layer& L);
    void record_mark_event(cudaEvent_t ev);

    void run_phase_eager(Phase phase, int64_t layer_slot);
    void phase_embed();
    void phase_norm(bool attn, Layer* L);
    void phase_qkv(Layer& L);
    void phase_attention(Layer& L);
    void phase_o_proj(Layer& L);
    void phase_router_gemm(Layer& L);
    void phase_topk(Layer& L, int64_t slot_idx);
    /// Copies this step's imposed routing of `slot_idx` into L's pinned staging (validated); false when none.
    bool stage_override(Layer& L, int64_t slot_idx);
    /// Ends a stream capture that an error interrupted, so that the stream is usable (and destructible) again.
    void abort_capture() noexcept;
    /// hidden += norm(src) with a post-block norm weight (Grok-1's post-attention / post-FFN norms).
    void post_norm_add(const DeviceBuffer<bf16>& norm_w, const bf16* src);
    void norm_rows(const bf16* x, const DeviceBuffer<bf16>& w, const DeviceBuffer<bf16>& b, bf16* y, int64_t rows);
    float act_limit() const {
        return activation_limit(m_);  // as the CPU backend
    }
    void phase_permute(Layer& L);
    void phase_expert_up(Layer& L);
    void phase_activation(Layer& L);
    void phase_expert_down(Layer& L);
    void phase_shared(Layer& L);
    void phase_combine(Layer& L);
    void phase_dense(Layer& L);
    void phase_final_norm();
    void phase_lm_head();
    bool use_grouped(const Layer& L) const;
    bool run_expert_gemms(Layer& L, ExpertGemmArgs g, PinnedBuffer<const void*>& ptr_host,
                          DeviceBuffer<const void*>& ptr_dev, std::vector<CudaEvent>& events, std::vector<int>& experts);

    // Shapes.
    ModelConfig m_;
    StepShape shape_;
    RunOptions opt_;
    int64_t T_ = 0, H_ = 0, tps_ = 1, pos_base_ = 0, cache_len_ = 0, k_ = 0, head_rows_ = 0;
    int64_t qkv_width_ = 0, attn_out_width_ = 0;
    int64_t attn_chunk_ = kAttnChunk;  // keys per split: 256 for decode, 512 for prefill (halves the workspace)
    int device_ = 0;
    int64_t planned_bytes_ = 0;

    std::unique_ptr<CudaStream> stream_;
    std::unique_ptr<CublasHandle> cublas_;
    DeviceBuffer<uint8_t> cublas_ws_;

    std::vector<std::unique_ptr<Layer>> layers_;
    DeviceBuffer<bf16> embed_, final_norm_w_, final_norm_b_, lm_head_w_;
    // Activations shared by all layers.
    DeviceBuffer<int32_t> token_ids_;
    // x0_: the embedded tokens; every step starts from them (as the CPU backend), also when embed is not run.
    DeviceBuffer<bf16> x0_, tmp_h_;
    DeviceBuffer<bf16> hidden_, normed_, qkv_, attn_out_, q_attn_, mla_v_, final_normed_, lm_logits_;
    DeviceBuffer<bf16> x_perm_, h_perm_, a_perm_, y_perm_, sh_h_, sh_a_, sh_out_, d_h_, d_a_, mla_q_a_;
    DeviceBuffer<float> topk_scratch_, shared_gate_logit_, attn_ws_f_;
    DeviceBuffer<uint8_t> l2_flush_;

    const StepRouting* override_ = nullptr;
    std::string expert_variant_ = "none (no MoE layer run yet)";
    std::string topk_variant_ = "none";

    // Timing: one event per mark; graph state.
    std::vector<CudaEvent> mark_events_;
    size_t num_marks_ = 0;
    int64_t steps_done_ = 0;
    bool capturing_ = false;
    cudaGraph_t graph_ = nullptr;
    cudaGraphExec_t graph_exec_ = nullptr;
    CudaEvent graph_start_, graph_stop_;
    int64_t graph_replays_ = 0;
    double graph_replay_us_sum_ = 0, graph_phase_sum_us_ = 0;

public:
    ~CudaBackend() override {
        abort_capture();
        if (graph_exec_) MOEBENCH_CUDA_CHECK_NOEXCEPT(cudaGraphExecDestroy(graph_exec_));
        if (graph_) MOEBENCH_CUDA_CHECK_NOEXCEPT(cudaGraphDestroy(graph_));
        if (stream_) MOEBENCH_CUDA_CHECK_NOEXCEPT(cudaStreamSynchronize(stream_->get()));
    }
};

// ---------------------------------------------------------------------------------------------------------------------
// prepare: validate, preflight memory, generate weights on the device.
// ---------------------------------------------------------------------------------------------------------------------

int64_t CudaBackend::plan_bytes() const {
    const auto& a = m_.attn;
    const auto& moe = m_.moe;
    const int64_t B = shape_.batch, E = moe.num_experts, I = moe.expert_intermediate_size;
    const int64_t Hq = a.num_heads;
    int64_t w = 0;  // elements (bf16 unless noted)
    w += m_.vocab_size * H_ * (m_.tie_word_embeddings ? 1 : 2) + H_;
    int64_t max_act_rows = T_ * std::max<int64_t>(1, k_);
    for (const auto& L : layers_) {
        w += 6 * H_;  // pre norms (+ biases), post norms
        if (a.kind == AttentionKind::mla) {
            const int64_t qhd = a.qk_nope_head_dim + a.qk_rope_head_dim, lat = a.kv_lora_rank + a.qk_rope_head_dim;
            w += a.q_lora_rank > 0 ? a.q_lora_rank * H_ + a.q_lora_rank + Hq * qhd * a.q_lora_rank : Hq * qhd * H_;
            w += lat * H_ + a.kv_lora_rank + Hq * (a.qk_nope_head_dim + a.v_head_dim) * a.kv_lora_rank;
            w += H_ * Hq * a.v_head_dim;
            w += B * cache_len_ * lat;
        } else {
            w += qkv_width_ * H_ + H_ * Hq * a.head_dim + 2 * B * cache_len_ * a.num_kv_heads * a.head_dim;
        }
        if (L->moe) {
            w += E * H_ + E * 3 * I * H_ + (moe.expert_bias ? E * (2 * I + H_) : 0);
            w += moe.num_shared_experts * moe.shared_intermediate_size * 3 * H_ + H_;
            w += 2 * T_ * H_;                                           // moe_in, moe_out
            w += (T_ * E + 3 * T_ * k_) * 2 + 4 * E;                    // logits, ids, weights, maps (4-byte -> 2 bf16)
        } else {
            w += 3 * m_.dense_intermediate_size * H_;
        }
    }
    // Shared activations: x0, tmp, hidden, normed, qkv, attention out, MoE permuted buffers, shared and dense FFN, head.
    w += 4 * T_ * H_ + T_ * std::max<int64_t>(qkv_width_, H_) + T_ * attn_out_width_;
    w += max_act_rows * (2 * H_ + 3 * I);
    w += T_ * 3 * std::max(moe.num_shared_experts * moe.shared_intermediate_size, m_.dense_intermediate_size);
    w += head_rows_ * (H_ + m_.vocab_size);
    int64_t bytes = 2 * w + kCublasWorkspaceBytes + attention_ws_bytes();
    bytes += T_ * kernels::topk_scratch_floats(std::max<int64_t>(E, 1), moe.num_groups) * 4;
    return bytes;
}

// prepare() and allocate_layer() are ~120 lines each: they are split with CudaBackend itself (one file per concern,
// issue 17 item 7), where the split can be run on a GPU; reshaping them here, untested on a device, would not be.
void CudaBackend::prepare(const ModelConfig& model, const std::vector<int64_t>& layers, const StepShape& shape,
                          const RunOptions& opt, const Topology& /*topo: one GPU; expert parallelism is issue 16*/) {
    m_ = model;
    shape_ = shape;
    opt_ = opt;
    const auto& a = m_.attn;
    if (opt.ep_size > 1)
        throw UnsupportedError(fmt::format(
            "--ep {}: the cuda backend runs on one GPU and does not implement expert-parallel all-to-all; use --ep 1 "
            "(or the sim backend to model expert parallelism)", opt.ep_size));
    if (opt.expert_gemm != "auto" && opt.expert_gemm != "grouped" && opt.expert_gemm != "loop")
        config_error("--expert-gemm", "unknown expert GEMM variant", opt.expert_gemm, "use auto, grouped or loop");
    H_ = m_.hidden_size;
    T_ = shape.num_tokens();
    tps_ = shape.mode == Mode::decode ? 1 : shape.seq_len;
    // Decode: the new token sits at position `context`. Prefill: sequences start at position 0 (as the CPU backend).
    pos_base_ = shape.mode == Mode::decode ? shape.context : 0;
    cache_len_ = pos_base_ + tps_;
    k_ = opt.soft_topn > 0 ? opt.soft_topn : m_.moe.top_k;
    head_rows_ = shape.mode == Mode::decode ? T_ : shape.batch;
    attn_chunk_ = shape.mode == Mode::decode ? kAttnChunk : 2 * kAttnChunk;
    if (a.kind == AttentionKind::mla) {
        const int64_t qhd = a.qk_nope_head_dim + a.qk_rope_head_dim;
        qkv_width_ = a.num_heads * qhd;
        // attn_out_ also holds the latent projection [T, kv_lora + rope] during qkv_proj (it is free until attention).
        attn_out_width_ = std::max(a.num_heads * std::max(a.kv_lora_rank, a.v_head_dim),
                                   a.kv_lora_rank + a.qk_rope_head_dim);
        if (a.kv_lora_rank + a.qk_rope_head_dim > 1024 || a.kv_lora_rank > kernels::attention_max_dk())
            throw UnsupportedError(fmt::format("MLA kv_lora_rank {} exceeds the attention kernel's limit ({})",
                                               a.kv_lora_rank, kernels::attention_max_dk()));
    } else {
        qkv_width_ = (a.num_heads + 2 * a.num_kv_heads) * a.head_dim;
        attn_out_width_ = a.num_heads * a.head_dim;
        if (a.head_dim > kernels::attention_max_dk())
            throw UnsupportedError(fmt::format("head_dim {} exceeds the attention kernel's limit ({})", a.head_dim,
                                               kernels::attention_max_dk()));
    }
    if (m_.moe.num_experts > 0 && k_ > m_.moe.num_experts)
        config_error("--soft-topn", "more experts than the model has", std::to_string(k_),
                     fmt::format("use at most {}", m_.moe.num_experts));

    layers_.clear();
    for (int64_t l : layers) {
        auto L = std::make_unique<Layer>();
        L->layer = l;
        L->moe = m_.is_moe_layer(l);
        L->sliding = !m_.layer_sliding.empty() && m_.layer_sliding[static_cast<size_t>(l)] != 0;
        layers_.push_back(std::move(L));
    }

    // Memory preflight: the whole plan against what the device has free now.
    planned_bytes_ = plan_bytes();
    size_t free_b = 0, total_b = 0;
    MOEBENCH_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    const int64_t reserve = std::max<int64_t>(int64_t(1) << 30, static_cast<int64_t>(total_b) / 50);
    if (planned_bytes_ + reserve > static_cast<int64_t>(free_b)) {
        throw UnsupportedError(fmt::format(
            "the run needs about {:.1f} GiB on the GPU ({} layers of {} at {} tokens, bf16) but {:.1f} GiB are free "
            "(keeping {:.1f} GiB spare); use fewer --layers, a smaller --batch/--context, or more GPUs (expert "
            "parallelism is not available on the cuda backend yet)",
            planned_bytes_ / 1073741824.0, layers.size(), m_.name, T_, free_b / 1073741824.0, reserve / 1073741824.0));
    }

    // Model-level tensors and shared activations.
    fill(embed_, m_.vocab_size * H_, -1, core::kWEmbed, kUnitScale);
    fill_norm(final_norm_w_, H_, -1, core::kWFinalNorm);
    if (m_.norm == NormKind::layernorm && m_.norm_bias) fill(final_norm_b_, H_, -1, core::kWFinalNormBias, 0.1f);
    if (!m_.tie_word_embeddings) fill(lm_head_w_, m_.vocab_size * H_, -1, core::kWLmHead, core::linear_init_scale(H_));
    token_ids_.resize(T_);
    kernels::launch_fill_token_ids(token_ids_.get(), T_, m_.vocab_size, base(-1, core::kWTokenIds), s());
    hidden_.resize(T_ * H_);
    x0_.resize(T_ * H_);
    tmp_h_.resize(T_ * H_);
    normed_.resize(T_ * H_);
    qkv_.resize(T_ * qkv_width_);
    attn_out_.resize(T_ * attn_out_width_);
    final_normed_.resize(head_rows_ * H_);
    lm_logits_.resize(head_rows_ * m_.vocab_size);
    if (a.kind == AttentionKind::mla) {
        const int64_t lat = a.kv_lora_rank + a.qk_rope_head_dim;
        q_attn_.resize(T_ * a.num_heads * lat);
        mla_v_.resize(T_ * a.num_heads * a.v_head_dim);
        mla_q_a_.resize(T_ * std::max<int64_t>(a.q_lora_rank, lat));
    }
    const auto& moe = m_.moe;
    bool any_moe = false, any_dense = false;
    for (auto& L : layers_) {
        allocate_layer(*L);
        any_moe |= L->moe;
        any_dense |= !L->moe;
    }
    if (any_moe) {
        const int64_t rows = T_ * k_, I = moe.expert_intermediate_size;
        x_perm_.resize(rows * H_);
        h_perm_.resize(rows * 2 * I);
        a_perm_.resize(rows * I);
        y_perm_.resize(rows * H_);
        topk_scratch_.resize(T_ * kernels::topk_scratch_floats(moe.num_experts, moe.num_groups));
        const int64_t Is = moe.num_shared_experts * moe.shared_intermediate_size;
        if (Is > 0) {
            sh_h_.resize(T_ * 2 * Is);
            sh_a_.resize(T_ * Is);
            sh_out_.resize(T_ * H_);
            if (moe.shared_expert_gate) shared_gate_logit_.resize(T_);
        }
    }
    if (any_dense && m_.dense_intermediate_size > 0) {
        d_h_.resize(T_ * 2 * m_.dense_intermediate_size);
        d_a_.resize(T_ * m_.dense_intermediate_size);
    }
    attn_ws_f_.resize(attention_ws_bytes() / static_cast<int64_t>(sizeof(float)) + 1);
    if (opt_.cold_l2) {
        int l2 = 0;
        MOEBENCH_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device_));
        l2_flush_.resize(std::max<int64_t>(2 * int64_t(l2), int64_t(1) << 20));
    }
    kernels::launch_embed(token_ids_.get(), embed_.get(), x0_.get(), T_, H_, s());
    MOEBENCH_CUDA_CHECK(cudaStreamSynchronize(s()));
}

void CudaBackend::allocate_layer(Layer& L) {
    const auto& a = m_.attn;
    const auto& moe = m_.moe;
    const int64_t l = L.layer, B = shape_.batch, Hq = a.num_heads;
    const float sH = core::linear_init_scale(H_);
    fill_norm(L.attn_norm, H_, l, core::kWAttnNorm);
    fill_norm(L.ffn_norm, H_, l, core::kWFfnNorm);
    if (m_.norm == NormKind::layernorm && m_.norm_bias) {
        fill(L.attn_norm_b, H_, l, core::kWAttnNormBias, 0.1f);
        fill(L.ffn_norm_b, H_, l, core::kWFfnNormBias, 0.1f);
    }
    if (m_.norms_per_layer >= 4) {
        fill_norm(L.post_attn_norm, H_, l, core::kWPostAttnNorm);
        fill_norm(L.post_ffn_norm, H_, l, core::kWPostFfnNorm);
    }
    if (a.kind == AttentionKind::mla) {
        const int64_t nope = a.qk_nope_head_dim, rope = a.qk_rope_head_dim, qhd = nope + rope, vd = a.v_head_dim;
        const int64_t lat = a.kv_lora_rank + rope;
        if (a.q_lora_rank > 0) {
            fill(L.w_q_a, a.q_lora_rank * H_, l, core::kWQA, sH);
            fill_norm(L.q_a_norm, a.q_lora_rank, l, core::kWQANorm);
            fill(L.w_q_b, Hq * qhd * a.q_lora_rank, l, core::kWQB, core::linear_init_scale(a.q_lora_rank));
        } else {
            fill(L.w_q, Hq * qhd * H_, l, core::kWQ, sH);
        }
        fill(L.w_kv_a, lat * H_, l, core::kWKVA, sH);
        fill_norm(L.kv_a_norm, a.kv_lora_rank, l, core::kWKVANorm);
        fill(L.w_kv_b, Hq * (nope + vd) * a.kv_lora_rank, l, core::kWKVB, core::linear_init_scale(a.kv_lora_rank));
        fill(L.w_o, H_ * Hq * vd, l, core::kWO, core::linear_init_scale(Hq * vd));
        if (a.o_bias) fill(L.o_bias, H_, l, core::kWOBias, 0.1f);
        if (a.sinks) fill_f32(L.sinks, Hq, l, core::kWSinks, kUnitScale);
        fill(L.k_cache, B * cache_len_ * lat, l, core::kWKCache, kUnitScale);
    } else {
        const int64_t hd = a.head_dim, Hkv = a.num_kv_heads;
        // [q; k; v] rows from their own streams, so each block equals the CPU backend's separate matrices.
        L.w_qkv.resize(qkv_width_ * H_);
        kernels::launch_fill_bf16(L.w_qkv.get(), Hq * hd * H_, base(l, core::kWQ), 0, sH, 0.0f, s());
        kernels::launch_fill_bf16(L.w_qkv.get() + Hq * hd * H_, Hkv * hd * H_, base(l, core::kWK), 0, sH, 0.0f, s());
        kernels::launch_fill_bf16(L.w_qkv.get() + (Hq + Hkv) * hd * H_, Hkv * hd * H_, base(l, core::kWV), 0, sH, 0.0f,
                                  s());
        if (a.qkv_bias) {
            L.qkv_bias.resize(qkv_width_);
            kernels::launch_fill_bf16(L.qkv_bias.get(), Hq * hd, base(l, core::kWQBias), 0, 0.1f, 0.0f, s());
            kernels::launch_fill_bf16(L.qkv_bias.get() + Hq * hd, Hkv * hd, base(l, core::kWKBias), 0, 0.1f, 0.0f, s());
            kernels::launch_fill_bf16(L.qkv_bias.get() + (Hq + Hkv) * hd, Hkv * hd, base(l, core::kWVBias), 0, 0.1f,
                                      0.0f, s());
        }
        if (a.qk_norm) {
            fill_norm(L.q_norm, hd, l, core::kWQNorm);
            fill_norm(L.k_norm, hd, l, core::kWKNorm);
        }
        if (a.sinks) fill_f32(L.sinks, Hq, l, core::kWSinks, kUnitScale);
        fill(L.w_o, H_ * Hq * hd, l, core::kWO, core::linear_init_scale(Hq * hd));
        if (a.o_bias) fill(L.o_bias, H_, l, core::kWOBias, 0.1f);
        fill(L.k_cache, B * cache_len_ * Hkv * hd, l, core::kWKCache, kUnitScale);
        fill(L.v_cache, B * cache_len_ * Hkv * hd, l, core::kWVCache, kUnitScale);
    }
    if (L.moe) {
        const int64_t E = moe.num_experts, I = moe.expert_intermediate_size;
        fill(L.router, E * H_, l, core::kWRouter, sH);
        if (moe.router_bias) fill_f32(L.router_bias, E, l, core::kWRouterBias, 0.1f);
        if (moe.router_correction_bias) fill_f32(L.correction, E, l, core::kWCorrectionBias, 0.1f);
        // w_gu[e] = [gate_e; up_e]; gate_e / up_e are elements [e*I*H, (e+1)*I*H) of the [E, I, H] gate / up tensors.
        L.w_gu.resize(E * 2 * I * H_);
        for (int64_t e = 0; e < E; ++e) {
            kernels::launch_fill_bf16(L.w_gu.get() + e * 2 * I * H_, I * H_, base(l, core::kWGate), e * I * H_, sH,
                                      0.0f, s());
            kernels::launch_fill_bf16(L.w_gu.get() + e * 2 * I * H_ + I * H_, I * H_, base(l, core::kWUp), e * I * H_,
                                      sH, 0.0f, s());
        }
        fill(L.w_down, E * H_ * I, l, core::kWDown, core::linear_init_scale(I));
        if (moe.expert_bias) {
            L.b_gu.resize(E * 2 * I);
            for (int64_t e = 0; e < E; ++e) {
                kernels::launch_fill_bf16(L.b_gu.get() + e * 2 * I, I, base(l, core::kWBGate), e * I, 0.1f, 0.0f, s());
                kernels::launch_fill_bf16(L.b_gu.get() + e * 2 * I + I, I, base(l, core::kWBUp), e * I, 0.1f, 0.0f,
                                          s());
            }
            fill(L.b_down, E * H_, l, core::kWBDown, 0.1f);
        }
        const int64_t Is = moe.num_shared_experts * moe.shared_intermediate_size;
        if (Is > 0) {
            L.w_sgu.resize(2 * Is * H_);
            kernels::launch_fill_bf16(L.w_sgu.get(), Is * H_, base(l, core::kWSharedGate), 0, sH, 0.0f, s());
            kernels::launch_fill_bf16(L.w_sgu.get() + Is * H_, Is * H_, base(l, core::kWSharedUp), 0, sH, 0.0f, s());
            fill(L.w_sdown, H_ * Is, l, core::kWSharedDown, core::linear_init_scale(Is));
            if (moe.shared_expert_gate) fill(L.shared_gate_w, H_, l, core::kWSharedGateWeight, sH);
        }
        L.moe_in.resize(T_ * H_);
        L.moe_out.resize(T_ * H_);
        L.logits.resize(T_ * E);
        L.ids.resize(T_ * k_);
        L.weights.resize(T_ * k_);
        L.counts.resize(E);
        L.offsets.resize(E + 1);
        L.perm_slot.resize(T_ * k_);
        L.perm_expert.resize(T_ * k_);
        L.slot_pos.resize(T_ * k_);
        L.dropped.resize(2 + E);  // [0] dropped, [2..] raw counts scratch
        L.counts_host.resize(E);
        L.ovr_ids.resize(T_ * k_);
        L.ovr_weights.resize(T_ * k_);
        L.offsets_host.resize(E + 1);
        L.ptr_host_up.resize(3 * E);
        L.ptr_host_down.resize(3 * E);
        L.ptr_dev_up.resize(3 * E);
        L.ptr_dev_down.resize(3 * E);
        if (opt_.expert_gemm != "grouped") {
            L.up_events = std::vector<CudaEvent>(static_cast<size_t>(E + 1));
            L.down_events = std::vector<CudaEvent>(static_cast<size_t>(E + 1));
        }
    } else if (m_.dense_intermediate_size > 0) {
        const int64_t Id = m_.dense_intermediate_size;
        L.w_dgu.resize(2 * Id * H_);
        kernels::launch_fill_bf16(L.w_dgu.get(), Id * H_, base(l, core::kWDenseGate), 0, sH, 0.0f, s());
        kernels::launch_fill_bf16(L.w_dgu.get() + Id * H_, Id * H_, base(l, core::kWDenseUp), 0, sH, 0.0f, s());
        fill(L.w_ddown, H_ * Id, l, core::kWDenseDown, core::linear_init_scale(Id));
    }
}

// ---------------------------------------------------------------------------------------------------------------------
// Step, marks, graph.
// ---------------------------------------------------------------------------------------------------------------------

void CudaBackend::begin_step() {
    num_marks_ = 0;
    // Steps are independent and identical (as on the CPU): each starts from the embedded tokens, also when the plan
    // has no embed phase. Outside the marks and outside any capture.
    MOEBENCH_CUDA_CHECK(cudaMemcpyAsync(hidden_.get(), x0_.get(), x0_.bytes(), cudaMemcpyDeviceToDevice, s()));
    if (opt_.cold_l2 && l2_flush_.size() > 0)
        MOEBENCH_CUDA_CHECK(cudaMemsetAsync(l2_flush_.get(), steps_done_ & 0xFF, l2_flush_.bytes(), s()));
    // cuda_graph: step 0 eager (learns counts), step 1 captured, later steps replay (run_phase/mark do nothing).
    if (opt_.cuda_graph && steps_done_ == 1 && !graph_exec_) {
        MOEBENCH_CUDA_CHECK(cudaStreamSynchronize(s()));
        for (auto& L : layers_)
            if (L->moe) L->graph_counts.assign(L->counts_host.get(), L->counts_host.get() + L->counts_host.size());
        MOEBENCH_CUDA_CHECK(cudaStreamBeginCapture(s(), cudaStreamCaptureModeThreadLocal));
        capturing_ = true;
    }
}

void CudaBackend::abort_capture() noexcept {
    if (!capturing_ || !stream_) return;
    capturing_ = false;
    cudaGraph_t broken = nullptr;
    MOEBENCH_CUDA_CHECK_NOEXCEPT(cudaStreamEndCapture(stream_->get(), &broken));
    if (broken) MOEBENCH_CUDA_CHECK_NOEXCEPT(cudaGraphDestroy(broken));
    cudaGetLastError();
}

void CudaBackend::record_mark_event(cudaEvent_t ev) {
    MOEBENCH_CUDA_CHECK(cudaEventRecordWithFlags(ev, s(), capturing_ ? cudaEventRecordExternal : cudaEventRecordDefault));
}

void CudaBackend::mark() {
    const bool replaying = opt_.cuda_graph && graph_exec_ && !capturing_;
    if (num_marks_ >= mark_events_.size()) {
        MOEBENCH_CHECK(!replaying, "cuda graph replay: more marks ({}) than the captured step", num_marks_ + 1);
        mark_events_.emplace_back();
    }
    if (!replaying) {
        try {
            record_mark_event(mark_events_[num_marks_].get());
        } catch (...) {
            abort_capture();
            throw;
        }
    }
    ++num_marks_;
}

std::vector<double> CudaBackend::end_step() {
    std::vector<double> us;
    if (capturing_) {
        capturing_ = false;
        const cudaError_t end = cudaStreamEndCapture(s(), &graph_);
        const cudaError_t inst = end == cudaSuccess ? cudaGraphInstantiate(&graph_exec_, graph_, 0) : end;
        if (inst != cudaSuccess) {
            cudaGetLastError();
            if (graph_) cudaGraphDestroy(graph_);
            graph_ = nullptr;
            graph_exec_ = nullptr;
            throw UnsupportedError(fmt::format("--cuda-graph: capturing the step failed ({}: {}); run without "
                                               "cuda_graph", cudaGetErrorName(inst), cudaGetErrorString(inst)));
        }
    }
    const bool graph_run = opt_.cuda_graph && graph_exec_;
    if (graph_run) {
        MOEBENCH_CUDA_CHECK(cudaEventRecord(graph_start_.get(), s()));
        MOEBENCH_CUDA_CHECK(cudaGraphLaunch(graph_exec_, s()));
        MOEBENCH_CUDA_CHECK(cudaEventRecord(graph_stop_.get(), s()));
    }
    MOEBENCH_CUDA_CHECK(cudaStreamSynchronize(s()));
    for (size_t i = 1; i < num_marks_; ++i) {
        float ms = 0;
        const cudaError_t err = cudaEventElapsedTime(&ms, mark_events_[i - 1].get(), mark_events_[i].get());
        if (err != cudaSuccess && graph_run) {
            // The phase marks of a replay are event-record nodes of the graph; should a driver not time them,
            // say so plainly instead of inventing numbers.
            cudaGetLastError();
            throw UnsupportedError(fmt::format("--cuda-graph: the phase events recorded inside the graph cannot be "
                                               "timed on this driver ({}); run without cuda_graph",
                                               cudaGetErrorString(err)));
        }
        MOEBENCH_CUDA_CHECK(err);
        us.push_back(static_cast<double>(ms) * 1e3);
    }
    if (graph_run) {
        float ms = 0;
        MOEBENCH_CUDA_CHECK(cudaEventElapsedTime(&ms, graph_start_.get(), graph_stop_.get()));
        ++graph_replays_;
        graph_replay_us_sum_ += ms * 1e3;
        for (double v : us) graph_phase_sum_us_ += v;
        // The graph baked in the expert GEMM sizes of the captured step: the routing must not have changed.
        for (auto& L : layers_) {
            if (!L->moe) continue;
            if (!std::equal(L->graph_counts.begin(), L->graph_counts.end(), L->counts_host.get()))
                throw UnsupportedError(fmt::format(
                    "--cuda-graph: the expert token counts of layer {} changed between steps, but a CUDA graph fixes the "
                    "GEMM sizes; run without --cuda-graph for routings that change from step to step", L->layer));
        }
    }
    ++steps_done_;
    return us;
}

void CudaBackend::run_phase(Phase phase, int64_t layer_slot) {
    if (opt_.cuda_graph && graph_exec_ && !capturing_) {
        // Replay: the graph holds the step. Only an imposed routing is host data the graph reads at replay time
        // (a copy node from the pinned staging): refresh the staging with this step's routing.
        if (phase == Phase::topk && layer_slot >= 0) {
            Layer& L = slot(layer_slot);
            if (stage_override(L, layer_slot) != L.graph_override)
                throw UnsupportedError("--cuda-graph: the routing override appeared or disappeared after the step "
                                       "was captured; run without cuda_graph");
        }
        return;
    }
    try {
        run_phase_eager(phase, layer_slot);
    } catch (...) {
        abort_capture();  // a failure inside a capture must not leave the stream capturing
        throw;
    }
}

void CudaBackend::run_phase_eager(Phase phase, int64_t layer_slot) {
    const std::string_view nm = phase_name(phase);
    char name_buf[32] = {0};
    std::memcpy(name_buf, nm.data(), std::min(nm.size(), sizeof(name_buf) - 1));
    nvtxRangePushA(name_buf);
    struct Pop {
        ~Pop() { nvtxRangePop(); }
    } pop;
    Layer* L = layer_slot >= 0 ? &slot(layer_slot) : nullptr;
    auto need = [&] {
        MOEBENCH_CHECK(L != nullptr, "phase {} needs a layer slot", nm);
        return L;
    };
    switch (phase) {
        case Phase::embed: phase_embed(); break;
        case Phase::attn_norm: phase_norm(true, need()); break;
        case Phase::qkv_proj: phase_qkv(*need()); break;
        case Phase::attention: phase_attention(*need()); break;
        case Phase::linear_attention:  // traits().linear_attention is false: the harness refuses such layers first
            MOEBENCH_CHECK(false, "cuda backend: linear attention is not implemented");
        case Phase::o_proj: phase_o_proj(*need()); break;
        case Phase::ffn_norm: phase_norm(false, need()); break;
        case Phase::router_gemm: phase_router_gemm(*need()); break;
        case Phase::topk: phase_topk(*need(), layer_slot); break;
        case Phase::permute: phase_permute(*need()); break;
        case Phase::dispatch_a2a:
        case Phase::combine_a2a: break;  // ep_size > 1 is refused in prepare(): nothing to move on one GPU
        case Phase::expert_up: phase_expert_up(*need()); break;
        case Phase::activation: phase_activation(*need()); break;
        case Phase::expert_down: phase_expert_down(*need()); break;
        case Phase::shared_expert: phase_shared(*need()); break;
        case Phase::unpermute_reduce: phase_combine(*need()); break;
        case Phase::dense_mlp: phase_dense(*need()); break;
        case Phase::final_norm: phase_final_norm(); break;
        case Phase::lm_head: phase_lm_head(); break;
        case Phase::count_: MOEBENCH_CHECK(false, "invalid phase"); break;
    }
}

// ---------------------------------------------------------------------------------------------------------------------
// Phases.
// ---------------------------------------------------------------------------------------------------------------------

void CudaBackend::phase_embed() { kernels::launch_embed(token_ids_.get(), embed_.get(), hidden_.get(), T_, H_, s()); }

void CudaBackend::norm_rows(const bf16* x, const DeviceBuffer<bf16>& w, const DeviceBuffer<bf16>& b, bf16* y,
                            int64_t rows) {
    kernels::launch_norm(x, H_, w.get(), b.size() > 0 ? b.get() : nullptr, y, H_, rows, H_, 1,
                         static_cast<float>(m_.norm_eps), m_.norm == NormKind::layernorm, s());
}

void CudaBackend::post_norm_add(const DeviceBuffer<bf16>& norm_w, const bf16* src) {
    // The CPU backend's post norms carry no bias (FBuf{}).
    norm_rows(src, norm_w, DeviceBuffer<bf16>{}, tmp_h_.get(), T_);
    kernels::launch_add_inplace(hidden_.get(), tmp_h_.get(), T_ * H_, s());
}

void CudaBackend::phase_norm(bool attn, Layer* L) {
    bf16* dst = (!attn && L->moe) ? L->moe_in.get() : normed_.get();
    norm_rows(hidden_.get(), attn ? L->attn_norm : L->ffn_norm, attn ? L->attn_norm_b : L->ffn_norm_b, dst, T_);
}

void CudaBackend::phase_qkv(Layer& L) {
    const auto& a = m_.attn;
    const float eps = static_cast<float>(m_.norm_eps);
    const float theta = static_cast<float>(a.rope_theta);
    if (a.kind == AttentionKind::mla) {
        const int64_t Hq = a.num_heads, nope = a.qk_nope_head_dim, rope = a.qk_rope_head_dim, qhd = nope + rope;
        const int64_t kvl = a.kv_lora_rank, lat = kvl + rope, vd = a.v_head_dim;
        // q = (norm(x W_qa^T)) W_qb^T, or x W_q^T; q: [T, Hq, nope | rope].
        if (a.q_lora_rank > 0) {
            gemm_xwt(hb(), T_, a.q_lora_rank, H_, normed_.get(), H_, L.w_q_a.get(), H_, mla_q_a_.get(), CUDA_R_16BF,
                     a.q_lora_rank);
            kernels::launch_norm(mla_q_a_.get(), a.q_lora_rank, L.q_a_norm.get(), nullptr, mla_q_a_.get(),
                                 a.q_lora_rank, T_, a.q_lora_rank, 1, eps, false, s());
            gemm_xwt(hb(), T_, Hq * qhd, a.q_lora_rank, mla_q_a_.get(), a.q_lora_rank, L.w_q_b.get(), a.q_lora_rank,
                     qkv_.get(), CUDA_R_16BF, Hq * qhd);
        } else {
            gemm_xwt(hb(), T_, Hq * qhd, H_, normed_.get(), H_, L.w_q.get(), H_, qkv_.get(), CUDA_R_16BF, Hq * qhd);
        }
        kernels::launch_rope(qkv_.get(), T_, Hq, Hq * qhd, qhd, nope, rope, tps_, pos_base_, theta, s());
        // Latent: [c_kv (kvl) | k_rope (rope)] = x W_kva^T; norm c_kv, rope k_rope, append to the latent cache.
        bf16* kv_a = attn_out_.get();  // free until attention runs
        gemm_xwt(hb(), T_, lat, H_, normed_.get(), H_, L.w_kv_a.get(), H_, kv_a, CUDA_R_16BF, lat);
        kernels::launch_norm(kv_a, lat, L.kv_a_norm.get(), nullptr, kv_a, lat, T_, kvl, 1, eps, false, s());
        kernels::launch_rope(kv_a, T_, 1, lat, lat, kvl, rope, tps_, pos_base_, theta, s());
        kernels::launch_kv_append(kv_a, lat, L.k_cache.get(), lat, T_, tps_, cache_len_, pos_base_, s());
        // Absorb W_UK into q: q_attn[t, h, :kvl] = q_nope[t, h] . W_UK[h] (W_UK[h] = rows h*(nope+vd) .. +nope of
        // W_kvb, [nope, kvl]); q_attn[t, h, kvl:] = q_rope[t, h].
        gemm_batched(hb(), false, T_, kvl, nope, qkv_.get(), Hq * qhd, qhd, L.w_kv_b.get(), kvl, (nope + vd) * kvl,
                     q_attn_.get(), Hq * lat, lat, Hq);
        kernels::launch_copy_2d(qkv_.get() + nope, qhd, q_attn_.get() + kvl, lat, T_ * Hq, rope, s());
        return;
    }
    const int64_t Hq = a.num_heads, Hkv = a.num_kv_heads, hd = a.head_dim;
    gemm_xwt(hb(), T_, qkv_width_, H_, normed_.get(), H_, L.w_qkv.get(), H_, qkv_.get(), CUDA_R_16BF, qkv_width_);
    if (a.qkv_bias) kernels::launch_add_bias(qkv_.get(), qkv_width_, L.qkv_bias.get(), T_, qkv_width_, s());
    if (a.qk_norm) {
        kernels::launch_norm(qkv_.get(), qkv_width_, L.q_norm.get(), nullptr, qkv_.get(), qkv_width_, T_ * Hq, hd, Hq,
                             eps, false, s());
        kernels::launch_norm(qkv_.get() + Hq * hd, qkv_width_, L.k_norm.get(), nullptr, qkv_.get() + Hq * hd,
                             qkv_width_, T_ * Hkv, hd, Hkv, eps, false, s());
    }
    const int64_t rot = a.rotary_dim > 0 ? a.rotary_dim : hd;  // partial RoPE: the first rotary_dim dims of a head
    kernels::launch_rope(qkv_.get(), T_, Hq, qkv_width_, hd, 0, rot, tps_, pos_base_, theta, s());
    kernels::launch_rope(qkv_.get() + Hq * hd, T_, Hkv, qkv_width_, hd, 0, rot, tps_, pos_base_, theta, s());
    kernels::launch_kv_append(qkv_.get() + Hq * hd, qkv_width_, L.k_cache.get(), Hkv * hd, T_, tps_, cache_len_,
                              pos_base_, s());
    kernels::launch_kv_append(qkv_.get() + (Hq + Hkv) * hd, qkv_width_, L.v_cache.get(), Hkv * hd, T_, tps_, cache_len_,
                              pos_base_, s());
}

void CudaBackend::phase_attention(Layer& L) {
    const auto& a = m_.attn;
    kernels::AttentionArgs args;
    args.num_tokens = T_;
    args.tokens_per_seq = tps_;
    args.cache_len = cache_len_;
    args.pos_base = pos_base_;
    args.num_heads = a.num_heads;
    args.chunk = attn_chunk_;
    // Local layers (as cpu_attention.cpp): a sliding window, or else Llama-4's chunked attention.
    if (L.sliding) {
        args.window = a.sliding_window;
        if (a.sliding_window == 0) args.local_chunk = a.attention_chunk;
    }
    args.sinks = a.sinks ? L.sinks.get() : nullptr;
    if (a.kind == AttentionKind::mla) {
        const int64_t kvl = a.kv_lora_rank, lat = kvl + a.qk_rope_head_dim, Hq = a.num_heads, vd = a.v_head_dim;
        const int64_t nope = a.qk_nope_head_dim;
        args.q = q_attn_.get();
        args.q_token_stride = Hq * lat;
        args.q_head_stride = lat;
        args.k = L.k_cache.get();
        args.v = L.k_cache.get();  // values are the c_kv part of the same latent rows
        args.kv_row_stride = lat;
        args.kv_head_stride = 0;
        args.num_kv_heads = 1;
        args.dk = lat;
        args.dv = kvl;
        args.scale = 1.0f / std::sqrt(static_cast<float>(nope + a.qk_rope_head_dim));
        args.out = attn_out_.get();  // [T, Hq, kvl]
        kernels::launch_attention(args, attn_ws_f_.get(), s());
        // v[t, h] = o_lat[t, h] . W_UV[h]^T (W_UV[h] = rows h*(nope+vd)+nope .. +vd of W_kvb, [vd, kvl]).
        gemm_batched(hb(), true, T_, vd, kvl, attn_out_.get(), Hq * kvl, kvl, L.w_kv_b.get() + nope * kvl, kvl,
                     (nope + vd) * kvl, mla_v_.get(), Hq * vd, vd, Hq);
        return;
    }
    const int64_t Hq = a.num_heads, Hkv = a.num_kv_heads, hd = a.head_dim;
    args.q = qkv_.get();
    args.q_token_stride = qkv_width_;
    args.q_head_stride = hd;
    args.k = L.k_cache.get();
    args.v = L.v_cache.get();
    args.kv_row_stride = Hkv * hd;
    args.kv_head_stride = hd;
    args.num_kv_heads = Hkv;
    args.dk = hd;
    args.dv = hd;
    args.scale = 1.0f / std::sqrt(static_cast<float>(hd));
    args.out = attn_out_.get();
    (void)Hq;
    kernels::launch_attention(args, attn_ws_f_.get(), s());
}

void CudaBackend::phase_o_proj(Layer& L) {
    const auto& a = m_.attn;
    const bool mla = a.kind == AttentionKind::mla;
    const int64_t w = a.num_heads * (mla ? a.v_head_dim : a.head_dim);
    const bf16* in = mla ? mla_v_.get() : attn_out_.get();
    if (L.post_attn_norm.size() == 0) {
        // hidden += attn . W_o^T (beta = 1: the residual add is fused into the GEMM), then + o_bias.
        gemm_xwt(hb(), T_, H_, w, in, w, L.w_o.get(), w, hidden_.get(), CUDA_R_16BF, H_, 1.0f);
        if (a.o_bias) kernels::launch_add_bias(hidden_.get(), H_, L.o_bias.get(), T_, H_, s());
        return;
    }
    // Grok-1: hidden += post_norm(attn . W_o^T + o_bias).
    gemm_xwt(hb(), T_, H_, w, in, w, L.w_o.get(), w, tmp_h_.get(), CUDA_R_16BF, H_);
    if (a.o_bias) kernels::launch_add_bias(tmp_h_.get(), H_, L.o_bias.get(), T_, H_, s());
    norm_rows(tmp_h_.get(), L.post_attn_norm, DeviceBuffer<bf16>{}, tmp_h_.get(), T_);
    kernels::launch_add_inplace(hidden_.get(), tmp_h_.get(), T_ * H_, s());
}

void CudaBackend::phase_router_gemm(Layer& L) {
    gemm_xwt(hb(), T_, m_.moe.num_experts, H_, L.moe_in.get(), H_, L.router.get(), H_, L.logits.get(), CUDA_R_32F,
             m_.moe.num_experts);
    // gpt-oss: the router bias belongs to the logits (the CPU backend's router_logits include it too).
    if (m_.moe.router_bias)
        kernels::launch_add_bias_f32(L.logits.get(), L.router_bias.get(), T_, m_.moe.num_experts, s());
}

bool CudaBackend::stage_override(Layer& L, int64_t slot_idx) {
    if (!override_ || slot_idx >= static_cast<int64_t>(override_->per_layer.size())) return false;
    const LayerRouting& r = override_->per_layer[static_cast<size_t>(slot_idx)];
    if (r.k <= 0) return false;
    if (r.num_tokens != T_ || r.k != k_ || static_cast<int64_t>(r.ids.size()) != T_ * k_)
        config_error("routing", fmt::format("routing for layer slot {} has the wrong shape", slot_idx),
                     fmt::format("{} tokens x k {} ({} ids)", r.num_tokens, r.k, r.ids.size()),
                     fmt::format("the step has {} tokens and k = {}", T_, k_));
    const int64_t E = m_.moe.num_experts;
    for (int32_t id : r.ids)
        if (id < -1 || id >= E)
            config_error("routing", "expert id outside the model", std::to_string(id),
                         fmt::format("ids must be in [0, {}) (or -1)", E));
    // The previous step's copies finished: end_step synchronises the stream before the staging is rewritten.
    std::copy(r.ids.begin(), r.ids.end(), L.ovr_ids.get());
    if (static_cast<int64_t>(r.weights.size()) == T_ * k_)
        std::copy(r.weights.begin(), r.weights.end(), L.ovr_weights.get());
    else
        std::fill(L.ovr_weights.get(), L.ovr_weights.get() + T_ * k_, 1.0f / static_cast<float>(k_));  // as the CPU
    return true;
}

void CudaBackend::phase_topk(Layer& L, int64_t slot_idx) {
    const auto& moe = m_.moe;
    const kernels::RoutingParams p{.route = route_params(m_), .soft_topn = static_cast<int>(opt_.soft_topn)};
    // The router bias is already in the logits (phase_router_gemm).
    topk_variant_ = kernels::launch_topk(L.logits.get(), nullptr, moe.router_correction_bias ? L.correction.get() : nullptr,
                                         p, T_, L.ids.get(), L.weights.get(), topk_scratch_.get(), s());
    // An imposed routing replaces the selection after the router ran (the router's cost stays in the step).
    const bool staged = stage_override(L, slot_idx);
    if (capturing_) L.graph_override = staged;
    if (staged) {
        MOEBENCH_CUDA_CHECK(cudaMemcpyAsync(L.ids.get(), L.ovr_ids.get(), T_ * k_ * sizeof(int32_t),
                                            cudaMemcpyHostToDevice, s()));
        MOEBENCH_CUDA_CHECK(cudaMemcpyAsync(L.weights.get(), L.ovr_weights.get(), T_ * k_ * sizeof(float),
                                            cudaMemcpyHostToDevice, s()));
    }
}

void CudaBackend::phase_permute(Layer& L) {
    const auto& moe = m_.moe;
    const int64_t E = moe.num_experts;
    const int64_t cap = core::expert_capacity(opt_.capacity_factor, T_, static_cast<int>(k_), static_cast<int>(E));
    kernels::launch_permute_index(L.ids.get(), L.weights.get(), T_, k_, E, cap, L.dropped.get() + 2, L.counts.get(),
                                  L.offsets.get(), L.perm_slot.get(), L.perm_expert.get(), L.slot_pos.get(),
                                  L.dropped.get(), s());
    // cuBLAS takes GEMM sizes on the host: bring the counts back (the structural sync of cuBLAS expert GEMMs).
    MOEBENCH_CUDA_CHECK(cudaMemcpyAsync(L.counts_host.get(), L.counts.get(), E * sizeof(int32_t),
                                        cudaMemcpyDeviceToHost, s()));
    MOEBENCH_CUDA_CHECK(cudaMemcpyAsync(L.offsets_host.get(), L.offsets.get(), (E + 1) * sizeof(int32_t),
                                        cudaMemcpyDeviceToHost, s()));
    const int32_t* counts = L.counts_host.get();
    if (capturing_) {
        counts = L.graph_counts.data();  // no sync inside a capture: the sizes of the eager step are baked in
        int32_t off = 0;
        for (int64_t e = 0; e < E; ++e) {
            L.offsets_host[e] = off;
            off += counts[e];
        }
        L.offsets_host[E] = off;
        L.num_rows = off;
    } else {
        MOEBENCH_CUDA_CHECK(cudaStreamSynchronize(s()));
        L.num_rows = L.offsets_host[E];
    }
    // Llama-4 scales the expert input by the router weight (the CPU backend does so with soft top-N too).
    kernels::launch_gather_rows(L.moe_in.get(), L.perm_slot.get(), L.weights.get(),
                                core::route_scales_input(static_cast<int>(moe.routing)), x_perm_.get(), L.num_rows, k_,
                                H_, s());
}

bool CudaBackend::use_grouped(const Layer& L) const {
    if (opt_.expert_gemm == "grouped") return true;
    if (opt_.expert_gemm == "loop") return false;
    // auto: the grouped API pays off when many small GEMMs make launch overhead dominate (decode); public H100 numbers
    // show the per-expert loop ahead at large M (shared notes 1.4). Threshold: mean rows per active expert <= 64.
    int64_t active = 0;
    for (int64_t e = 0; e < m_.moe.num_experts; ++e) active += L.counts_host[e] > 0;
    return active > 0 && L.num_rows <= 64 * active;
}

// One pass of expert GEMMs (up or down) over the permuted rows: one grouped call, or the per-expert loop recording
// which experts its events time. Returns whether the grouped call was used.
bool CudaBackend::run_expert_gemms(Layer& L, ExpertGemmArgs g, PinnedBuffer<const void*>& ptr_host,
                                   DeviceBuffer<const void*>& ptr_dev, std::vector<CudaEvent>& events,
                                   std::vector<int>& experts) {
    g.counts_host = capturing_ ? L.graph_counts.data() : L.counts_host.get();
    g.offsets_host = L.offsets_host.get();
    g.num_experts = m_.moe.num_experts;
    const bool grouped = use_grouped(L);
    if (grouped) {
        experts.clear();
        expert_gemm_grouped(hb(), s(), g, ptr_host.get(), ptr_dev.get());
    } else {
        expert_gemm_loop(hb(), s(), g, events.empty() ? nullptr : &events, &experts, capturing_);
    }
    return grouped;
}

void CudaBackend::phase_expert_up(Layer& L) {
    ExpertGemmArgs g;
    g.n = 2 * m_.moe.expert_intermediate_size;
    g.k = H_;
    g.x = x_perm_.get();
    g.w = L.w_gu.get();
    g.y = h_perm_.get();
    const bool grouped = run_expert_gemms(L, g, L.ptr_host_up, L.ptr_dev_up, L.up_events, L.up_experts);
    expert_variant_ = grouped ? "grouped (cublasGemmGroupedBatchedEx, one group per active expert)"
                              : "loop (cublasGemmEx per active expert)";
}

void CudaBackend::phase_activation(Layer& L) {
    const auto& moe = m_.moe;
    kernels::launch_activation(h_perm_.get(), a_perm_.get(), L.num_rows, moe.expert_intermediate_size,
                               static_cast<int>(m_.activation), act_limit(), moe.expert_bias ? L.b_gu.get() : nullptr,
                               L.perm_expert.get(), s());
}

void CudaBackend::phase_expert_down(Layer& L) {
    ExpertGemmArgs g;
    g.n = H_;
    g.k = m_.moe.expert_intermediate_size;
    g.x = a_perm_.get();
    g.w = L.w_down.get();
    g.y = y_perm_.get();
    run_expert_gemms(L, g, L.ptr_host_down, L.ptr_dev_down, L.down_events, L.down_experts);
}

void CudaBackend::phase_shared(Layer& L) {
    const auto& moe = m_.moe;
    const int64_t Is = moe.num_shared_experts * moe.shared_intermediate_size;
    if (Is <= 0) return;
    gemm_xwt(hb(), T_, 2 * Is, H_, L.moe_in.get(), H_, L.w_sgu.get(), H_, sh_h_.get(), CUDA_R_16BF, 2 * Is);
    kernels::launch_activation(sh_h_.get(), sh_a_.get(), T_, Is, static_cast<int>(m_.activation), act_limit(), nullptr,
                               nullptr, s());
    gemm_xwt(hb(), T_, H_, Is, sh_a_.get(), Is, L.w_sdown.get(), Is, sh_out_.get(), CUDA_R_16BF, H_);
    if (moe.shared_expert_gate)
        kernels::launch_row_dot(L.moe_in.get(), L.shared_gate_w.get(), shared_gate_logit_.get(), T_, H_, s());
}

void CudaBackend::phase_combine(Layer& L) {
    const auto& moe = m_.moe;
    const bool has_shared = moe.num_shared_experts * moe.shared_intermediate_size > 0;
    const bool unit = core::route_scales_input(static_cast<int>(moe.routing));  // weight already on the input
    const bool post = L.post_ffn_norm.size() > 0;
    kernels::launch_combine(y_perm_.get(), L.slot_pos.get(), L.ids.get(), L.weights.get(), unit,
                            moe.expert_bias ? L.b_down.get() : nullptr, has_shared ? sh_out_.get() : nullptr,
                            (has_shared && moe.shared_expert_gate) ? shared_gate_logit_.get() : nullptr,
                            L.moe_out.get(), post ? nullptr : hidden_.get(), T_, k_, H_, s());
    if (post) post_norm_add(L.post_ffn_norm, L.moe_out.get());  // Grok-1: hidden += post_norm(moe_out)
}

void CudaBackend::phase_dense(Layer& L) {
    const int64_t Id = m_.dense_intermediate_size;
    if (Id <= 0) return;
    gemm_xwt(hb(), T_, 2 * Id, H_, normed_.get(), H_, L.w_dgu.get(), H_, d_h_.get(), CUDA_R_16BF, 2 * Id);
    kernels::launch_activation(d_h_.get(), d_a_.get(), T_, Id, static_cast<int>(m_.activation), act_limit(), nullptr,
                               nullptr, s());
    if (L.post_ffn_norm.size() == 0) {
        gemm_xwt(hb(), T_, H_, Id, d_a_.get(), Id, L.w_ddown.get(), Id, hidden_.get(), CUDA_R_16BF, H_, 1.0f);
        return;
    }
    gemm_xwt(hb(), T_, H_, Id, d_a_.get(), Id, L.w_ddown.get(), Id, tmp_h_.get(), CUDA_R_16BF, H_);
    norm_rows(tmp_h_.get(), L.post_ffn_norm, DeviceBuffer<bf16>{}, tmp_h_.get(), T_);
    kernels::launch_add_inplace(hidden_.get(), tmp_h_.get(), T_ * H_, s());
}

void CudaBackend::phase_final_norm() {
    // Decode: every token. Prefill: the last token of each sequence (row stride seq_len * H).
    const bf16* x = hidden_.get() + (tps_ - 1) * H_;
    kernels::launch_norm(x, tps_ * H_, final_norm_w_.get(), final_norm_b_.size() > 0 ? final_norm_b_.get() : nullptr,
                         final_normed_.get(), H_, head_rows_, H_, 1, static_cast<float>(m_.norm_eps),
                         m_.norm == NormKind::layernorm, s());
}

void CudaBackend::phase_lm_head() {
    const bf16* w = m_.tie_word_embeddings ? embed_.get() : lm_head_w_.get();
    gemm_xwt(hb(), head_rows_, m_.vocab_size, H_, final_normed_.get(), H_, w, H_, lm_logits_.get(), CUDA_R_16BF,
             m_.vocab_size);
}

// ---------------------------------------------------------------------------------------------------------------------
// Results for metrics, --check and --dump-tensors.
// ---------------------------------------------------------------------------------------------------------------------

template <typename T>
std::vector<T> to_host(const T* dev, int64_t n) {
    std::vector<T> h(static_cast<size_t>(std::max<int64_t>(n, 0)));
    if (n > 0) MOEBENCH_CUDA_CHECK(cudaMemcpy(h.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}

/// bf16 device tensor -> fp32 NamedTensor, converted on the host in chunks (no second device copy).
NamedTensor bf16_tensor(const std::string& name, std::vector<int64_t> shape, const bf16* dev, int64_t elem_offset = 0,
                        int64_t elem_stride_rows = 0, int64_t row_elems = 0) {
    NamedTensor t;
    t.name = name;
    t.dtype = "F32";
    t.shape = std::move(shape);
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    t.data.resize(static_cast<size_t>(n) * 4);
    std::vector<uint16_t> chunk;
    auto convert = [&](const uint16_t* src, int64_t count, int64_t dst_off) {
        float* dst = reinterpret_cast<float*>(t.data.data()) + dst_off;
        for (int64_t i = 0; i < count; ++i) {
            const uint32_t bits = static_cast<uint32_t>(src[i]) << 16;
            std::memcpy(dst + i, &bits, 4);
        }
    };
    if (elem_stride_rows == 0) {  // contiguous
        const int64_t step = int64_t(1) << 24;
        for (int64_t i = 0; i < n; i += step) {
            const int64_t c = std::min(step, n - i);
            chunk.resize(static_cast<size_t>(c));
            MOEBENCH_CUDA_CHECK(cudaMemcpy(chunk.data(), dev + elem_offset + i, c * 2, cudaMemcpyDeviceToHost));
            convert(chunk.data(), c, i);
        }
    } else {  // rows of row_elems every elem_stride_rows elements (e.g. the gate half of each expert's [gate; up])
        const int64_t rows = n / row_elems;
        chunk.resize(static_cast<size_t>(row_elems));
        for (int64_t r = 0; r < rows; ++r) {
            MOEBENCH_CUDA_CHECK(cudaMemcpy(chunk.data(), dev + elem_offset + r * elem_stride_rows, row_elems * 2,
                                           cudaMemcpyDeviceToHost));
            convert(chunk.data(), row_elems, r * row_elems);
        }
    }
    return t;
}

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
    const Layer& L = slot(layer_slot);
    MOEBENCH_CHECK(L.moe, "layer slot {} is not a MoE layer", layer_slot);
    MOEBENCH_CUDA_CHECK(cudaStreamSynchronize(s()));
    const auto& moe = m_.moe;
    const int64_t E = moe.num_experts, I = moe.expert_intermediate_size;
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
    // w_gu[e] = [gate_e; up_e], each I*H contiguous: read one half per expert (stride 2*I*H between experts).
    out.push_back(bf16_tensor("w_gate", {E, I, H_}, L.w_gu.get(), 0, 2 * I * H_, I * H_));
    out.push_back(bf16_tensor("w_up", {E, I, H_}, L.w_gu.get(), I * H_, 2 * I * H_, I * H_));
    out.push_back(bf16_tensor("w_down", {E, H_, I}, L.w_down.get()));
    if (moe.expert_bias) {
        out.push_back(bf16_tensor("b_gate", {E, I}, L.b_gu.get(), 0, 2 * I, I));
        out.push_back(bf16_tensor("b_up", {E, I}, L.b_gu.get(), I, 2 * I, I));
        out.push_back(bf16_tensor("b_down", {E, H_}, L.b_down.get()));
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

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() {
    std::string why;
    if (!cuda_available(&why)) throw UnsupportedError("cuda backend: " + why);
    return std::make_unique<CudaBackend>();
}

}  // namespace moebench
