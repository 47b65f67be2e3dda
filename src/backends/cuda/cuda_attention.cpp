// SPDX-License-Identifier: Apache-2.0
// CudaBackend's attention-side phases: embed, norms, qkv_proj (GQA, absorbed MLA), attention, o_proj, final norm, head.
#include "backends/cuda/cuda_backend_impl.hpp"

#include <fmt/format.h>

#include <cmath>

namespace moebench::cuda_detail {

// The attention launch's shapes and strides (one layer's cache, window and sinks are set by phase_attention).
kernels::AttentionArgs CudaBackend::attention_args() const {
    const auto& a = m_.attn;
    kernels::AttentionArgs args;
    args.num_tokens = T_;
    args.tokens_per_seq = tps_;
    args.cache_len = cache_len_;
    args.pos_base = pos_base_;
    args.num_heads = a.num_heads;
    args.chunk = attn_chunk_;
    args.kernel = opt_.attention_kernel == "flash"    ? kernels::AttentionKernel::flash
                  : opt_.attention_kernel == "split"  ? kernels::AttentionKernel::split
                  : opt_.attention_kernel == "latent" ? kernels::AttentionKernel::latent
                                                      : kernels::AttentionKernel::automatic;
    if (a.kind == AttentionKind::mla && mla_expand_) {
        // Expanded MLA: multi-head attention of q [T, Hq, nope | rope] over mla_kv_'s per-head [k (nope | rope) | v];
        // the output is the per-head v, o_proj's input.
        const int64_t qhd = qk_dim_mla(), row = qhd + a.v_head_dim;
        args.q = qkv_.get();
        args.q_token_stride = a.num_heads * qhd;
        args.q_head_stride = qhd;
        args.k = mla_kv_.get();
        args.v = mla_kv_.size() > 0 ? mla_kv_.get() + qhd : nullptr;
        args.kv_row_stride = a.num_heads * row;
        args.kv_head_stride = row;
        args.num_kv_heads = a.num_heads;
        args.dk = qhd;
        args.dv = a.v_head_dim;
        args.scale = 1.0f / std::sqrt(static_cast<float>(qhd));
        args.out = mla_v_.get();
        return args;
    }
    if (a.kind == AttentionKind::mla) {
        // Weight-absorbed MLA: q [T, Hq, kvl | rope] against the latent rows [c_kv | k_rope] (one kv head for all),
        // values = the c_kv part of the same rows.
        const int64_t kvl = a.kv_lora_rank, lat = kvl + a.qk_rope_head_dim;
        args.q = q_attn_.get();
        args.q_token_stride = a.num_heads * lat;
        args.q_head_stride = lat;
        args.kv_row_stride = lat;
        args.kv_head_stride = 0;
        args.num_kv_heads = 1;
        args.values_in_keys = true;
        args.dk = lat;
        args.dv = kvl;
        args.scale = 1.0f / std::sqrt(static_cast<float>(a.qk_nope_head_dim + a.qk_rope_head_dim));
    } else {
        const int64_t hd = a.head_dim;
        args.q = qkv_.get();
        args.q_token_stride = qkv_width_;
        args.q_head_stride = hd;
        args.kv_row_stride = a.num_kv_heads * hd;
        args.kv_head_stride = hd;
        args.num_kv_heads = a.num_kv_heads;
        args.dk = hd;
        args.dv = hd;
        args.scale = 1.0f / std::sqrt(static_cast<float>(hd));
    }
    args.out = attn_out_.get();  // MLA: [T, Hq, kvl]
    return args;
}

std::string CudaBackend::attention_variant() const {
    switch (attn_kernel_) {
        case kernels::AttentionKernel::flash:
            return "flash (tensor cores, 64 queries x 64 keys per tile, running softmax in shared memory, no "
                   "workspace; each K/V tile read once per 64 queries of a head)";
        case kernels::AttentionKernel::latent:
            return fmt::format(
                "latent (tensor cores over MLA's latent cache: 64 heads of a token as the rows of a "
                "tile, key tiles of 32 read once for them, values from the same rows; split over the "
                "context in chunks of {} + merge)",
                attn_chunk_);
        case kernels::AttentionKernel::split:
            return fmt::format(
                "split_context(chunk={}) + merge; one block per (token, up to 8 heads sharing a kv head, "
                "chunk): each cached row read once for them; many queries run in query tiles whose "
                "split workspace fits {} MiB (K/V re-read per query)",
                attn_chunk_, kernels::kAttnWorkspaceBudgetBytes >> 20);
        case kernels::AttentionKernel::automatic: break;
    }
    return "none (no attention layer run yet)";
}

int64_t CudaBackend::attention_ws_bytes() const {
    return static_cast<int64_t>(kernels::attention_workspace_bytes(attention_args()));
}

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
        kernels::launch_rope(qkv_.get(), T_, Hq, Hq * qhd, qhd, nope, rope, tps_, rope_cs_.get(), s());
        // Latent: [c_kv (kvl) | k_rope (rope)] = x W_kva^T; norm c_kv, rope k_rope, append to the latent cache.
        bf16* kv_a = attn_out_.get();  // free until attention runs
        gemm_xwt(hb(), T_, lat, H_, normed_.get(), H_, L.w_kv_a.get(), H_, kv_a, CUDA_R_16BF, lat);
        kernels::launch_norm(kv_a, lat, L.kv_a_norm.get(), nullptr, kv_a, lat, T_, kvl, 1, eps, false, s());
        kernels::launch_rope(kv_a, T_, 1, lat, lat, kvl, rope, tps_, rope_cs_.get(), s());
        kernels::launch_kv_append(kv_a, lat, L.k_cache.get(), lat, T_, tps_, cache_len_, pos_base_, s());
        if (mla_expand_) return mla_expand_kv(L);
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
    kernels::launch_rope(qkv_.get(), T_, Hq, qkv_width_, hd, 0, rot, tps_, rope_cs_.get(), s());
    kernels::launch_rope(qkv_.get() + Hq * hd, T_, Hkv, qkv_width_, hd, 0, rot, tps_, rope_cs_.get(), s());
    kernels::launch_kv_append(qkv_.get() + Hq * hd, qkv_width_, L.k_cache.get(), Hkv * hd, T_, tps_, cache_len_,
                              pos_base_, s());
    kernels::launch_kv_append(qkv_.get() + (Hq + Hkv) * hd, qkv_width_, L.v_cache.get(), Hkv * hd, T_, tps_, cache_len_,
                              pos_base_, s());
}

