// SPDX-License-Identifier: Apache-2.0
// Counted work of each phase of DESIGN.md for one layer at one step shape: FLOPs, weight bytes, activation bytes,
// and the bytes expert parallelism moves between ranks. Pure arithmetic ("counted"); the sim backend and the
// reports' roofline fields ("fraction of floor/peak") both read it. Conventions: docs/sim-backend.md.
#pragma once
#include "config/model_config.hpp"
#include "core/layout.hpp"
#include "core/phase.hpp"
#include "core/precision.hpp"
#include "core/step.hpp"
#include "model/placement.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace moebench {

/// Work of one phase of one layer (or of embed / final_norm / lm_head) for a whole step.
/// flops: 2 per multiply-add of matrix products (as in accounting.hpp; element-wise work is not counted).
/// weight_bytes: every weight the phase uses, read once per step (an expert with zero tokens reads nothing).
/// activation_bytes: activations and KV cache read and written, each tensor once (a fused, cache-friendly lower
/// bound); for dispatch_a2a / combine_a2a, the bytes that cross ranks.
struct PhaseWork {
    double flops = 0;
    double weight_bytes = 0;
    double activation_bytes = 0;
    double bytes() const { return weight_bytes + activation_bytes; }
};

/// How MLA attention is computed (GQA ignores it).
enum class MlaForm {
    latent_expand,   // non-absorbed, latent + rope key cached: k/v of cached tokens re-expanded through kv_b each step
    expanded_cache,  // non-absorbed, per-head k and v cached (the Hugging Face reference and the cpu backend)
    absorbed,        // weight-absorbed: attention over the latent cache, kv_b folded into q and the output (cuda)
};
const char* to_string(MlaForm f);

struct PhaseWorkOptions {
    MlaForm mla_form = MlaForm::latent_expand;
    /// Actual routing of this layer (ids -1 are dropped). When set, dispatch_a2a / combine_a2a count the exact
    /// cross-rank rows (a2a_traffic with the placement and mode below); otherwise they assume each expert's tokens
    /// come from the ranks in proportion to the tokens each rank holds, one row per assignment (no dedup).
    const LayerRouting* routing = nullptr;
    /// Where the experts live (null: contiguous blocks over ep_size ranks) and the dispatch mode (`dedup`: a token
    /// goes once to each rank holding any of its experts, and comes back once from it).
    const ExpertPlacement* placement = nullptr;
    bool a2a_dedup = false;
    /// Bytes of one dispatch row on the wire (dispatch_row_bytes below); 0: hidden x the activations' bytes. The
    /// combine always returns rows in the activation format.
    double dispatch_row_bytes = 0;
    /// The parallel layout (null: no tensor parallelism). With attn_tp > 1 the token-side phases that split over the
    /// attention TP group (qkv_proj, attention, o_proj, shared_expert, dense_mlp, embed, lm_head) count one GPU's
    /// share of the shape's tokens: FLOPs and weights / attn_tp, the activations the GPU holds whole (its input, the
    /// residual, the partial output it writes before the all-reduce) whole and the rest / attn_tp, the KV cache by
    /// its shard (GQA: ceil(kv_heads / attn_tp) of the KV heads; MLA's latent whole on every rank, as
    /// kv_shard_fraction and the memory plan count it); the phases it does not split (norms, router, top-k,
    /// permute, unpermute) count the shape's tokens whole, as each GPU of the group runs them. With moe_tp > 1 the
    /// routed experts' phases count one GPU's slice of each expert (its width / moe_tp). The collectives
    /// (attn_allreduce, moe_allgather, moe_allreduce, dense_allreduce) count the bytes every GPU sends, summed over
    /// the GPUs, with the shape as the whole step (ring_bytes_per_gpu).
    const Layout* layout = nullptr;
    /// Rows that cross ranks when known without ids (the sim's statistical routing path): dispatch_a2a /
    /// combine_a2a count these rows; -1: from `routing`, or the estimate.
    double cross_rank_rows = -1;
    /// expert_fetch: routed experts this layer fetched from host memory in the step (the expert cache's misses, and
    /// what a prefetching policy brought in ahead); each moves one expert's weights in the expert format over the
    /// host link. -1: not known (no cache replayed): no bytes counted.
    double fetched_experts = -1;
};

/// Bytes of one dispatched token row of `hidden` channels in `dispatch` (fp8 with its scales: core/dispatch_dtype.hpp;
/// payload only, no expert ids).
double dispatch_row_bytes(DType dispatch, int64_t hidden);

/// Work of `phase` of model layer `layer` (-1 for embed, final_norm, lm_head) at `shape`, summed over all ranks.
/// Decode attends to shape.context cached tokens; prefill is causal from an empty cache (context ignored).
/// tokens_per_expert: this layer's routed (token, expert) assignments per expert, after drops (size E, or empty for
/// dense layers and the once-per-step phases). Bytes per element from `precision`: the routed experts' weights in
/// its expert format, the other linear layers' in its dense format, embedding, LM head, norms and router in its high
/// precision, activations in its activation format and the KV cache in its own. Router logits, probabilities and
/// top-k weights are fp32, expert ids int32, whatever the formats.
/// ep_size: expert-parallel ranks; only dispatch_a2a / combine_a2a depend on it (zero work when ep_size == 1).
PhaseWork phase_work(const ModelConfig& m, Phase phase, int64_t layer, const StepShape& shape,
                     const std::vector<int64_t>& tokens_per_expert, const Precision& precision, int64_t ep_size,
                     const PhaseWorkOptions& opt = {});

