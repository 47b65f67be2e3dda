// SPDX-License-Identifier: Apache-2.0
// The CPU backend's state: weights, activation buffers and per-MoE-layer results. Internal to src/backends/cpu
// and to the tests (which read hidden() to check whole phases against reference loops).
#pragma once
#include "backends/cpu/cpu_backend.hpp"
#include "backends/cpu/cpu_weights.hpp"
#include "backends/cpu/thread_pool.hpp"
#include "core/dispatch_dtype.hpp"
#include "model/placement.hpp"
#include "workload/offload_replay.hpp"

#include <chrono>
#include <memory>
#include <vector>

namespace moebench::cpu {

/// Per MoE layer slot: the block's input and output (kept for --dump-tensors) and what routing did.
struct MoeSlotState {
    FBuf moe_in;   // [T, H] ffn_norm output
    FBuf moe_out;  // [T, H] routed + shared, before the residual add
    MoeLayerResult result;
    int64_t k = 0;  // k of the selection used in the last step (family k, soft top-N or override)
};

/// Expert parallelism over processes (prepare() with a Topology of world_size > 1): this rank runs its own
/// sequences through attention (data parallel) and the experts the placement gives it; the MoE block exchanges
/// rows with MPI all-to-all-v (cpu_ep.cpp). Buffers are kept between steps.
struct EpState {
    Communicator* comm = nullptr;
    int64_t rank = 0, world = 1;
    int64_t first_token = 0;    // global index of this rank's first token
    int64_t global_tokens = 0;  // tokens of the whole step (every rank's)
    ExpertPlacement placement;
    std::vector<int32_t> experts;  // global ids held here, ascending: the weights' expert slots
    bool dedup = true;
    core::DispatchDtype dtype = core::DispatchDtype::fp32;
    int64_t row_bytes = 0, meta_bytes = 0;  // per dispatched row on the wire
    // source side: the rows this rank's tokens send
    std::vector<int64_t> send_rows;    // [dst rank]
    std::vector<int64_t> row_of_slot;  // per-expert: [t * k + j] -> row (-1: dropped)
    std::vector<int64_t> token_rows;   // dedup: rows of token t are token_rows[tok_off[t] .. tok_off[t+1])
    std::vector<int64_t> tok_off;
    std::vector<uint8_t> send_payload;  // [rows, row_bytes + meta_bytes]: each row's payload, then metadata
    std::vector<float> ret_recv;        // [sent rows, H]: expert outputs back from the expert ranks
    // expert side: the rows that arrived
    std::vector<int64_t> recv_rows;                // [src rank]
    std::vector<uint8_t> recv_payload;             // likewise, as they arrived
    std::vector<float> recv_x;                     // [arrived rows, H] dequantised
    std::vector<int64_t> counts, offsets, cursor;  // per held expert
    std::vector<int32_t> asg_row;                  // expert-major assignment -> arrived row
    std::vector<float> asg_weight;
    std::vector<float> ret_send;    // [arrived rows, H]
    std::vector<double> expert_us;  // per held expert
};

class CpuBackend final : public Backend, public CeilingProbe, public TensorAccess {
public:
    CpuBackend() = default;
    BackendTraits traits() const override;
    json describe() const override;
    PreparedStep prepare(const ModelConfig& model, const std::vector<int64_t>& layers, const StepShape& shape,
                         const RunOptions& opt, const Topology& topo = Topology{}) override;
    void set_routing_override(const StepRouting* routing) override;
    void begin_step() override;
    void run_phase(Phase phase, int64_t layer_slot) override;
    void mark() override;
    std::vector<double> end_step() override;
    MoeLayerResult moe_result(int64_t layer_slot) const override;
    // The capabilities its traits list: tensors, ceilings (cpu_ceilings.cpp).
    std::vector<NamedTensor> moe_block_tensors(int64_t layer_slot) const override;
    RooflineCeilings measure_ceilings(const RunOptions& opt) const override;  // cpu_ceilings.cpp
    void remeasure_ceilings(RooflineCeilings& c, const RunOptions& opt) const override;

    // For tests and tools.
    const float* hidden() const { return x_.data(); }  // residual stream [T, H]
    float* hidden_mut() { return x_.data(); }
    const float* lm_logits() const { return lm_logits_.data(); }  // [lm_rows, V]
    int64_t lm_rows() const { return lm_rows_; }
    const int32_t* token_ids() const { return token_ids_.data(); }
    const ModelWeights& weights() const { return w_; }
    const Dims& dims() const { return d_; }
    int64_t num_tokens() const { return T_; }

private:
    // prepare()'s stages
    void check_runnable(const ModelConfig& model, const std::vector<int64_t>& layers, const StepShape& shape,
                        const RunOptions& opt) const;
    void plan_layout(const StepShape& shape, const StepShape& global, const RunOptions& opt);
    void check_memory(const ModelConfig& model, const std::vector<int64_t>& layers, const StepShape& shape,
                      int64_t cache_ctx, const WeightSlice& slice) const;
    void allocate_buffers(const std::vector<int64_t>& layers);
    void init_tokens(const ModelConfig& model, const StepShape& shape, uint64_t seed);