// Expanded MLA: every cached row's latent c_kv through kv_b into per-head k_nope and v (two head-batched GEMMs that
// share the latent operand, stride 0), and the rope key, shared by all heads, copied beside each head's k_nope.
// mla_kv_ row (sequence b, position p), head h: [k_nope (nope) | k_rope (rope) | v (v_head_dim)].
void CudaBackend::mla_expand_kv(const Layer& L) {
    const auto& a = m_.attn;
    const int64_t kvl = a.kv_lora_rank, lat = kvl + a.qk_rope_head_dim, Hq = a.num_heads, nope = a.qk_nope_head_dim;
    const int64_t vd = a.v_head_dim, qhd = qk_dim_mla(), row = qhd + vd, rows = shape_.batch * cache_len_;
    // W_kvb is [Hq * (nope + vd), kvl]: head h's W_UK = rows h*(nope+vd) .. +nope, its W_UV the next vd rows.
    gemm_batched(hb(), true, rows, nope, kvl, L.k_cache.get(), lat, 0, L.w_kv_b.get(), kvl, (nope + vd) * kvl,
                 mla_kv_.get(), Hq * row, row, Hq);
    gemm_batched(hb(), true, rows, vd, kvl, L.k_cache.get(), lat, 0, L.w_kv_b.get() + nope * kvl, kvl,
                 (nope + vd) * kvl, mla_kv_.get() + qhd, Hq * row, row, Hq);
    kernels::launch_copy_2d(L.k_cache.get() + kvl, lat, mla_kv_.get() + nope, Hq * row, rows, a.qk_rope_head_dim, s(),
                            Hq, row);
}

void CudaBackend::phase_attention(Layer& L) {
    const auto& a = m_.attn;
    kernels::AttentionArgs args = attention_args();
    // Local layers (as cpu_attention.cpp): a sliding window, or else Llama-4's chunked attention.
    if (L.sliding) {
        args.window = a.sliding_window;
        if (a.sliding_window == 0) args.local_chunk = a.attention_chunk;
    }
    args.sinks = a.sinks ? L.sinks.get() : nullptr;
    if (!mla_expand_) {  // the expanded form's k and v are the shared mla_kv_ (attention_args)
        args.k = L.k_cache.get();
        args.v = a.kind == AttentionKind::mla ? L.k_cache.get() : L.v_cache.get();
    }
    args.workspace_bytes = static_cast<int64_t>(attn_ws_f_.bytes());
    attn_kernel_ = kernels::attention_kernel_of(args);
    kernels::launch_attention(args, attn_ws_f_.get(), s());
    if (a.kind == AttentionKind::mla && !mla_expand_) {
        // v[t, h] = o_lat[t, h] . W_UV[h]^T (W_UV[h] = rows h*(nope+vd)+nope .. +vd of W_kvb, [vd, kvl]).
        const int64_t kvl = a.kv_lora_rank, Hq = a.num_heads, vd = a.v_head_dim, nope = a.qk_nope_head_dim;
        gemm_batched(hb(), true, T_, vd, kvl, attn_out_.get(), Hq * kvl, kvl, L.w_kv_b.get() + nope * kvl, kvl,
                     (nope + vd) * kvl, mla_v_.get(), Hq * vd, vd, Hq);
    }
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

}  // namespace moebench::cuda_detail
