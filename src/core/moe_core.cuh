// SPDX-License-Identifier: Apache-2.0
// The per-row and per-element semantics shared by the CPU backend (g++) and the CUDA kernels (nvcc): tie-break,
// top-k, each family's routing, soft top-N, capacity drops, permutation maps, activations and the weight RNG.
#pragma once
#include "core/hd.hpp"

#include <math.h>
#include <stdint.h>

// Rules (style.md 2.3): inline, allocation-free, exception-free; scalars or raw pointers + extents; C math only.
// Callers own the parallel decomposition; these functions define what one row (or one element) must produce.

namespace moebench {
namespace core {

// ---------------------------------------------------------------------------------------------------------------
// Tie-break rule, stated once: the higher score wins; on equal scores the lower expert id wins. A NaN score ranks
// as -inf, so the order stays strict and total (a warp's argmax and the host's insertion then agree on NaN rows).
// ---------------------------------------------------------------------------------------------------------------
MOEBENCH_HD inline bool topk_better(float a, int ia, float b, int ib) {
    if (a != a) a = -INFINITY;
    if (b != b) b = -INFINITY;
    return a > b || (a == b && ia < ib);
}

/// Inserts (score, id) into best_scores/best_ids, kept sorted best-first by topk_better; `count` is the number
/// held so far (<= k) and is updated. A candidate worse than all k held ones is ignored.
MOEBENCH_HD inline void topk_insert(float score, int id, float* best_scores, int* best_ids, int k, int* count) {
    int n = *count;
    if (n == k) {
        if (!topk_better(score, id, best_scores[k - 1], best_ids[k - 1])) return;
        n = k - 1;  // the last one falls out
    }
    int pos = n;
    while (pos > 0 && topk_better(score, id, best_scores[pos - 1], best_ids[pos - 1])) {
        best_scores[pos] = best_scores[pos - 1];
        best_ids[pos] = best_ids[pos - 1];
        --pos;
    }
    best_scores[pos] = score;
    best_ids[pos] = id;
    *count = n + 1;
}

/// Top-k of scores[0..n) (k <= n), best first. Entries with keep != nullptr && !keep[i] are skipped.
MOEBENCH_HD inline int topk_row(const float* scores, int n, int k, const unsigned char* keep, float* out_scores,
                                int* out_ids) {
    int count = 0;
    for (int i = 0; i < n; ++i) {
        if (keep && !keep[i]) continue;
        topk_insert(scores[i], i, out_scores, out_ids, k, &count);
    }
    return count;
}

MOEBENCH_HD inline float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }

/// Numerically stable softmax of in[0..n) into out (may alias in).
MOEBENCH_HD inline void softmax_row(const float* in, int n, float* out) {
    float mx = in[0];
    for (int i = 1; i < n; ++i) mx = fmaxf(mx, in[i]);
    float sum = 0.0f;
    for (int i = 0; i < n; ++i) {
        out[i] = expf(in[i] - mx);
        sum += out[i];
    }
    const float inv = 1.0f / sum;
    for (int i = 0; i < n; ++i) out[i] *= inv;
}

// ---------------------------------------------------------------------------------------------------------------
// Routing of one token row. Values equal the int values of moebench::RoutingKind (config/model_config.hpp);
// the CPU backend static_asserts that they match.
// ---------------------------------------------------------------------------------------------------------------
enum RouteKind : int {
    kRouteSoftmaxTopk = 0,         // Qwen2/3-MoE, OLMoE, DBRX, DeepSeekMoE
    kRouteTopkSoftmax = 1,         // Mixtral, gpt-oss (router bias already in the logits)
    kRouteSigmoidGroupTopk = 2,    // DeepSeek-V3, Kimi-K2
    kRouteSoftmaxGroupGreedy = 3,  // DeepSeek-V2
    kRouteTopkSigmoid = 4,         // Llama-4
    kRouteSparsemixer = 5,         // PhiMoE (top-2 only)
};

struct RouteParams {
    int kind = kRouteSoftmaxTopk;
    int num_experts = 0;
    int top_k = 0;
    int norm_topk_prob = 0;
    float routed_scaling_factor = 1.0f;
    int num_groups = 1;
    int topk_groups = 1;
    float jitter_eps = 0.01f;  // sparsemixer's router_jitter_noise: the relative band of logits each softmax keeps
};

/// Floats of scratch route_row needs: scores, choice scores, group scores (+ a byte mask stored in floats), and the
/// logits with pruned experts' rows removed.
MOEBENCH_HD inline int route_scratch_floats(int num_experts, int num_groups) {
    return 2 * num_experts + 2 * num_groups + num_experts + num_experts;
}

/// Llama-4 multiplies the expert INPUT by the router weight (routed_in = x * score) instead of the output;
/// with a non-linear expert the two differ, so the backend must know.
MOEBENCH_HD inline bool route_scales_input(int kind) { return kind == kRouteTopkSigmoid; }

/// Chooses `num_groups`' best `topk_groups` groups by group_scores and marks the experts of the others as not kept.
MOEBENCH_HD inline void group_mask(const float* group_scores, int num_groups, int topk_groups, int group_size,
                                   float* gscratch_scores, int* gscratch_ids, unsigned char* keep) {
    const int got = topk_row(group_scores, num_groups, topk_groups, nullptr, gscratch_scores, gscratch_ids);
    for (int g = 0; g < num_groups; ++g) {
        unsigned char chosen = 0;
        for (int j = 0; j < got; ++j) chosen |= (gscratch_ids[j] == g);
        for (int i = 0; i < group_size; ++i) keep[g * group_size + i] = chosen;
    }
}

/// One logit's term in PhiMoE's sparsemixer denominator for the expert with logit m: exp(l - m) when l lies within the
/// relative band (m - l) / max(|l|, m) <= 2 eps, else 0. As the reference, a NaN band test (0 / 0) keeps the logit.
MOEBENCH_HD inline float sparsemixer_term(float logit, float m, float eps) {
    const float factor = fmaxf(fabsf(logit), m);
    if ((m - logit) / factor > 2.0f * eps) return 0.0f;
    return expf(logit - m);
}

/// PhiMoE's sparsemixer weight of expert `sel` (score m = its logit, the best not `skip`): a softmax evaluated at
/// `sel` over only the logits within the band (sparsemixer_term), `skip` left out.
MOEBENCH_HD inline float sparsemixer_weight(const float* logits, int n, int sel, int skip, float eps) {
    const float m = logits[sel];
    float sum = 0.0f;
    for (int i = 0; i < n; ++i) {
        if (i == skip) continue;
        sum += sparsemixer_term(logits[i], m, eps);
    }
    return 1.0f / sum;
}

// route_row in three parts, so that a parallel router (one warp per token in kernels/moe.cu) runs the same
// semantics: (1) per-expert arrays: the selection key and the un-biased score; (2) the group mask (group-limited
// families); (3) after top-k of the key: the weights, once per row.

/// Which per-expert array the top-k selects on.
enum RouteKey : int { kKeyLogits = 0, kKeyScores = 1, kKeyChoice = 2 };
MOEBENCH_HD inline int route_key(int kind, bool has_correction) {
    switch (kind) {
        case kRouteTopkSoftmax:
        case kRouteTopkSigmoid:
        case kRouteSparsemixer: return kKeyLogits;
        case kRouteSigmoidGroupTopk: return kKeyChoice;
        case kRouteSoftmaxGroupGreedy: return kKeyScores;
        default: return has_correction ? kKeyChoice : kKeyScores;
    }
}
/// Whether the family's un-biased score is a softmax over all experts (else a per-expert sigmoid, or unused).
MOEBENCH_HD inline bool route_softmax_scores(int kind) {
    return kind == kRouteSoftmaxGroupGreedy || (kind != kRouteTopkSoftmax && kind != kRouteTopkSigmoid &&
                                                kind != kRouteSparsemixer && kind != kRouteSigmoidGroupTopk);
}
/// Whether the family limits the top-k to its best groups (and how a group scores: the top-2 sum of the choice
/// key for DeepSeek-V3, the max score for DeepSeek-V2).
MOEBENCH_HD inline bool route_grouped(const RouteParams& p) {
    return (p.kind == kRouteSigmoidGroupTopk || p.kind == kRouteSoftmaxGroupGreedy) && p.num_groups > 1 &&
           p.topk_groups < p.num_groups;
}
/// Score of group g (group_size experts from g * group_size) over the selection key.
MOEBENCH_HD inline float route_group_score(int kind, const float* key, int g, int group_size) {
    const float* v = key + g * group_size;
    if (kind == kRouteSigmoidGroupTopk) {
        float b2[2];
        int i2[2];
        const int n2 = topk_row(v, group_size, group_size >= 2 ? 2 : 1, nullptr, b2, i2);
        return n2 == 2 ? b2[0] + b2[1] : b2[0];
    }
    float mx = v[0];
    for (int i = 1; i < group_size; ++i) mx = fmaxf(mx, v[i]);
    return mx;
}

/// The weights of the chosen experts (part 3). On entry weights[j] holds the key value of ids[j]; scores is the
/// un-biased per-expert score (softmax or sigmoid; unused by the logit-keyed families); logits the raw row.
MOEBENCH_HD inline void route_weights(const RouteParams& p, const float* logits, const float* scores, const int* ids,
                                      float* weights) {
    const int E = p.num_experts, K = p.top_k;
    switch (p.kind) {
        case kRouteTopkSoftmax: softmax_row(weights, K, weights); break;  // softmax over the k chosen logits
        case kRouteTopkSigmoid:
            for (int j = 0; j < K; ++j) weights[j] = sigmoidf_(weights[j]);
            break;
        case kRouteSparsemixer:
            weights[0] = sparsemixer_weight(logits, E, ids[0], -1, p.jitter_eps);
            weights[1] = sparsemixer_weight(logits, E, ids[1], ids[0], p.jitter_eps);
            break;
        case kRouteSigmoidGroupTopk: {
            // Weights are the un-biased sigmoid of the chosen; renormalise (+1e-20, as HF) if norm_topk_prob; scale.
            float sum = 0.0f;
            for (int j = 0; j < K; ++j) {
                weights[j] = scores[ids[j]];
                sum += weights[j];
            }
            const float norm = p.norm_topk_prob ? 1.0f / (sum + 1e-20f) : 1.0f;
            for (int j = 0; j < K; ++j) weights[j] = weights[j] * norm * p.routed_scaling_factor;
            break;
        }
        case kRouteSoftmaxGroupGreedy: {
            // As the reference: if top_k > 1 and norm_topk_prob, w /= (sum + 1e-20); otherwise w *=
            // routed_scaling_factor.
            if (K > 1 && p.norm_topk_prob) {
                float sum = 0.0f;
                for (int j = 0; j < K; ++j) sum += weights[j];
                for (int j = 0; j < K; ++j) weights[j] /= (sum + 1e-20f);
            } else {
                for (int j = 0; j < K; ++j) weights[j] *= p.routed_scaling_factor;
            }
            break;
        }
        case kRouteSoftmaxTopk:
        default: {
            // The weight is the probability (ERNIE selects on probability + correction bias, weighs by the
            // probability); renormalise if norm_topk_prob (HF: w /= w.sum(), no epsilon), then routed_scaling_factor.
            for (int j = 0; j < K; ++j) weights[j] = scores[ids[j]];
            if (p.norm_topk_prob) {
                float sum = 0.0f;
                for (int j = 0; j < K; ++j) sum += weights[j];
                for (int j = 0; j < K; ++j) weights[j] /= sum;
            }
            for (int j = 0; j < K; ++j) weights[j] *= p.routed_scaling_factor;
            break;
        }
    }
}

/// One row of the family's routing: logits[E] -> ids[k], weights[k] (best first). correction_bias[E] may be null
/// (DeepSeek-V3's e_score_correction_bias: added for selection only). scratch: route_scratch_floats() floats.
/// Families: Qwen/OLMoE/DBRX/DeepSeekMoE softmax -> top-k; ERNIE the same with a correction bias on the selection;
/// Mixtral / gpt-oss top-k of logits -> softmax over k; Llama-4 top-k -> sigmoid; PhiMoE sparsemixer (top-2);
/// DeepSeek-V3 (reference inference/model.py Gate) sigmoid + bias, group score = top-2 sum, topk_groups groups;
/// DeepSeek-V2 (modeling_deepseek.py MoEGate, group_limited_greedy) softmax, group score = max.
/// Pruning: expert_keep[E] (nullptr = every expert) marks the experts kept. A pruned expert is as if its router row
/// were deleted: its logit is -inf (so a softmax over the experts renormalises over the kept ones, and a sigmoid gives
/// it 0), it never enters a group's score or the top-k (a token takes its next-best kept expert), and the chosen
/// weights are then normalised as the family does (over the kept top-k where it renormalises). The host keeps at least
/// top_k experts; should the chosen groups hold fewer than k kept experts, the top-k is taken over every kept expert.
MOEBENCH_HD inline void route_row(const RouteParams& p, const float* logits, const float* correction_bias,
                                  float* scratch, int* ids, float* weights,
                                  const unsigned char* expert_keep = nullptr) {
    const int E = p.num_experts, G = p.num_groups > 0 ? p.num_groups : 1;
    float* scores = scratch;                                           // [E]
    float* choice = scratch + E;                                       // [E]
    float* gscores = scratch + 2 * E;                                  // [G]
    float* gsel = gscores + G;                                         // [G]
    unsigned char* keep = reinterpret_cast<unsigned char*>(gsel + G);  // [E] bytes
    float* kept_logits = gsel + G + E;  // [E]: the logits with pruned rows at -inf (pruning only)
    int gids[64];                       // topk_groups <= 64 (checked by the host; real models have <= 8 groups)
    const int key_kind = route_key(p.kind, correction_bias != nullptr);
    if (expert_keep) {
        for (int i = 0; i < E; ++i) kept_logits[i] = expert_keep[i] ? logits[i] : -INFINITY;
        logits = kept_logits;
    }
    // (1) per-expert arrays.
    if (route_softmax_scores(p.kind)) {
        softmax_row(logits, E, scores);
    } else if (p.kind == kRouteSigmoidGroupTopk) {
        for (int i = 0; i < E; ++i) scores[i] = sigmoidf_(logits[i]);
    }
    if (key_kind == kKeyChoice)
        for (int i = 0; i < E; ++i)
            choice[i] =
                expert_keep && !expert_keep[i] ? -INFINITY : scores[i] + (correction_bias ? correction_bias[i] : 0.0f);
    const float* key = key_kind == kKeyLogits ? logits : (key_kind == kKeyScores ? scores : choice);
    // (2) group mask.
    const unsigned char* mask = nullptr;
    if (route_grouped(p)) {
        const int group_size = E / G;
        for (int g = 0; g < G; ++g) gscores[g] = route_group_score(p.kind, key, g, group_size);
        group_mask(gscores, G, p.topk_groups, group_size, gsel, gids, keep);
        if (expert_keep)
            for (int i = 0; i < E; ++i) keep[i] = keep[i] && expert_keep[i];
        mask = keep;
    } else if (expert_keep) {
        mask = expert_keep;
    }
    // (3) top-k of the key, then the weights.
    const int k_sel = p.kind == kRouteSparsemixer ? 2 : p.top_k;
    if (topk_row(key, E, k_sel, mask, weights, ids) < k_sel && expert_keep)
        topk_row(key, E, k_sel, expert_keep, weights, ids);  // the chosen groups hold too few kept experts
    route_weights(p, logits, scores, ids, weights);
}

/// Soft top-N (the seeds' option): softmax over all E experts, keep the N most probable, renormalise over the N.
/// scratch: E floats.
/// Soft top-N's weights once the N are chosen (weights[j] = their probabilities): renormalised over the N.
MOEBENCH_HD inline void soft_topn_weights(float* weights, int n) {
    float sum = 0.0f;
    for (int j = 0; j < n; ++j) sum += weights[j];
    for (int j = 0; j < n; ++j) weights[j] /= sum;
}

MOEBENCH_HD inline void soft_topn_row(const float* logits, int num_experts, int n, float* scratch, int* ids,
                                      float* weights) {
    softmax_row(logits, num_experts, scratch);
    topk_row(scratch, num_experts, n, nullptr, weights, ids);
    soft_topn_weights(weights, n);
}

// ---------------------------------------------------------------------------------------------------------------
// Capacity and permutation.
// ---------------------------------------------------------------------------------------------------------------
/// capacity = ceil(capacity_factor * T * k / E) per expert; capacity_factor <= 0 means dropless (returns -1).
MOEBENCH_HD inline int64_t expert_capacity(double capacity_factor, int64_t num_tokens, int k, int num_experts) {
    if (capacity_factor <= 0.0) return -1;
    // Round the product before ceil so that e.g. 1.0 * 16 / 8 stays exactly 2 under any FP contraction.
    const double c = capacity_factor * static_cast<double>(num_tokens) * k / num_experts;
    // An expert never receives more than every assignment of the step: capping there keeps a huge factor from
    // overflowing the cast (undefined behaviour) and changes nothing else.
    const double all = static_cast<double>(num_tokens) * k;
    if (!(c < all)) return static_cast<int64_t>(all);
    const double r = floor(c * 1e9 + 0.5) / 1e9;
    return static_cast<int64_t>(ceil(r));
}

/// Drops assignments beyond `capacity` in arrival order (token order, then slot order): their id becomes -1 and
/// their weight 0. counts[E] receives the kept tokens per expert. Returns the number dropped. capacity < 0: none.
/// ids already -1 (e.g. from an override) are skipped and not counted as drops.
MOEBENCH_HD inline int64_t apply_capacity(int32_t* ids, float* weights, int64_t num_tokens, int k, int num_experts,
                                          int64_t capacity, int64_t* counts) {
    for (int e = 0; e < num_experts; ++e) counts[e] = 0;
    int64_t dropped = 0;
    for (int64_t a = 0; a < num_tokens * k; ++a) {
        const int e = ids[a];
        if (e < 0) continue;
        if (capacity >= 0 && counts[e] >= capacity) {
            ids[a] = -1;
            weights[a] = 0.0f;
            ++dropped;
        } else {
            ++counts[e];
        }
    }
    return dropped;
}

/// Exclusive prefix sum: offsets[0] = 0, offsets[e+1] = offsets[e] + counts[e] (offsets has E+1 entries).
MOEBENCH_HD inline void exclusive_offsets(const int64_t* counts, int num_experts, int64_t* offsets) {
    offsets[0] = 0;
    for (int e = 0; e < num_experts; ++e) offsets[e + 1] = offsets[e] + counts[e];
}

/// Stable permutation: rows grouped by expert, ascending (token, slot) within an expert.
/// slot_of[t*k+j] = row in the permuted buffer (-1 when dropped); token_of_row[row] = t.
/// cursor: E int64 of scratch.
MOEBENCH_HD inline void permutation_map(const int32_t* ids, int64_t num_tokens, int k, int num_experts,
                                        const int64_t* offsets, int64_t* cursor, int64_t* slot_of,
                                        int32_t* token_of_row) {
    for (int e = 0; e < num_experts; ++e) cursor[e] = offsets[e];
    for (int64_t a = 0; a < num_tokens * k; ++a) {
        const int e = ids[a];
        if (e < 0) {
            slot_of[a] = -1;
            continue;
        }
        const int64_t row = cursor[e]++;
        slot_of[a] = row;
        token_of_row[row] = static_cast<int32_t>(a / k);
    }
}

/// The same row as permutation_map computes, for one assignment (parallel form: O(a) scan).
MOEBENCH_HD inline int64_t permuted_row(const int32_t* ids, int64_t a, const int64_t* offsets) {
    const int e = ids[a];
    if (e < 0) return -1;
    int64_t before = 0;
    for (int64_t b = 0; b < a; ++b) before += (ids[b] == e);
    return offsets[e] + before;
}

// ---------------------------------------------------------------------------------------------------------------
// Activations (elementwise).
// ---------------------------------------------------------------------------------------------------------------
MOEBENCH_HD inline float silu(float x) { return x / (1.0f + expf(-x)); }
/// GELU, tanh approximation (jax.nn.gelu default, as Grok-1 uses): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
MOEBENCH_HD inline float gelu_tanh(float x) {
    const float c = 0.7978845608028654f;  // sqrt(2/pi)
    return 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x)));
}
MOEBENCH_HD inline float swiglu(float gate, float up) { return silu(gate) * up; }
MOEBENCH_HD inline float geglu(float gate, float up) { return gelu_tanh(gate) * up; }
/// gpt-oss: gate clamped to <= limit, up to [-limit, limit]; gate * sigmoid(alpha * gate) * (up + 1).
MOEBENCH_HD inline float swiglu_oai(float gate, float up, float limit, float alpha) {
    gate = fminf(gate, limit);
    up = fminf(fmaxf(up, -limit), limit);
    return gate * sigmoidf_(alpha * gate) * (up + 1.0f);
}
inline constexpr float kSwigluOaiLimit = 7.0f;
inline constexpr float kSwigluOaiAlpha = 1.702f;