    void phase_embed();
    void phase_attn_norm(int64_t slot);
    void phase_qkv(int64_t slot);
    void phase_attention(int64_t slot);
    void phase_linear_attention(int64_t slot);  // cpu_linear_attention.cpp
    void phase_o_proj(int64_t slot);
    void phase_ffn_norm(int64_t slot);
    void phase_router(int64_t slot);
    void phase_topk(int64_t slot);
    void phase_permute(int64_t slot);
    void phase_expert_up(int64_t slot);
    // expert offload, the host analogue (cpu_offload.cpp)
    void offload_setup();
    void phase_expert_fetch(int64_t slot);
    int64_t expert_floats() const;
    json offload_json() const;
    void phase_activation(int64_t slot);
    void phase_expert_down(int64_t slot);
    void phase_shared(int64_t slot);
    void phase_unpermute(int64_t slot);
    // moe_out = shared + the rows of each token's slots (`rows[row_of_slot[t k + j]]`), weighted in slot order;
    // then the residual add (after Grok's post-FFN norm)
    void sum_slots(int64_t slot, const int64_t* row_of_slot, const float* rows);
    void add_block_output(int64_t slot);
    // expert parallelism over processes (cpu_ep.cpp)
    bool ep_on() const { return ep_.world > 1; }
    void ep_setup(const Topology& topo, const RunOptions& opt);
    void ep_permute(int64_t slot);
    void ep_dispatch(int64_t slot);
    void ep_combine(int64_t slot);
    void ep_unpermute(int64_t slot);
    void ensure_expert_rows(int64_t rows);
    const std::vector<int64_t>& expert_counts() const { return ep_on() ? ep_.counts : counts_; }
    const std::vector<int64_t>& expert_offsets() const { return ep_on() ? ep_.offsets : offsets_; }
    void phase_dense(int64_t slot);
    void phase_final_norm();
    void phase_lm_head();

    void norm(const float* x, const FBuf& w, const FBuf& b, float* out, int64_t rows) const;
    void ensure_routing_capacity(int64_t k);
    float* ffn_in(int64_t slot);
    LayerWeights& lw(int64_t slot);

    ModelConfig m_;
    Dims d_;
    StepShape shape_;
    RunOptions opt_;
    std::vector<int64_t> layers_;
    int64_t T_ = 0;
    std::unique_ptr<ThreadPool> pool_;
    ModelWeights w_;

    // Activations, row-major. T = tokens of the step; Kmax = largest k a selection may have.
    FBuf x_, xn_, fin_, tmp_h_;            // [T, H]
    FBuf x0_;                              // [T, H] embedding output: each step starts from it
    FBuf qkv_, q_, k_, v_, attn_out_;      // [T, qkv_width], [T, nh*dq], [T, nkv*dq], [T, nkv*dv], [T, nh*dv]
    FBuf q_a_, kv_a_, kv_lat_, kvb_;       // MLA: [T, q_lora], [T, kv_lora+rope], [T, kv_lora], [T, nh*(nope+dv)]
    FBuf la_proj_, la_conv_out_, la_run_;  // linear attention: [T, la_in], [T, channels], running states
    FBuf logits_;                          // [T, E]
    std::vector<int32_t> ids_;             // [T, Kmax]
    std::vector<float> wts_;               // [T, Kmax]
    std::vector<int64_t> slot_of_, counts_, offsets_, cursor_;
    std::vector<int32_t> token_of_row_;
    FBuf xperm_, gu_, act_, yperm_;  // [T*Kmax, H], [T*Kmax, 2I], [T*Kmax, I], [T*Kmax, H]
    FBuf sgu_, sact_, sout_;         // shared: [T, 2*SI], [T, SI], [T, H]
    FBuf dgu_, dact_;                // dense: [T, 2*Id], [T, Id]
    FBuf lm_in_, lm_logits_;         // [lm_rows, H], [lm_rows, V]
    int64_t lm_rows_ = 0;
    int64_t kmax_ = 0;
    PanelPlan plan_;                  // which weights are in panel layout (decided in prepare)
    std::vector<int32_t> token_ids_;  // [T]
    std::vector<int64_t> positions_;  // [T]
    FBuf rope_cs_;                    // [num_positions, rot_dim]
    std::vector<MoeSlotState> moe_;   // per layer slot (empty buffers for dense slots)
    bool has_override_ = false;
    StepRouting override_;
    std::vector<std::chrono::steady_clock::time_point> marks_;
    EpState ep_;
    std::unique_ptr<StepExpertCaches> offload_;  // expert offload: one cache per layer slot (null: none)
    FBuf fetch_buf_;                             // [fetch_slots_, one expert's gate|up|down floats]
    int64_t fetch_slots_ = 0, fetched_experts_ = 0, fetched_bytes_ = 0;
};

/// A weight goes to the panel layout when its products have at most this many rows (for experts: on average,
/// tokens x k / experts); above it OpenBLAS's packing is amortised and the [out, in] layout is kept. Measured on
/// the 2-core Xeon (bench moe): at 128 rows per expert the panel kernel was 1.2-1.4x faster than OpenBLAS, at
/// 256 faster for Mixtral and slower for OLMoE, at prefill (512-1024) 10-25% slower.
inline constexpr int64_t kPanelMaxRows = 128;

/// Activation floats the buffers above take (for the memory preflight).
int64_t activation_floats(const ModelConfig& m, const std::vector<int64_t>& layers, const StepShape& shape,
                          int64_t kmax);

}  // namespace moebench::cpu
