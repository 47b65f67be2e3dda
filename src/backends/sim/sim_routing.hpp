// SPDX-License-Identifier: Apache-2.0
// What the sim prices of one MoE layer's routing, per rank, from either routing path (harness/routing_path.hpp):
// counted from every token's ids (per token), or drawn from the workload's shares in O(experts + ranks) whatever the
// number of tokens (statistical; docs/sim-backend.md, "Routing path").
#pragma once
#include "backends/sim/sim_backend.hpp"
#include "workload/routing_statistics.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

namespace moebench {

/// Binomial setups by (n, p), made once: the layers of a run draw the same laws again and again (every layer of a
/// uniform routing has the same).
class BinomialSetups {
public:
    const BinomialDraw& of(int64_t n, double p);

private:
    std::map<std::pair<int64_t, double>, BinomialDraw> by_law_;
};

// What one rank sends or receives over one kind of link: Binomial(n, p), or (sums of dependent indicators) a normal
// of the given mean and variance, rounded and clamped to [0, hi].
struct RowsLaw {
    bool binomial = true;
    int64_t n = 0;
    double p = 0, mean = 0, var = 0, hi = 0;
    bool operator==(const RowsLaw& o) const {
        return binomial == o.binomial && n == o.n && p == o.p && mean == o.mean && var == o.var && hi == o.hi;
    }
    bool empty() const { return binomial ? n <= 0 || p <= 0 : hi <= 0 || mean <= 0; }
    /// The largest of `count` draws.
    double max_of(int64_t count, sampling::Rng& rng, BinomialSetups& setups) const;
};

/// One MoE layer of one step, per rank.
struct SimLayerRouting {
    std::vector<int64_t> home_rows;   // [rank]: kept assignments of the rank's tokens
    std::vector<int64_t> slot_rows;   // each rank's expert slots, rank after rank: assignments each computes
    std::vector<int64_t> rank_first;  // [rank + 1]: rank q's slots are [rank_first[q], rank_first[q + 1])
    /// The slots of rank q as a vector (what phase_work reads).
    std::vector<int64_t> rank_rows(int64_t q) const {
        return {slot_rows.begin() + rank_first[static_cast<size_t>(q)],
                slot_rows.begin() + rank_first[static_cast<size_t>(q) + 1]};
    }
    /// Empty ranks (a dense layer).
    void no_slots(int64_t ranks) {
        slot_rows.clear();
        rank_first.assign(static_cast<size_t>(ranks) + 1, 0);
    }
    std::vector<int64_t> tokens_per_expert;  // [E] after drops
    A2aLinkBytes dispatch_rows;              // the dispatch's rows per rank and link (combine: transposed)
    double cross_rank_rows = 0;              // dispatch rows that cross ranks (the combine returns them)
};

/// The statistical path's draws for one prepared step: the shares' setups made once, then one draw per MoE layer from
/// its own stream (seed, layer), so that a layer's draw depends on nothing but the seed, the layer and the step shape.
///
/// Per layer: tokens per expert by ExpertCountDraw (exact marginals, sum T k); each rank's assignments from them
/// (experts held once: the path is not taken with replicas); home_rows = the rank's tokens x k (no drops: not taken
/// with a capacity factor). The dispatch, with tokens spread over the ranks as the sequences are:
/// - dedup (a token once per rank holding any of its experts): a token reaches rank q with probability
///   h_q = 1 - P(no pick on q) (GroupMissProbability), independently of the other tokens, so the rows q receives from
///   n other tokens are Binomial(n, h_q) (exact marginal), split by the sender's node; the rows a rank sends to the
///   ranks of a kind (same node, other nodes) sum its tokens' hits there: mean tokens x sum h, variance tokens x
///   (sum h (1 - h) + the pairs' covariance of two misses, c m_q m_q' with c from the uniform closed forms at E / ep
///   experts per rank: exact for uniform shares), drawn as the binomial of that mean and variance;
/// - per-expert (a row per assignment): the assignments to q's experts come from the ranks in proportion to their
///   tokens: q keeps Binomial(R_q, T_q / T) of its R_q, the rest split by node; a rank sends Binomial(sum R, T_r / T)
///   to each kind.
/// Only the largest value of each kind over the ranks sets the time (sim_a2a_us), so ranks alike (the same n and p)
/// are drawn at once as the maximum of their count (BinomialDraw::max_of): A2aLinkBytes then holds one entry per
/// such class, not per rank. cross_rank_rows (the roofline's counted bytes) is the expected total given the counts.
class SimStatisticalRouting {
public:
    /// `shares_by_rank` empty: uniform (the sim's own router). The layout's attention replicas hold the tokens (home
    /// rows), its expert-parallel ranks the experts; the dispatch is drawn under an all-to-all exchange (dp = ep).
    SimStatisticalRouting(const ModelConfig& model, const StepShape& shape, const Layout& layout, int64_t gpus_per_node,
                          std::vector<double> shares_by_rank, uint64_t seed);
    /// Layer `layer`'s draw under its placement (one copy of each expert); `perm` empty: the identity.
    SimLayerRouting draw(int64_t layer, const std::vector<int32_t>& perm, const ExpertPlacement& placement) const;

private:
    int64_t E_, k_, ep_, dp_, node_;
    bool a2a_, dedup_;
    uint64_t seed_;
    StepShape shape_;
    std::vector<int64_t> tokens_;       // [rank]
    std::vector<int64_t> node_tokens_;  // [rank]: tokens of the rank's node
    int64_t total_tokens_ = 0;
    std::unique_ptr<ExpertCountDraw> counts_;
    std::unique_ptr<GroupMissProbability> miss_;
    mutable BinomialSetups setups_;  // the rows' laws, shared by the layers
    // The dispatch's laws of the last miss probabilities: classes of alike ranks per kind, and the expected rows.
    struct DispatchLaws {
        std::vector<double> miss;
        std::vector<std::pair<RowsLaw, int64_t>> intra_out, intra_in, inter_out, inter_in;
        double cross_rank_rows = 0;
    };
    mutable DispatchLaws laws_;
    SimLayerRouting draw_dispatch(sampling::Rng& rng, SimLayerRouting& out) const;
    double miss_covariance_ = 0;  // c of cov(miss q, miss q') = c m_q m_q' (dedup sends)
};

}  // namespace moebench