/// Activation selector; values equal moebench::Activation (swiglu, geglu, swiglu_oai).
enum ActKind : int { kActSwiglu = 0, kActGeglu = 1, kActSwigluOai = 2 };
MOEBENCH_HD inline float activate(int kind, float gate, float up, float limit) {
    if (kind == kActGeglu) return geglu(gate, up);
    if (kind == kActSwigluOai) return swiglu_oai(gate, up, limit, kSwigluOaiAlpha);
    return swiglu(gate, up);
}

// ---------------------------------------------------------------------------------------------------------------
// Weights from the seed: a counter-based RNG, so any element of any tensor can be generated alone (CPU threads or
// CUDA threads) and both backends hold identical weights for --check.
// ---------------------------------------------------------------------------------------------------------------
MOEBENCH_HD inline uint64_t mix64(uint64_t z) {  // splitmix64 finaliser
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/// Tensor identities; a tensor's stream is weight_stream(layer, id) (layer -1 for model-level tensors).
enum WeightId : uint32_t {
    kWEmbed = 1,
    kWLmHead,
    kWFinalNorm,
    kWFinalNormBias,
    kWTokenIds,
    kWAttnNorm = 16,
    kWAttnNormBias,
    kWFfnNorm,
    kWFfnNormBias,
    kWPostAttnNorm,
    kWPostFfnNorm,
    kWQ = 32,
    kWK,
    kWV,
    kWO,
    kWQBias,
    kWKBias,
    kWVBias,
    kWOBias,
    kWQNorm,
    kWKNorm,
    kWSinks,
    kWQA,
    kWQANorm,
    kWQB,
    kWKVA,
    kWKVANorm,
    kWKVB,
    kWKCache,
    kWVCache,
    kWQGate,
    kWLinIn,
    kWLinConv,
    kWLinDtBias,
    kWLinALog,
    kWLinNorm,
    kWLinState,
    kWLinConvState,
    kWRouter = 64,
    kWRouterBias,
    kWCorrectionBias,
    kWGate,
    kWUp,
    kWDown,
    kWBGate,
    kWBUp,
    kWBDown,
    kWSharedGate,
    kWSharedUp,
    kWSharedDown,
    kWSharedGateWeight,
    kWDenseGate = 96,
    kWDenseUp,
    kWDenseDown,
};

MOEBENCH_HD inline uint64_t weight_stream(int64_t layer, uint32_t id) {
    return (static_cast<uint64_t>(layer + 1) << 16) | id;
}

/// Base of a tensor's sequence; element i is uniform_pm1(base, i).
MOEBENCH_HD inline uint64_t rng_base(uint64_t seed, uint64_t stream) { return mix64(mix64(seed) ^ stream); }

/// Uniform in [-1, 1) from 24 random bits (exactly representable in fp32 and bf16-friendly).
MOEBENCH_HD inline float uniform_pm1(uint64_t base, uint64_t index) {
    const uint64_t h = mix64(base + index * 0xD1B54A32D192ED03ull);
    return static_cast<float>(static_cast<int32_t>(h >> 40)) * (1.0f / 8388608.0f) - 1.0f;
}

/// Half-width of the uniform for a linear layer with `fan_in` inputs: variance 1/fan_in keeps activations O(1).
MOEBENCH_HD inline float linear_init_scale(int64_t fan_in) { return sqrtf(3.0f / static_cast<float>(fan_in)); }

}  // namespace core
}  // namespace moebench
