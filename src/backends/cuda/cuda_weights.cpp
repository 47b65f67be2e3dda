// SPDX-License-Identifier: Apache-2.0
// CudaBackend's weights: the memory plan, prepare() and each layer's tensors, generated on the device from the seed.
#include "backends/cuda/cuda_backend_impl.hpp"

#include "common/flag_names.hpp"

#include <algorithm>

namespace moebench::cuda_detail {

void CudaBackend::fill(DeviceBuffer<bf16>& b, int64_t n, int64_t layer, uint32_t id, float scale, float offset,
                       uint64_t first) {
    if (b.size() < n) b.resize(n);
    kernels::launch_fill_bf16(b.get(), n, base(layer, id), first, scale, offset, s());
}

void CudaBackend::fill_f32(DeviceBuffer<float>& b, int64_t n, int64_t layer, uint32_t id, float scale, float offset) {
    b.resize(n);
    kernels::launch_fill_f32(b.get(), n, base(layer, id), 0, scale, offset, s());
}

void CudaBackend::fill_norm(DeviceBuffer<bf16>& b, int64_t n, int64_t layer, uint32_t id) {
    fill(b, n, layer, id, 0.1f, 1.0f);
}

// Cold L2: a read over twice the L2 size (at least 1 MiB) evicts the previous step's lines.
int64_t CudaBackend::l2_flush_bytes() const {
    int l2 = 0;
    MOEBENCH_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device_));
    return std::max<int64_t>(2 * int64_t(l2), int64_t(1) << 20);
}

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
            w += 2 * T_ * H_;  // moe_in, moe_out
            // logits, ids, weights, perm_slot, perm_expert, slot_pos, counts/offsets/active/tiles (4-byte = 2 bf16)
            w += (T_ * E + 5 * T_ * k_) * 2 + 4 * (E + 1) * 2;
        } else {
            w += 3 * m_.dense_intermediate_size * H_;
        }
    }
    // Shared activations: x0, tmp, hidden, normed, qkv, attention out, MoE permuted buffers, shared and dense FFN,
    // head.
    w += 4 * T_ * H_ + T_ * std::max<int64_t>(qkv_width_, H_) + T_ * attn_out_width_;
    w += max_act_rows * (2 * H_ + 3 * I);
    // Shared-expert scratch (h, a, out) and the dense FFN's: both exist when a run has dense and MoE layers.
    const int64_t Is = moe.num_shared_experts * moe.shared_intermediate_size;
    if (Is > 0) w += T_ * (3 * Is + H_);
    w += T_ * 3 * m_.dense_intermediate_size;
    if (a.kind == AttentionKind::mla) {  // absorbed q or the expanded k/v, per-head values, q_a scratch
        const int64_t lat = a.kv_lora_rank + a.qk_rope_head_dim;
        w += mla_expand_ ? B * cache_len_ * Hq * (qk_dim_mla() + a.v_head_dim) : T_ * Hq * lat;
        w += T_ * Hq * a.v_head_dim + T_ * std::max<int64_t>(a.q_lora_rank, lat);
    }
    w += head_rows_ * (H_ + m_.vocab_size);
    int64_t bytes = 2 * w + kCublasWorkspaceBytes + attention_ws_bytes();
    bytes += T_ * kernels::topk_scratch_floats(std::max<int64_t>(E, 1), moe.num_groups) * 4;
    bytes += kernels::permute_workspace_ints(T_ * k_, std::max<int64_t>(E, 1)) * 4;
    if (opt_.cold_l2) bytes += l2_flush_bytes();
    return bytes;
}