/// What phase_work reads of a layer: whether it is MoE, whether its attention is linear, whether it attends to a local
/// window (sliding or chunked). Layers of one class have the same work in every phase for the same shape, tokens per
/// expert and options, so a caller may count it once per class (the sim's pricing, the roofline: a model's dozens of
/// alike layers). -1 for the once-per-step phases' layer -1. Keep in step with phase_work's uses of `layer`
/// (tests/cpu/test_phase_work.cpp compares the layers of every shipped model).
int64_t layer_work_class(const ModelConfig& m, int64_t layer);

/// Roofline floor of `w` in microseconds: max(flops / peak_flops, bytes / mem_bw). A rate <= 0 leaves its term out.
double phase_floor_us(const PhaseWork& w, double peak_flops, double mem_bw_bytes_per_s);

// ---------------------------------------------------------------------------------------------------------------
// Expert-parallel placement and all-to-all traffic.
// Experts are placed contiguously (expert e on rank e / (E / ep) where ep divides E) unless a placement says otherwise.
// Tokens live where their sequence's attention runs (data-parallel attention): sequence b on rank b * ep / batch
// (contiguous blocks, as even as the batch allows). A kept (token, expert) assignment whose expert is on another rank
// sends a row in dispatch_a2a and receives one back in combine_a2a: one per assignment, or with dedup one per (token,
// remote rank).
// ---------------------------------------------------------------------------------------------------------------

/// Rank holding expert `expert` (experts split contiguously over ep_size ranks: contiguous_placement's rule).
int64_t expert_rank(int64_t expert, int64_t num_experts, int64_t ep_size);
/// Rank holding token `token` (0 <= token < shape.num_tokens()).
int64_t token_home_rank(const StepShape& shape, int64_t token, int64_t ep_size);
/// Sequences (decode: tokens) held by `rank`.
int64_t sequences_on_rank(const StepShape& shape, int64_t rank, int64_t ep_size);
/// Tokens of the sequences held by `rank` (decode: one per sequence; prefill: seq_len each).
int64_t tokens_on_rank(const StepShape& shape, int64_t rank, int64_t ep_size);

/// Bytes each rank sends to each other rank in dispatch_a2a; combine_a2a is the transpose.
struct A2aTraffic {
    int64_t num_ranks = 1;
    std::vector<double> bytes;  // [src * num_ranks + dst]; the diagonal (rank-local rows) is always 0
    double at(int64_t src, int64_t dst) const { return bytes[static_cast<size_t>(src * num_ranks + dst)]; }
    double sent(int64_t rank) const;      // row sum
    double received(int64_t rank) const;  // column sum
    double total() const;                 // all bytes that cross ranks
};
A2aTraffic a2a_traffic(const ModelConfig& m, const StepShape& shape, const LayerRouting& routing, double act_elem_bytes,
                       int64_t ep_size);
/// The same with a placement (replicas chosen by ExpertPlacement::dest_rank, as the multi-process run does) and a
/// dispatch mode: `dedup` counts a token once per destination rank, else once per assignment; `row_bytes` each.
A2aTraffic a2a_traffic(const StepShape& shape, const LayerRouting& routing, double row_bytes,
                       const ExpertPlacement& placement, bool dedup);

/// The collectives of tensor parallelism, each as a ring over a group of GPUs.
enum class Collective { all_reduce, all_gather, reduce_scatter };
std::string_view to_string(Collective c);
/// Bytes one GPU sends (and receives) in a ring collective over `n` GPUs of a buffer of `buffer_bytes` (the whole
/// result each GPU holds: the summed tensor of an all-reduce, the gathered tensor of an all-gather, the input of a
/// reduce-scatter): all-reduce 2 (n - 1) / n x buffer (a reduce-scatter then an all-gather), all-gather and
/// reduce-scatter (n - 1) / n x buffer; 0 for n <= 1. NCCL's bus bandwidth is these bytes over the time.
double ring_bytes_per_gpu(Collective c, int64_t n, double buffer_bytes);

/// Per-layer pieces accounting.hpp does not expose (matrix elements only: no biases, norms or sinks).
int64_t qkv_matrix_elems(const ModelConfig& m, MlaForm form);  // absorbed MLA leaves kv_b out (it moves to attention)
int64_t o_proj_matrix_elems(const ModelConfig& m);
/// Multiply-adds per (query, attended key) pair over all heads; MLA absorbed attends over the latent + rope key.
int64_t attention_macs_per_pair(const ModelConfig& m, MlaForm form);
/// KV-cache elements per cached token of one layer in `form` (GQA and latent forms equal
/// kv_elems_per_token_per_layer; expanded_cache holds every head's k and v).
int64_t cache_elems_per_token(const ModelConfig& m, MlaForm form);

}  // namespace moebench
