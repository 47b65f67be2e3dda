// SPDX-License-Identifier: Apache-2.0
// CudaBackend's declaration, its per-layer state and shared constants: internal to src/backends/cuda.
#pragma once
#include "backends/cuda/cuda_backend.hpp"

#include "backends/cuda/device_buffer.hpp"
#include "backends/cuda/gemm.hpp"
#include "common/error.hpp"
#include "core/moe_core.cuh"
#include "kernels/cuda_check.hpp"
#include "kernels/launch.hpp"
#include "model/route_params.hpp"
#include "workload/offload_replay.hpp"

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

// Named, not anonymous: the class and these helpers are shared by the cuda backend's files.
namespace moebench::cuda_detail {

inline constexpr int64_t kCublasWorkspaceBytes = int64_t(32) << 20;
inline constexpr int64_t kAttnChunk = 256;
// Scales as the CPU backend's initialisers (cpu_weights.cpp): "unit" = U[-sqrt3, sqrt3) (variance 1), norms 1 +- 0.1,
// biases +-0.1, linear layers core::linear_init_scale(fan_in).
inline const float kUnitScale = std::sqrt(3.0f);

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One MoE or dense decoder layer's weights and per-layer state. Row-major, PyTorch Linear layout ([out, in]).
struct Layer {
    int64_t layer = 0;  // model layer index
    bool moe = false;
    bool sliding = false;
    DeviceBuffer<bf16> attn_norm, ffn_norm, attn_norm_b, ffn_norm_b;  // biases: LayerNorm with norm_bias only
    DeviceBuffer<bf16> post_attn_norm, post_ffn_norm;                 // norms_per_layer >= 4 (Grok-1)
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
    DeviceBuffer<int32_t> ids, counts, offsets, perm_slot, perm_expert, slot_pos, dropped, active, tile_offsets;
    PinnedBuffer<int32_t> counts_host, offsets_host;  // E and E+1, filled in permute
    PinnedBuffer<int32_t> ovr_ids;                    // routing override staging, per layer (a captured graph
    PinnedBuffer<float> ovr_weights;                  // re-reads it at every replay)
    std::vector<int32_t> graph_counts;                // counts baked into a captured graph
    bool graph_override = false;                      // whether the captured graph copies an override in
    PinnedBuffer<const void*> ptr_host_up, ptr_host_down;
    DeviceBuffer<const void*> ptr_dev_up, ptr_dev_down;
    std::vector<CudaEvent> up_events, down_events;
    std::vector<int> up_experts, down_experts;
    int64_t num_rows = 0;  // permuted rows of the last step
};

/// Whole-step CUDA graph (--cuda-graph). off: not asked for. eager: the first step runs eagerly (it learns the expert
/// token counts that the graph bakes in); the next begin_step starts capturing. capturing: the second step is being
/// captured (no host syncs; the eager step's counts stand in); end_step instantiates it (back to eager if that fails,
/// or if a failure aborts the capture). replaying: every later step launches the graph; run_phase and mark do nothing.
enum class GraphState { off, eager, capturing, replaying };

/// Who runs the expert GEMMs: the decode kernel (few rows per expert), the tiled tensor-core kernel (any rows; both
/// read the sizes on the device), or cuBLAS (the sizes on the host).
enum class ExpertPath { gemv, tiled, cublas };

// The CUDA backend: one decoder step in bf16 (fp32 accumulation) on one GPU. cuBLAS for every projection and the expert
// GEMMs (per-expert loop or grouped), own kernels (kernels/launch.hpp) for the rest, CUDA events at every mark, NVTX
// ranges named after the phases, optional whole-step CUDA graph and cold-L2 flush.
class CudaBackend final : public Backend, public CeilingProbe, public TensorAccess, public DeviceCounters {
public:
    CudaBackend();
    ~CudaBackend() override;

    BackendTraits traits() const override;
    RooflineCeilings measure_ceilings(const RunOptions&) const override;
    json describe() const override;

    PreparedStep prepare(const ModelConfig& model, const std::vector<int64_t>& layers, const StepShape& shape,
                         const RunOptions& opt, const Topology& topo = Topology{}) override;

    void set_routing_override(const StepRouting* routing) override { override_ = routing; }

    void begin_step() override;
    void run_phase(Phase phase, int64_t layer_slot) override;
    void mark() override;
    std::vector<double> end_step() override;

    MoeLayerResult moe_result(int64_t layer_slot) const override;
    std::vector<NamedTensor> moe_block_tensors(int64_t layer_slot) const override;
    std::vector<NamedTensor> moe_check_tensors(int64_t layer_slot) const override;

    json read_device_counters() const override;
    json device_conditions(const json& before, const json& after, int64_t tokens) const override;

private:
    cudaStream_t s() const { return stream_->get(); }
    cublasHandle_t hb() const { return cublas_->get(); }
    const Layer& slot(int64_t i) const {
        MOEBENCH_CHECK(i >= 0 && i < static_cast<int64_t>(layers_.size()), "layer slot {} out of range", i);
        return *layers_[static_cast<size_t>(i)];
    }
    Layer& slot(int64_t i) { return const_cast<Layer&>(static_cast<const CudaBackend*>(this)->slot(i)); }
    /// Inside the stream capture of step 1: no host syncs, the eager step's counts stand in for this step's.
    bool capturing() const { return graph_state_ == GraphState::capturing; }

