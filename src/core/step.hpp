// SPDX-License-Identifier: Apache-2.0
// Shapes and options of one forward step, its plan entries and times, and the routing handed between workload,
// backend and metrics.
#pragma once
#include "core/layout.hpp"
#include "core/phase.hpp"
#include "core/precision.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace moebench {

enum class Mode { decode, prefill };
const char* to_string(Mode m);

/// decode: `batch` tokens, each attending to a KV cache of `context` tokens.
/// prefill: `batch` sequences of `seq_len` tokens, causal.
struct StepShape {
    Mode mode = Mode::decode;
    int64_t batch = 1;
    int64_t seq_len = 1;
    int64_t context = 0;
    int64_t num_tokens() const { return mode == Mode::decode ? batch : batch * seq_len; }
};

/// Options a backend needs beyond the model and shape.
struct RunOptions {
    uint64_t seed = 0;
    double capacity_factor = 0.0;  // 0 = dropless; else capacity = ceil(cf * T * k / E) per expert
    int64_t soft_topn = 0;         // 0 = the family's top-k; N = weighted mix of the N most probable experts
    int64_t num_threads = 0;       // cpu: 0 = all cores
    /// The parallel layout and the number formats of the run, resolved (config/layout_request.hpp,
    /// config/precision_request.hpp; the harness fills them before prepare()).
    Layout layout;
    Precision precision;
    std::string expert_gemm = "auto";       // cuda: auto | gemv | tiled | grouped | loop; cpu: auto | panel | blas
    std::string attention_kernel = "auto";  // cuda: auto | split | flash | latent
    bool cuda_graph = false;
    bool cold_l2 = false;
    bool expert_times = false;        // cuda: per-expert GEMM times (events inside the step; loop variant)
    bool routing_statistics = false;  // the harness chose the statistical routing path: set_routing_statistics
                                      // follows prepare() (harness/routing_path.hpp)
    bool per_layer_detail = true;     // run field record "full": describe() may list per-layer tables
};

/// Routing of one layer: row-major [num_tokens, k] expert ids and combine weights.
struct LayerRouting {
    int64_t num_tokens = 0;
    int64_t k = 0;
    std::vector<int32_t> ids;
    std::vector<float> weights;
};

/// Routing for every layer slot of a step (slot = index into the layers being run). Dense slots have k == 0.
struct StepRouting {
    std::vector<LayerRouting> per_layer;
};

/// One rank's share of one MoE layer's all-to-alls in the last step (expert parallelism over processes): its row
/// of the [src][dst] byte matrices, counted from the rows it sent, and the measured time of the exchanges alone.
struct RankTraffic {
    std::vector<double> dispatch_payload_bytes;  // [dst rank]: token rows sent (in the dispatch dtype, scales included)
    std::vector<double> dispatch_meta_bytes;     // [dst rank]: expert ids (and weights, dedup) beside the rows
    std::vector<double> combine_payload_bytes;   // [dst rank]: expert outputs sent back to the tokens' ranks
    std::vector<int64_t> dispatch_rows;          // [dst rank]: rows sent
    int64_t rows_received = 0;                   // dispatch rows that arrived here
    int64_t expert_rows = 0;                     // (row, expert) products the experts of this rank computed
    // Measured. Each exchange starts with a barrier: the wait there is the ranks' skew (a straggler's cost), the
    // time after it the transport alone (what bench a2a compares with bare MPI_Alltoallv).
    double dispatch_wait_us = 0;      // barrier before the dispatch
    double dispatch_exchange_us = 0;  // the dispatch's count exchange + all-to-all-v
    double combine_wait_us = 0;       // barrier before the combine
    double combine_exchange_us = 0;   // the combine's all-to-all-v
};

/// What a backend observed in one MoE layer of the last step: for metrics, --check and --dump-tensors.
struct MoeLayerResult {
    LayerRouting routing;  // final selection after override, soft top-N and capacity (dropped ids are -1)
    std::vector<int64_t> tokens_per_expert;  // after drops
    int64_t dropped = 0;                     // (token, expert) assignments dropped by capacity
    std::vector<float> router_logits;        // [T, E] as computed by the router GEMM (before any override)
    std::vector<double> expert_gemm_us;      // per expert, measured; empty when the backend cannot split it
    RankTraffic traffic;                     // expert parallelism over processes only (empty otherwise)
    /// Rows that crossed ranks in each all-to-all (dispatch; combine returns them) of a step without ids: the sim's
    /// statistical routing path draws them with tokens_per_expert. -1: count them from routing.ids.
    double a2a_rows = -1;
};

/// One entry of a step: `layer` is the model layer index (-1 for embed, final_norm, lm_head), `slot` indexes the
/// layers handed to Backend::prepare (-1 for the once-per-step phases).
struct PhaseEntry {
    Phase phase;
    int64_t layer;
    int64_t slot;
};

/// Times of one step: phase_us[i] belongs to plan[i]; wall_us is the host steady_clock time around the whole step
/// (begin_step .. end_step), shown beside the sum of the phases so overhead and overlap are visible.
struct StepTimes {
    std::vector<double> phase_us;
    double wall_us = 0;
    double start_us = 0;  // host steady_clock at the step's start (processes on one host share this clock)
};

}  // namespace moebench