PreparedStep CudaBackend::prepare(const ModelConfig& model, const std::vector<int64_t>& layers, const StepShape& shape,
                                  const RunOptions& opt,
                                  const Topology& /*topo: one GPU; expert parallelism is issue 16*/) {
    m_ = model;
    shape_ = shape;
    opt_ = opt;
    graph_state_ = opt_.cuda_graph ? GraphState::eager : GraphState::off;
    attn_kernel_ = kernels::AttentionKernel::automatic;  // no layer of this preparation has run
    const auto& a = m_.attn;
    if (opt.layout.moe_ep > 1)
        throw UnsupportedError(fmt::format(
            "{} {}: the cuda backend runs on one GPU and does not implement expert-parallel all-to-all; use {} 1 "
            "(or the sim backend to model expert parallelism)",
            flag_of("ep"), opt.layout.moe_ep, flag_of("ep")));
    if (opt.expert_gemm != "auto" && opt.expert_gemm != "gemv" && opt.expert_gemm != "tiled" &&
        opt.expert_gemm != "grouped" && opt.expert_gemm != "loop")
        config_error(flag_of("expert_gemm"), "unknown expert GEMM variant", opt.expert_gemm,
                     "use auto, gemv, tiled, grouped or loop");
    if (opt.attention_kernel != "auto" && opt.attention_kernel != "split" && opt.attention_kernel != "flash" &&
        opt.attention_kernel != "latent")
        config_error(flag_of("attention_kernel"), "unknown attention kernel", opt.attention_kernel,
                     "use auto, split, flash or latent");
    if (opt.expert_times && opt.expert_gemm != "auto" && opt.expert_gemm != "loop")
        config_error(flag_of("expert_times"), "times each expert's GEMMs, which only the per-expert loop runs apart",
                     flag_of("expert_gemm") + " " + opt.expert_gemm,
                     fmt::format("use {} loop (or auto) with {}", flag_of("expert_gemm"), flag_of("expert_times")));
    MOEBENCH_CUDA_CHECK(cudaDeviceGetAttribute(&num_sms_, cudaDevAttrMultiProcessorCount, device_));
    H_ = m_.hidden_size;
    T_ = shape.num_tokens();
    tps_ = shape.mode == Mode::decode ? 1 : shape.seq_len;
    // Decode: the new token sits at position `context`. Prefill: sequences start at position 0 (as the CPU backend).
    pos_base_ = shape.mode == Mode::decode ? shape.context : 0;
    cache_len_ = pos_base_ + tps_;
    k_ = opt.soft_topn > 0 ? opt.soft_topn : m_.moe.top_k;
    head_rows_ = shape.mode == Mode::decode ? T_ : shape.batch;
    attn_chunk_ = shape.mode == Mode::decode ? kAttnChunk : 2 * kAttnChunk;
    if (m_.moe.num_experts > kernels::permute_max_experts())
        throw UnsupportedError(fmt::format("{} experts: the cuda permutation takes at most {}", m_.moe.num_experts,
                                           kernels::permute_max_experts()));
    choose_expert_kernel();
    // The own kernels' persistent grids, asked of the device once.
    if (expert_path_ == ExpertPath::gemv) own_grid_ = kernels::gemv_grid_blocks(num_sms_);
    if (expert_path_ == ExpertPath::tiled) own_grid_ = kernels::tiled_grid_blocks(num_sms_);
    if (a.kind == AttentionKind::mla) {
        const int64_t qhd = a.qk_nope_head_dim + a.qk_rope_head_dim;
        qkv_width_ = a.num_heads * qhd;
        // attn_out_ also holds the latent projection [T, kv_lora + rope] during qkv_proj (it is free until attention).
        attn_out_width_ =
            std::max(a.num_heads * std::max(a.kv_lora_rank, a.v_head_dim), a.kv_lora_rank + a.qk_rope_head_dim);
    } else {
        qkv_width_ = (a.num_heads + 2 * a.num_kv_heads) * a.head_dim;
        attn_out_width_ = a.num_heads * a.head_dim;
        if (a.head_dim > kernels::attention_max_dv())
            throw UnsupportedError(fmt::format("head_dim {} exceeds the attention kernel's limit ({})", a.head_dim,
                                               kernels::attention_max_dv()));
    }
    // MLA: expanded (flash) when the flash kernel takes it, absorbed (latent or split) otherwise; see mla_expand_.
    mla_expand_ = a.kind == AttentionKind::mla && opt.attention_kernel != "split" && opt.attention_kernel != "latent";
    if (mla_expand_ && opt.attention_kernel == "auto")
        mla_expand_ = kernels::attention_kernel_of(attention_args()) == kernels::AttentionKernel::flash;
    if (a.kind == AttentionKind::mla && !mla_expand_ &&
        (a.kv_lora_rank + a.qk_rope_head_dim > 1024 || a.kv_lora_rank > kernels::attention_max_dv()))
        throw UnsupportedError(fmt::format("MLA kv_lora_rank {} exceeds the absorbed attention kernels' limit ({})",
                                           a.kv_lora_rank, kernels::attention_max_dv()));
    // Decode: split the context finer when the batch is too small to fill the GPU (the workspace follows).
    if (shape.mode == Mode::decode) attn_chunk_ = kernels::attention_decode_chunk(attention_args(), num_sms_);
    // Expanded: attention writes mla_v_, so attn_out_ is only the latent projection's scratch.
    if (mla_expand_) attn_out_width_ = a.kv_lora_rank + a.qk_rope_head_dim;
    if (opt.attention_kernel == "flash" && !kernels::flash_attention_fits(attention_args()))
        config_error(flag_of("attention_kernel"), "needs head dims (dk, dv) that are multiples of 16 and at most 256",
                     fmt::format("flash with dk={} dv={}", attention_args().dk, attention_args().dv),
                     "use " + flag_of("attention_kernel") + " auto or split");
    if (opt.attention_kernel == "latent" &&
        (a.kind != AttentionKind::mla || !kernels::latent_attention_fits(attention_args())))
        config_error(flag_of("attention_kernel"),
                     "runs MLA's latent cache (one kv head whose values are its keys' first dv "
                     "columns; dk <= 576, dk and dv multiples of 16)",
                     fmt::format("latent with {} kv heads, dk={} dv={}", attention_args().num_kv_heads,
                                 attention_args().dk, attention_args().dv),
                     "use " + flag_of("attention_kernel") + " auto or split");
    if (m_.moe.num_experts > 0 && k_ > m_.moe.num_experts)
        config_error(flag_of("soft_topn"), "more experts than the model has", std::to_string(k_),
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
            "(keeping {:.1f} GiB spare); use fewer {}, a smaller {}/{}, or more GPUs (expert "
            "parallelism is not available on the cuda backend yet)",
            planned_bytes_ / 1073741824.0, layers.size(), m_.name, T_, free_b / 1073741824.0, reserve / 1073741824.0,
            flag_of("layers"), flag_of("batch"), flag_of("context")));
    }

    // Model-level tensors and shared activations.
    fill(embed_, m_.vocab_size * H_, -1, core::kWEmbed, kUnitScale);
    fill_norm(final_norm_w_, H_, -1, core::kWFinalNorm);
    if (m_.norm == NormKind::layernorm && m_.norm_bias) fill(final_norm_b_, H_, -1, core::kWFinalNormBias, 0.1f);
    if (!m_.tie_word_embeddings) fill(lm_head_w_, m_.vocab_size * H_, -1, core::kWLmHead, core::linear_init_scale(H_));
    // RoPE's table for the positions this step writes (pos_base_ .. + tokens per sequence), as the CPU's.
    const int64_t rot =
        a.kind == AttentionKind::mla ? a.qk_rope_head_dim : (a.rotary_dim > 0 ? a.rotary_dim : a.head_dim);
    rope_cs_.resize(std::max<int64_t>(1, tps_ * rot));
    kernels::launch_rope_table(rope_cs_.get(), pos_base_, tps_, rot, a.rope_theta, s());
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
        // One of the two forms' buffers (a second prepare frees the other's).
        mla_kv_.resize(mla_expand_ ? shape_.batch * cache_len_ * a.num_heads * (qk_dim_mla() + a.v_head_dim) : 0);
        q_attn_.resize(mla_expand_ ? 0 : T_ * a.num_heads * lat);
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
        perm_ws_.resize(kernels::permute_workspace_ints(rows, moe.num_experts));
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
        l2_flush_.resize(l2_flush_bytes());
        l2_flush_sink_.resize(1);
    }
    kernels::launch_embed(token_ids_.get(), embed_.get(), x0_.get(), T_, H_, s());
    MOEBENCH_CUDA_CHECK(cudaStreamSynchronize(s()));
    offload_setup();
    return prepared_step();
}