    // Weights (cuda_weights.cpp).
    uint64_t base(int64_t layer, uint32_t id) const {
        return core::rng_base(opt_.seed, core::weight_stream(layer, id));
    }
    void fill(DeviceBuffer<bf16>& b, int64_t n, int64_t layer, uint32_t id, float scale, float offset = 0.0f,
              uint64_t first = 0);
    void fill_f32(DeviceBuffer<float>& b, int64_t n, int64_t layer, uint32_t id, float scale, float offset = 0.0f);
    void fill_norm(DeviceBuffer<bf16>& b, int64_t n, int64_t layer, uint32_t id);
    int64_t plan_bytes() const;
    void allocate_layer(Layer& L);
    /// What prepare() settled: the MLA form and the expert kernel of this step.
    PreparedStep prepared_step() const;

    // Step, marks, graph (cuda_backend.cpp).
    void record_mark_event(cudaEvent_t ev);
    /// Ends a stream capture that an error interrupted, so that the stream is usable (and destructible) again.
    void abort_capture() noexcept;
    void run_phase_eager(Phase phase, int64_t layer_slot);
    /// hidden_ = x0_: every step (and every replay that measures the event overhead) starts from the embedded tokens.
    void reset_hidden();
    /// The MoE block's tensors with every expert (routed_only = false) or only those routed this step.
    std::vector<NamedTensor> block_tensors(int64_t layer_slot, bool routed_only) const;
    /// After the step graph is instantiated: the same phases captured again without the mark events (the
    /// phase-event overhead is the difference of the two replays).
    void capture_plain_graph();
    /// kPlainGraphRuns replays of both graphs in turn (in the capture step, a warm-up step).
    void measure_event_overhead();

    // Attention and the model's ends (cuda_attention.cpp).
    kernels::AttentionArgs attention_args() const;
    int64_t qk_dim_mla() const { return m_.attn.qk_nope_head_dim + m_.attn.qk_rope_head_dim; }
    void mla_expand_kv(const Layer& L);     // mla_kv_ from the layer's latent cache (expanded form)
    std::string attention_variant() const;  // kernel_variant.attention: the kernel the last layer ran, and why
    /// Split-attention workspace for the largest call (same shape in every layer; a window only shrinks it).
    int64_t attention_ws_bytes() const;
    int64_t l2_flush_bytes() const;
    void phase_embed();
    void phase_norm(bool attn, Layer* L);
    void phase_qkv(Layer& L);
    void phase_attention(Layer& L);
    void phase_o_proj(Layer& L);
    /// hidden += norm(src) with a post-block norm weight (Grok-1's post-attention / post-FFN norms).
    void post_norm_add(const DeviceBuffer<bf16>& norm_w, const bf16* src);
    void norm_rows(const bf16* x, const DeviceBuffer<bf16>& w, const DeviceBuffer<bf16>& b, bf16* y, int64_t rows);
    void phase_final_norm();
    void phase_lm_head();

    // MoE and dense FFN (cuda_moe.cpp).
    void phase_router_gemm(Layer& L);
    void phase_topk(Layer& L, int64_t slot_idx);
    /// Copies this step's imposed routing of `slot_idx` into L's pinned staging (validated); false when none.
    bool stage_override(Layer& L, int64_t slot_idx);
    float act_limit() const {
        return activation_limit(m_);  // as the CPU backend
    }
    void phase_permute(Layer& L);
    void phase_expert_up(Layer& L);
    // Expert offload (cuda_offload.cpp).
    void offload_setup();
    void phase_expert_fetch(Layer& L, int64_t slot_idx);
    json offload_json() const;
    void phase_activation(Layer& L);
    void phase_expert_down(Layer& L);
    void phase_shared(Layer& L);
    void phase_combine(Layer& L);
    void phase_dense(Layer& L);
    bool use_grouped(const Layer& L) const;
    bool run_expert_gemms(Layer& L, ExpertGemmArgs g, PinnedBuffer<const void*>& ptr_host,
                          DeviceBuffer<const void*>& ptr_dev, std::vector<CudaEvent>& events,
                          std::vector<int>& experts);
    /// The own expert kernels' operands for expert_up (fused gate/up) or expert_down of L.
    kernels::ExpertKernelArgs expert_args(const Layer& L, bool up) const;
    /// The expert kernel for this run (prepare): one of moebench's own, which read the sizes on the device (the step
    /// never waits for the host), or cuBLAS (loop or grouped, per step by tiles against SMs; the counts go to the
    /// host).
    void choose_expert_kernel();
    /// Whether the expert GEMMs take their sizes on the device (no host sync; a graph follows any routing).
    bool device_sized() const { return expert_path_ != ExpertPath::cublas; }

