// SPDX-License-Identifier: Apache-2.0
// Counted FLOPs and bytes of each phase of one layer at one step shape, and the all-to-all traffic of expert
// parallelism. Parameter counts come from accounting.hpp; only the per-phase split of them lives here.
#include "model/phase_work.hpp"

#include "common/error.hpp"
#include "core/dispatch_dtype.hpp"
#include "model/accounting.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

namespace moebench {
namespace {

constexpr double kF32 = 4.0;  // router logits/probabilities, top-k weights
constexpr double kI32 = 4.0;  // expert ids, token ids

double d(int64_t v) { return static_cast<double>(v); }

bool is_mla(const ModelConfig& m) { return m.attn.kind == AttentionKind::mla; }
int64_t qk_dim(const ModelConfig& m) { return m.attn.q_head_dim(); }
int64_t v_dim(const ModelConfig& m) { return is_mla(m) ? m.attn.v_head_dim : m.attn.head_dim; }

// kv_b_proj of MLA: latent -> per-head [k_nope | v].
int64_t kv_b_elems(const ModelConfig& m) {
    const AttentionConfig& a = m.attn;
    return a.kv_lora_rank * a.num_heads * (a.qk_nope_head_dim + a.v_head_dim);
}

// Weights of one norm (accounting counts norms_per_layer of them per layer).
int64_t one_norm_elems(const ModelConfig& m) {
    return m.norms_per_layer > 0 ? norm_params_per_layer(m) / m.norms_per_layer : 0;
}

// Attention parameters that are neither matrices, o_proj's bias nor sinks: q/k/v biases, q/k norms, latent norms.
int64_t qkv_extra_elems(const ModelConfig& m) {
    int64_t matrices = qkv_matrix_elems(m, MlaForm::latent_expand) + o_proj_matrix_elems(m);
    return attention_params_per_layer(m) - matrices - (m.attn.o_bias ? m.hidden_size : 0) -
           (m.attn.sinks ? m.attn.num_heads : 0);
}

// Keys visible to a query at absolute position `pos` of `layer`: [first_key, pos], the same mask as the backends
// (sliding window: the last `window` positions; chunked: the query's own chunk).
int64_t first_key(const ModelConfig& m, int64_t layer, int64_t pos) {
    bool local = layer >= 0 && layer < static_cast<int64_t>(m.layer_sliding.size()) &&
                 m.layer_sliding[static_cast<size_t>(layer)] != 0;
    if (!local) return 0;
    if (m.attn.sliding_window > 0) return std::max<int64_t>(0, pos - m.attn.sliding_window + 1);
    if (m.attn.attention_chunk > 0) return (pos / m.attn.attention_chunk) * m.attn.attention_chunk;
    return 0;
}

int64_t new_tokens_per_sequence(const StepShape& s) { return s.mode == Mode::decode ? 1 : s.seq_len; }

int64_t total_assignments(const std::vector<int64_t>& tpe) {
    return std::accumulate(tpe.begin(), tpe.end(), int64_t{0});
}

PhaseWork norm_work(const ModelConfig& m, double T, double w, double a) {
    return {0.0, d(one_norm_elems(m)) * w, 2.0 * T * d(m.hidden_size) * a};
}

// Under attention tensor parallelism (tp > 1) one GPU's share: its heads (FLOPs, the sinks and kv_b weights, q and
// output rows / tp) and its shard of the KV cache (GQA: kv_shard_fraction; MLA's latent whole on every rank, its
// expanded per-head cache / tp); the indexer of DeepSeek-V3.2 reads its key cache whole on every rank.
PhaseWork attention_work(const ModelConfig& m, int64_t layer, const StepShape& s, double w, double a, double kv,
                         MlaForm form, int64_t tp) {
    const AttentionConfig& at = m.attn;
    const double T = d(s.num_tokens()), B = d(s.batch), nh = d(at.num_heads);
    // Prefill starts from an empty cache (the cpu and cuda backends ignore `context` there).
    const int64_t L0 = s.mode == Mode::decode ? s.context : 0, S = new_tokens_per_sequence(s);
    // (query, key) pairs of one sequence, and the cached keys it reads (those the earliest new query can see).
    // DeepSeek-V3.2: its indexer scores every visible key (Ih heads x Id per pair), attention reads the top-k.
    const int64_t topk = at.indexer_topk > 0 ? at.indexer_topk : std::numeric_limits<int64_t>::max();
    int64_t pairs = 0, scored = 0;
    for (int64_t i = 0; i < S; ++i) {
        const int64_t visible = (L0 + i) - first_key(m, layer, L0 + i) + 1;
        pairs += std::min(visible, topk);
        scored += visible;
    }
    const int64_t cached_all = L0 > 0 ? L0 - first_key(m, layer, L0) : 0, cached = std::min(cached_all, topk);

    const double per_head = 1.0 / d(std::max<int64_t>(tp, 1));
    // The share of the KV (new rows and the cache) one rank holds: per-head forms split with the heads.
    const bool latent = is_mla(m) && form != MlaForm::expanded_cache;
    const double kv_share = latent ? 1.0 : is_mla(m) ? per_head : kv_shard_fraction(m, tp);
    PhaseWork w_out;
    w_out.flops = 2.0 * B * d(pairs) * d(attention_macs_per_pair(m, form)) * per_head;
    w_out.weight_bytes = at.sinks ? nh * w * per_head : 0.0;
    // New keys/values as qkv_proj left them: GQA k and v; MLA non-absorbed per-head k and v; absorbed the latent row.
    double new_kv_elems = d(kv_elems_per_token_per_layer(m));
    double new_kv_share = kv_share;
    if (is_mla(m) && form != MlaForm::absorbed) new_kv_elems = nh * d(qk_dim(m) + v_dim(m)), new_kv_share = per_head;
    w_out.activation_bytes = (T * nh * d(qk_dim(m)) * per_head   // q
                              + T * new_kv_elems * new_kv_share  // k, v of the new tokens
                              + T * nh * d(v_dim(m)) * per_head) *
                                 a                                                                 // output
                             + B * d(cached) * d(cache_elems_per_token(m, form)) * kv * kv_share;  // the KV cache
    if (at.indexer_heads > 0) {  // the indexer's scores, and its key cache read whole
        w_out.flops += 2.0 * B * d(scored) * d(at.indexer_heads * at.indexer_head_dim) * per_head;
        w_out.activation_bytes += B * d(cached_all) * d(at.indexer_head_dim) * kv;
    }
    if (is_mla(m) && form == MlaForm::absorbed) {
        // q_nope x W_UK into the latent space, and W_UV on the latent output: per new token, kv_b's weights once.
        w_out.flops += 2.0 * T * d(kv_b_elems(m)) * per_head;
        w_out.weight_bytes += d(kv_b_elems(m)) * w * per_head;
    }
    if (is_mla(m) && form == MlaForm::latent_expand && cached > 0) {
        // Cached latents re-expanded through kv_b into per-head k_nope and v, written and read once.
        const double expanded = B * d(cached) * nh * d(at.qk_nope_head_dim + at.v_head_dim);
        w_out.flops += 2.0 * B * d(cached) * d(kv_b_elems(m)) * per_head;
        w_out.weight_bytes += d(kv_b_elems(m)) * w * per_head;
        w_out.activation_bytes += 2.0 * expanded * a * per_head;
    }
    return w_out;
}

// Linear attention (hybrid layers). qkv_proj: the input projections (gated DeltaNet: q|k|v|z|b|a; lightning:
// q|k|v|gate); linear_attention: the causal conv, the recurrence on each sequence's state and the gated norm;
// o_proj: out_proj. Decode reads and writes every sequence's state once; prefill keeps it on chip (chunked).
PhaseWork linear_qkv_work(const ModelConfig& m, const StepShape& s, double w, double a) {
    const double T = d(s.num_tokens()), H = d(m.hidden_size), in = d(m.linear_attn.in_proj_width());
    return {2.0 * T * H * in, H * in * w, T * (H + in) * a};
}

PhaseWork linear_attention_work(const ModelConfig& m, const StepShape& s, double w, double a) {
    const LinearAttentionConfig& la = m.linear_attn;
    const double T = d(s.num_tokens()), B = d(s.batch), v = d(la.num_value_heads * la.value_head_dim);
    PhaseWork r;
    r.flops = 2.0 * T * d(linear_state_macs_per_token(m));
    // The small weights: conv, dt_bias, A_log and the norm (the projections belong to qkv_proj and o_proj).
    r.weight_bytes = d(linear_attention_params_per_layer(m) - la.in_proj_width() * m.hidden_size -
                       la.num_value_heads * la.value_head_dim * m.hidden_size) *
                     w;
    // Projections in, output out; decode: every sequence's fp32 state (and conv window) read and written.
    r.activation_bytes = T * (d(la.in_proj_width()) + v) * a;
    if (s.mode == Mode::decode) r.activation_bytes += 2.0 * B * d(la.state_elems()) * kLinearStateBytesPerElem;
    return r;
}

PhaseWork qkv_work(const ModelConfig& m, const StepShape& s, double w, double a, MlaForm form) {
    const AttentionConfig& at = m.attn;
    const double T = d(s.num_tokens()), H = d(m.hidden_size), nh = d(at.num_heads);
    const int64_t mat = qkv_matrix_elems(m, form);
    PhaseWork r;
    r.flops = 2.0 * T * d(mat);
    r.weight_bytes = d(mat + qkv_extra_elems(m)) * w;
    if (!is_mla(m)) {
        r.activation_bytes =
            T * (H + d((at.num_heads * (at.output_gate ? 2 : 1) + 2 * at.num_kv_heads) * at.head_dim)) * a;
        return r;
    }
    // MLA: x in; q (through the q_lora bottleneck when present); the latent row [c_kv | k_rope] written, c_kv read
    // back normalised; non-absorbed forms also write the per-head [k_nope | v] from kv_b.
    const double C = d(at.kv_lora_rank), R = d(at.qk_rope_head_dim), ql = d(at.q_lora_rank);
    double elems = T * H + 2.0 * T * ql + T * nh * d(qk_dim(m)) + T * (C + R) + T * C;
    if (form != MlaForm::absorbed) elems += T * nh * d(at.qk_nope_head_dim + at.v_head_dim);
    r.activation_bytes = elems * a;
    return r;
}

// Gated FFN of width I on `rows` tokens, split into the three expert phases (or whole for dense / shared).
PhaseWork ffn_up(double rows, double H, double I, double w, double a) {
    return {2.0 * rows * 2.0 * I * H, 2.0 * I * H * w, (rows * H + rows * 2.0 * I) * a};
}
PhaseWork ffn_act(double rows, double I, double a) { return {0.0, 0.0, (rows * 2.0 * I + rows * I) * a}; }
PhaseWork ffn_down(double rows, double H, double I, double w, double a) {
    return {2.0 * rows * I * H, I * H * w, (rows * I + rows * H) * a};
}
PhaseWork add(PhaseWork x, const PhaseWork& y) {
    x.flops += y.flops;
    x.weight_bytes += y.weight_bytes;
    x.activation_bytes += y.activation_bytes;
    return x;
}

// moe_tp > 1: one GPU's slice of each expert (width I / moe_tp), on every row routed to the expert.
PhaseWork routed_expert_phase(const ModelConfig& m, Phase phase, const std::vector<int64_t>& tpe, double w, double a,
                              int64_t moe_tp) {
    const double H = d(m.hidden_size), I = d(m.moe.expert_intermediate_size) / d(std::max<int64_t>(moe_tp, 1));
    PhaseWork r;
    for (int64_t n : tpe) {
        if (n <= 0) continue;  // an expert without tokens reads no weights
        const double rows = d(n);
        if (phase == Phase::expert_up) {
            r = add(r, ffn_up(rows, H, I, w, a));
            if (m.moe.expert_bias) r.weight_bytes += 2.0 * I * w;
        } else if (phase == Phase::activation) {
            r = add(r, ffn_act(rows, I, a));
        } else {
            r = add(r, ffn_down(rows, H, I, w, a));
            if (m.moe.expert_bias) r.weight_bytes += H * w;
        }
    }
    return r;
}

// One GPU's share of a phase split over a tensor-parallel group of `tp`: FLOPs and weights / tp, the activations
// every GPU of the group holds whole (`whole_act_bytes`: its input, the residual, a partial output before the
// all-reduce) unchanged and the rest / tp.
PhaseWork tp_share(PhaseWork w, int64_t tp, double whole_act_bytes) {
    if (tp <= 1) return w;
    const double n = d(tp);
    w.flops /= n;
    w.weight_bytes /= n;
    w.activation_bytes = std::max(0.0, w.activation_bytes - whole_act_bytes) / n + whole_act_bytes;
    return w;
}

// Expected cross-rank rows without the ids: expert e's tokens come from each rank in proportion to its tokens.
double expected_cross_rows(const ModelConfig& m, const StepShape& s, const std::vector<int64_t>& tpe, int64_t ep) {
    const double T = d(s.num_tokens());
    if (T <= 0) return 0.0;
    const int64_t per_token = new_tokens_per_sequence(s);
    double rows = 0;
    for (size_t e = 0; e < tpe.size(); ++e) {
        const int64_t q = expert_rank(static_cast<int64_t>(e), m.moe.num_experts, ep);
        const double local = d(sequences_on_rank(s, q, ep) * per_token) / T;
        rows += d(tpe[e]) * (1.0 - local);
    }
    return rows;
}

}  // namespace

const char* to_string(MlaForm f) {
    switch (f) {
        case MlaForm::latent_expand: return "latent_expand";
        case MlaForm::expanded_cache: return "expanded_cache";
        case MlaForm::absorbed: return "absorbed";
    }
    return "?";
}

int64_t qkv_matrix_elems(const ModelConfig& m, MlaForm form) {
    const AttentionConfig& a = m.attn;
    const int64_t H = m.hidden_size;
    if (!is_mla(m))  // q (+ Qwen3-Next's per-head output gate), k, v
        return H * a.num_heads * a.head_dim * (a.output_gate ? 2 : 1) + 2 * H * a.num_kv_heads * a.head_dim;
    const int64_t qh = a.q_head_dim();
    int64_t q = a.q_lora_rank > 0 ? H * a.q_lora_rank + a.q_lora_rank * a.num_heads * qh : H * a.num_heads * qh;
    int64_t n = q + H * (a.kv_lora_rank + a.qk_rope_head_dim);
    if (a.indexer_heads > 0)  // DeepSeek-V3.2's indexer projections: wq_b, wk, weights_proj
        n += a.q_lora_rank * a.indexer_heads * a.indexer_head_dim + H * a.indexer_head_dim + H * a.indexer_heads;
    if (form != MlaForm::absorbed) n += kv_b_elems(m);
    return n;
}

int64_t o_proj_matrix_elems(const ModelConfig& m) { return m.attn.num_heads * v_dim(m) * m.hidden_size; }

int64_t attention_macs_per_pair(const ModelConfig& m, MlaForm form) {
    const AttentionConfig& a = m.attn;
    if (is_mla(m) && form == MlaForm::absorbed) return a.num_heads * (2 * a.kv_lora_rank + a.qk_rope_head_dim);
    return a.num_heads * (qk_dim(m) + v_dim(m));
}

int64_t cache_elems_per_token(const ModelConfig& m, MlaForm form) {
    if (is_mla(m) && form == MlaForm::expanded_cache) return m.attn.num_heads * (qk_dim(m) + v_dim(m));
    return kv_elems_per_token_per_layer(m);
}

namespace {

// The collectives of tensor parallelism for the whole step: every GPU's ring bytes, summed over the GPUs (the TP
// groups' buffers are their replicas' tokens, which sum to the step's: the sum is linear in them).
PhaseWork collective_work(const ModelConfig& m, Phase phase, const StepShape& shape, const Precision& prec,
                          const PhaseWorkOptions& opt) {
    if (!opt.layout) return {};
    const Layout& L = *opt.layout;
    const double T = d(shape.num_tokens()), H = d(m.hidden_size), a = prec.act_bytes();
    const double n = d(L.num_gpus()), tp = d(L.attn_tp);
    const bool gather = L.moe_exchange() == MoeExchange::gather;
    switch (phase) {
        case Phase::attn_allreduce:
        case Phase::dense_allreduce:
            return {0.0, 0.0, tp * ring_bytes_per_gpu(Collective::all_reduce, L.attn_tp, T * H * a)};
        case Phase::moe_allgather: {
            if (!gather || L.attn_dp <= 1) return {};
            const double row = opt.dispatch_row_bytes > 0 ? opt.dispatch_row_bytes : H * a;
            return {0.0, 0.0, n * ring_bytes_per_gpu(Collective::all_gather, L.num_gpus(), T * row)};
        }
        case Phase::moe_allreduce: {
            if (!gather) return {};
            if (L.attn_dp == 1)
                return {0.0, 0.0, n * ring_bytes_per_gpu(Collective::all_reduce, L.num_gpus(), T * H * a)};
            return {0.0, 0.0,
                    n * ring_bytes_per_gpu(Collective::reduce_scatter, L.num_gpus(), T * H * a) +
                        tp * ring_bytes_per_gpu(Collective::all_gather, L.attn_tp, T * H * a)};
        }
        default: break;
    }
    MOEBENCH_CHECK(false, "collective_work: {} is no collective", phase_name(phase));
    return {};
}

}  // namespace

PhaseWork phase_work(const ModelConfig& m, Phase phase, int64_t layer, const StepShape& shape,
                     const std::vector<int64_t>& tpe, const Precision& prec, int64_t ep_size,
                     const PhaseWorkOptions& opt) {
    MOEBENCH_CHECK(ep_size >= 1, "phase_work: ep_size {} < 1", ep_size);
    const int64_t tp = opt.layout ? opt.layout->attn_tp : 1, moe_tp = opt.layout ? opt.layout->moe_tp : 1;
    const double T = d(shape.num_tokens()), H = d(m.hidden_size), V = d(m.vocab_size), E = d(m.moe.num_experts);
    const double k = d(m.moe.top_k), A = d(total_assignments(tpe));
    // Bytes per element of each tensor class: the linear layers' weights (dense, or the routed experts'), the layers
    // kept in high precision (embedding, LM head, norms, router), activations, and the KV cache.
    const double w = prec.dense_weight_bytes(), we = prec.expert_weight_bytes(), hp = prec.high_precision_bytes();
    const double a = prec.act_bytes(), kv = prec.kv_bytes();
    switch (phase) {
        case Phase::embed:
            // One table row per token (a repeated token id is not deduplicated: the ids are not known here); under TP
            // each GPU holds V / tp rows and writes every token's row (zeros where another GPU holds it).
            return tp_share({0.0, std::min(T, V) * H * hp, T * kI32 + T * H * a}, tp, T * kI32 + T * H * a);
        case Phase::attn_norm:
        case Phase::ffn_norm:
        case Phase::final_norm: return norm_work(m, T, hp, a);
        case Phase::qkv_proj:  // the input rows read whole by every GPU of a TP group
            if (m.is_linear_attention_layer(layer)) return tp_share(linear_qkv_work(m, shape, w, a), tp, T * H * a);
            return tp_share(qkv_work(m, shape, w, a, opt.mla_form), tp, T * H * a);
        case Phase::attention: return attention_work(m, layer, shape, w, a, kv, opt.mla_form, tp);
        case Phase::linear_attention: return tp_share(linear_attention_work(m, shape, w, a), tp, 0.0);  // heads split
        case Phase::o_proj: {
            // Attention output in (split over TP); the residual read and written back whole (a partial sum under TP).
            if (m.is_linear_attention_layer(layer)) {
                const double in = d(m.linear_attn.num_value_heads * m.linear_attn.value_head_dim);
                return tp_share({2.0 * T * in * H, in * H * w, (T * in + 2.0 * T * H) * a}, tp, 2.0 * T * H * a);
            }
            const double in = d(m.attn.num_heads * v_dim(m));
            PhaseWork r{2.0 * T * d(o_proj_matrix_elems(m)), d(o_proj_matrix_elems(m)) * w,
                        (T * in + 2.0 * T * H) * a};  // attention output in; residual read, written back
            if (m.attn.o_bias) r.weight_bytes += H * w;
            if (m.norms_per_layer > 2) r.weight_bytes += d(one_norm_elems(m)) * w;  // post-attention norm (Grok-1)
            return tp_share(r, tp, 2.0 * T * H * a);
        }
        case Phase::router_gemm: {
            // The gate matrix (and its bias); the selection bias of DeepSeek-V3's router is read by topk, not here.
            const double correction = m.moe.router_correction_bias ? E : 0.0;
            return {2.0 * T * H * E, (d(router_params_per_layer(m)) - correction) * hp, T * H * a + T * E * kF32};
        }
        case Phase::topk: {
            PhaseWork r{0.0, 0.0, T * E * kF32 + T * k * (kI32 + kF32)};
            if (m.moe.router_correction_bias) r.weight_bytes = E * hp;
            return r;
        }
        case Phase::permute:
            // Hidden rows and ids in; one copy of the row per kept assignment out.
            return {0.0, 0.0, T * H * a + T * k * kI32 + A * H * a};
        case Phase::dispatch_a2a:
        case Phase::combine_a2a: {
            if (ep_size == 1 || (opt.layout && opt.layout->moe_exchange() != MoeExchange::all_to_all)) return {};
            const double row_bytes =
                phase == Phase::dispatch_a2a && opt.dispatch_row_bytes > 0 ? opt.dispatch_row_bytes : H * a;
            if (opt.cross_rank_rows >= 0) return {0.0, 0.0, opt.cross_rank_rows * row_bytes};
            if (!opt.routing) return {0.0, 0.0, expected_cross_rows(m, shape, tpe, ep_size) * row_bytes};
            if (opt.placement)
                return {0.0, 0.0, a2a_traffic(shape, *opt.routing, row_bytes, *opt.placement, opt.a2a_dedup).total()};
            return {0.0, 0.0,
                    a2a_traffic(shape, *opt.routing, row_bytes, contiguous_placement(m.moe.num_experts, ep_size),
                                opt.a2a_dedup)
                        .total()};
        }
        case Phase::expert_fetch:
            // The fetched experts' weights over the host link (a transfer: no FLOPs, no device weight reads).
            return {0.0, 0.0, std::max(0.0, opt.fetched_experts) * d(routed_expert_params(m)) * we};
        case Phase::expert_up:
        case Phase::activation:
        case Phase::expert_down: return routed_expert_phase(m, phase, tpe, we, a, moe_tp);
        case Phase::shared_expert: {
            const double SI = d(m.moe.num_shared_experts * m.moe.shared_intermediate_size);
            if (SI <= 0) return {};
            // shared_expert_params counts the gated FFNs and the optional Linear(H, 1) gate: all matrices.
            PhaseWork r = add(add(ffn_up(T, H, SI, 0, a), ffn_act(T, SI, a)), ffn_down(T, H, SI, 0, a));
            r.weight_bytes = d(shared_expert_params(m)) * w;
            r.flops = 2.0 * T * d(shared_expert_params(m));
            return tp_share(r, tp,
                            2.0 * T * H * a);  // split over the attention TP group: input and partial output whole
        }
        case Phase::unpermute_reduce: {
            // Expert rows and their weights in; the residual (plus the shared output when present) read, result
            // written.
            const double shared_in = m.moe.num_shared_experts > 0 ? T * H * a : 0.0;
            PhaseWork r{0.0, 0.0, A * H * a + A * kF32 + shared_in + 2.0 * T * H * a};
            if (m.norms_per_layer > 2) r.weight_bytes = d(one_norm_elems(m)) * hp;  // post-FFN norm (Grok-1)
            return r;
        }
        case Phase::dense_mlp: {
            const double I = d(m.dense_intermediate_size);
            PhaseWork r = add(add(ffn_up(T, H, I, w, a), ffn_act(T, I, a)), ffn_down(T, H, I, w, a));
            r.weight_bytes = d(dense_mlp_params_per_layer(m)) * w;
            r.activation_bytes += T * H * a;  // residual read (the write is ffn_down's output)
            if (m.norms_per_layer > 2) r.weight_bytes += d(one_norm_elems(m)) * w;
            return tp_share(r, tp, 3.0 * T * H * a);  // under TP: input, residual and partial output whole
        }
        case Phase::lm_head: {
            // Prefill computes logits for the last token of each sequence only.
            const double rows = shape.mode == Mode::decode ? T : d(shape.batch);
            double params = V * H + (m.lm_head_bias ? V : 0.0);
            return tp_share({2.0 * rows * V * H, params * hp, rows * H * a + rows * V * a}, tp,
                            rows * H * a);  // V / tp
        }
        case Phase::attn_allreduce:
        case Phase::moe_allgather:
        case Phase::moe_allreduce:
        case Phase::dense_allreduce: return collective_work(m, phase, shape, prec, opt);
        case Phase::count_: break;
    }
    MOEBENCH_CHECK(false, "phase_work: invalid phase {}", static_cast<int>(phase));
}

int64_t layer_work_class(const ModelConfig& m, int64_t layer) {
    if (layer < 0 || layer >= m.num_layers) return -1;
    const bool local =
        layer < static_cast<int64_t>(m.layer_sliding.size()) && m.layer_sliding[static_cast<size_t>(layer)] != 0;
    return (m.is_moe_layer(layer) ? 1 : 0) | (m.is_linear_attention_layer(layer) ? 2 : 0) | (local ? 4 : 0);
}

double phase_floor_us(const PhaseWork& w, double peak_flops, double mem_bw_bytes_per_s) {
    double compute_s = peak_flops > 0 ? w.flops / peak_flops : 0.0;
    double memory_s = mem_bw_bytes_per_s > 0 ? w.bytes() / mem_bw_bytes_per_s : 0.0;
    return std::max(compute_s, memory_s) * 1e6;
}

int64_t expert_rank(int64_t expert, int64_t num_experts, int64_t ep_size) {
    return contiguous_rank(expert, num_experts, ep_size);
}

int64_t token_home_rank(const StepShape& shape, int64_t token, int64_t ep_size) {
    const int64_t seq = token / new_tokens_per_sequence(shape);
    return seq * ep_size / shape.batch;
}

int64_t sequences_on_rank(const StepShape& shape, int64_t rank, int64_t ep_size) {
    // Sequence b is on rank floor(b * ep / B): rank r holds b in [ceil(r B / ep), ceil((r + 1) B / ep)).
    auto first = [&](int64_t r) { return (r * shape.batch + ep_size - 1) / ep_size; };
    return first(rank + 1) - first(rank);
}

int64_t tokens_on_rank(const StepShape& shape, int64_t rank, int64_t ep_size) {
    return sequences_on_rank(shape, rank, ep_size) * new_tokens_per_sequence(shape);
}

std::string_view to_string(Collective c) {
    switch (c) {
        case Collective::all_reduce: return "all-reduce";
        case Collective::all_gather: return "all-gather";
        case Collective::reduce_scatter: return "reduce-scatter";
    }
    return "?";
}

double ring_bytes_per_gpu(Collective c, int64_t n, double buffer_bytes) {
    if (n <= 1) return 0.0;
    const double share = d(n - 1) / d(n);
    return (c == Collective::all_reduce ? 2.0 : 1.0) * share * buffer_bytes;
}

double A2aTraffic::sent(int64_t rank) const {
    double s = 0;
    for (int64_t dst = 0; dst < num_ranks; ++dst) s += at(rank, dst);
    return s;
}
double A2aTraffic::received(int64_t rank) const {
    double s = 0;
    for (int64_t src = 0; src < num_ranks; ++src) s += at(src, rank);
    return s;
}
double A2aTraffic::total() const { return std::accumulate(bytes.begin(), bytes.end(), 0.0); }

double dispatch_row_bytes(DType dispatch, int64_t hidden) {
    if (const auto wire = core::dispatch_wire(dispatch)) return d(core::dispatch_row_bytes(*wire, hidden));
    return d(hidden) * dtype_info(dispatch).bytes_per_elem();
}

A2aTraffic a2a_traffic(const ModelConfig& m, const StepShape& shape, const LayerRouting& routing, double act_elem_bytes,
                       int64_t ep_size) {
    return a2a_traffic(shape, routing, d(m.hidden_size) * act_elem_bytes,
                       contiguous_placement(m.moe.num_experts, ep_size), false);
}

A2aTraffic a2a_traffic(const StepShape& shape, const LayerRouting& routing, double row_bytes,
                       const ExpertPlacement& placement, bool dedup) {
    MOEBENCH_CHECK(routing.num_tokens == shape.num_tokens(), "a2a_traffic: routing has {} tokens, shape {}",
                   routing.num_tokens, shape.num_tokens());
    const int64_t N = placement.num_ranks;
    A2aTraffic t;
    t.num_ranks = N;
    t.bytes.assign(static_cast<size_t>(N * N), 0.0);
    std::vector<char> sent(static_cast<size_t>(N));
    for (int64_t tok = 0; tok < routing.num_tokens; ++tok) {
        const int64_t src = token_home_rank(shape, tok, N);
        std::fill(sent.begin(), sent.end(), 0);
        for (int64_t j = 0; j < routing.k; ++j) {
            const int32_t e = routing.ids[static_cast<size_t>(tok * routing.k + j)];
            if (e < 0) continue;  // dropped
            const int64_t dst = placement.dest_rank(e, src, tok);
            if (dst == src || (dedup && sent[static_cast<size_t>(dst)])) continue;
            sent[static_cast<size_t>(dst)] = 1;
            t.bytes[static_cast<size_t>(src * N + dst)] += row_bytes;
        }
    }
    return t;
}

}  // namespace moebench