PreparedStep CudaBackend::prepared_step() const {
    PreparedStep step;
    // Expanded MLA (flash) is counted as such; absorbed otherwise (mla_expand_).
    step.mla_form = mla_expand_ ? MlaForm::latent_expand : MlaForm::absorbed;
    if (m_.moe.num_experts > 0)
        step.kernels.emplace_back("expert_gemm", expert_path_ == ExpertPath::gemv    ? "gemv"
                                                 : expert_path_ == ExpertPath::tiled ? "tiled"
                                                                                     : "cublas");
    if (m_.attn.kind == AttentionKind::mla) step.kernels.emplace_back("mla", mla_expand_ ? "expanded" : "absorbed");
    return step;
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
        L.dropped.resize(1);
        L.active.resize(E + 1);
        L.tile_offsets.resize(E + 1);
        L.counts_host.resize(E);
        L.ovr_ids.resize(T_ * k_);
        L.ovr_weights.resize(T_ * k_);
        L.offsets_host.resize(E + 1);
        L.ptr_host_up.resize(3 * E);
        L.ptr_host_down.resize(3 * E);
        L.ptr_dev_up.resize(3 * E);
        L.ptr_dev_down.resize(3 * E);
        if (opt_.expert_times) {  // events inside the step only when asked (they cost time between the GEMMs)
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

void CudaBackend::choose_expert_kernel() {
    const int64_t E = m_.moe.num_experts, I = m_.moe.expert_intermediate_size;
    // Both own kernels read rows of 8 bf16 at a time.
    const bool fits = kernels::gemv_supported(H_) && kernels::gemv_supported(I);
    expert_path_ = ExpertPath::cublas;
    if (E <= 0) {
        expert_choice_ = "no MoE layer: no expert GEMMs";
        return;
    }
    const std::string& v = opt_.expert_gemm;
    if (v == "gemv" || v == "tiled") {
        if (!fits)
            config_error(flag_of("expert_gemm"), "the " + v + " kernel reads rows of 8 bf16 at a time", v,
                         fmt::format("hidden {} and expert intermediate {} must be multiples of 8; use auto, grouped "
                                     "or loop",
                                     H_, I));
        expert_path_ = v == "gemv" ? ExpertPath::gemv : ExpertPath::tiled;
        expert_choice_ = "forced: " + flag_of("expert_gemm") + " " + v;
        return;
    }
    if (v != "auto" || opt_.expert_times) {
        expert_choice_ = opt_.expert_times ? flag_of("expert_times") + ": the per-expert loop"
                                           : "forced: " + flag_of("expert_gemm") + " " + v;
        return;
    }
    // auto: rows per expert if the step's assignments spread over as many experts as they can. Up to
    // kGemvMaxRows (two passes of the kernel's 8-row groups) the weights' bytes are the cost and the own kernel
    // streams them on every SM without a host sync; beyond, tensor-core GEMMs (cuBLAS) win. The tiled kernel is
    // never auto's choice: it is for graphs whose routing changes (simple, so slower than cuBLAS).
    constexpr int64_t kGemvMaxRows = 16;
    const int64_t assignments = T_ * k_;
    const int64_t rows = ceil_div(assignments, std::max<int64_t>(1, std::min(E, assignments)));
    const bool gemv = fits && rows <= kGemvMaxRows;
    if (gemv) expert_path_ = ExpertPath::gemv;
    expert_choice_ = fmt::format("auto: {} rows per touched expert ({} assignments over up to {} experts) {} {} -> {}",
                                 rows, assignments, E, gemv ? "<=" : ">", kGemvMaxRows,
                                 gemv ? "gemv"
                                      : "cuBLAS (grouped when an expert's GEMM has fewer 128x128 tiles than "
                                        "SMs, else the per-expert loop; per step)");
    if (!fits) expert_choice_ += "; gemv needs hidden and intermediate sizes that are multiples of 8";
}

}  // namespace moebench::cuda_detail