    // Shapes.
    ModelConfig m_;
    StepShape shape_;
    RunOptions opt_;
    int64_t T_ = 0, H_ = 0, tps_ = 1, pos_base_ = 0, cache_len_ = 0, k_ = 0, head_rows_ = 0;
    int64_t qkv_width_ = 0, attn_out_width_ = 0;
    int64_t attn_chunk_ = kAttnChunk;  // keys per split: decode 256 down to 32 (attention_decode_chunk), prefill 512
    int device_ = 0;
    int num_sms_ = 0;
    int64_t planned_bytes_ = 0;
    ExpertPath expert_path_ = ExpertPath::cublas;  // see choose_expert_kernel
    int own_grid_ = 0;           // the own kernel's persistent grid (asked of the device once, in prepare)
    std::string expert_choice_;  // why: reported as kernel_variant.expert_gemm_choice

    std::unique_ptr<CudaStream> stream_;
    DeviceBuffer<uint8_t> cublas_ws_;  // declared before the handle: destroyed after it
    std::unique_ptr<CublasHandle> cublas_;

    std::vector<std::unique_ptr<Layer>> layers_;
    DeviceBuffer<bf16> embed_, final_norm_w_, final_norm_b_, lm_head_w_;
    // Activations shared by all layers.
    DeviceBuffer<int32_t> token_ids_;
    // x0_: the embedded tokens; every step starts from them (as the CPU backend), also when embed is not run.
    DeviceBuffer<bf16> x0_, tmp_h_;
    DeviceBuffer<bf16> hidden_, normed_, qkv_, attn_out_, q_attn_, mla_v_, final_normed_, lm_logits_;
    DeviceBuffer<bf16> x_perm_, h_perm_, a_perm_, y_perm_, sh_h_, sh_a_, sh_out_, d_h_, d_a_, mla_q_a_;
    DeviceBuffer<bf16> mla_kv_;  // expanded MLA: per cached row and head [k_nope | k_rope | v] (see mla_expand_)
    DeviceBuffer<float> topk_scratch_, shared_gate_logit_, attn_ws_f_;
    DeviceBuffer<int32_t> perm_ws_;  // launch_permute_index's workspace (layers run one after another)
    DeviceBuffer<float> rope_cs_;    // RoPE cos/sin of the step's positions (launch_rope_table, once in prepare)
    DeviceBuffer<uint8_t> l2_flush_;
    DeviceBuffer<unsigned long long> l2_flush_sink_;

    const StepRouting* override_ = nullptr;
    // Expert offload: per layer slot the experts' pinned host copies, the caches, a copy stream and a fetch buffer.
    std::unique_ptr<StepExpertCaches> offload_;
    std::vector<PinnedBuffer<bf16>> offload_host_;
    std::unique_ptr<CudaStream> copy_stream_;
    CudaEvent copy_ready_, copy_done_;
    DeviceBuffer<bf16> fetch_dev_;
    PinnedBuffer<int32_t> offload_ids_;
    int64_t fetch_slots_ = 0, expert_elems_ = 0, fetched_experts_ = 0;
    std::string expert_variant_ = "none (no MoE layer run yet)";
    std::string topk_variant_ = "none";
    kernels::AttentionKernel attn_kernel_ = kernels::AttentionKernel::automatic;  // automatic: no layer run yet
    // MLA in its expanded form (per-head k and v from the latent cache through kv_b each step, then the flash kernel
    // as multi-head attention with dk = nope + rope, dv = v_head_dim), as DeepSeek's prefill runs it: when the flash
    // kernel runs (auto: 16+ tokens per sequence; or --attention-kernel flash). Else absorbed (attention over the
    // latent cache, latent or split-context kernel), as its decode runs it. Set in prepare.
    bool mla_expand_ = false;

    // Timing: one event per mark; graph state.
    std::vector<CudaEvent> mark_events_;
    size_t num_marks_ = 0;
    int64_t steps_done_ = 0;  // also varies the cold-L2 flush byte
    GraphState graph_state_ = GraphState::off;
    cudaGraph_t graph_ = nullptr;
    cudaGraphExec_t graph_exec_ = nullptr;
    CudaEvent graph_start_, graph_stop_;
    // Per replayed step: events around cudaGraphLaunch, and the sum of its phase intervals (medians in describe()).
    std::vector<double> graph_replay_us_, graph_phase_sum_us_;
    std::vector<std::pair<Phase, int64_t>> captured_phases_;  // the captured step's phases, in order
    // Replay pairs that measure the event overhead (>= 30: the device check judges their medians).
    static constexpr int64_t kPlainGraphRuns = 32;
    cudaGraph_t plain_graph_ = nullptr;
    cudaGraphExec_t plain_exec_ = nullptr;
    CudaEvent plain_start_, plain_stop_;
    std::vector<double> plain_us_, paired_replay_us_;  // per pair: without / with the phase events
    std::string plain_error_;
};

}  // namespace moebench::cuda_detail
