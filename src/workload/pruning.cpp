// SPDX-License-Identifier: Apache-2.0
#include "workload/pruning.hpp"

#include "common/error.hpp"
#include "common/flag_names.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace moebench {

int64_t ExpertPruning::kept(int64_t layer) const {
    if (layer < 0 || layer >= static_cast<int64_t>(keep.size())) return 0;
    const auto& k = keep[static_cast<size_t>(layer)];
    return std::count(k.begin(), k.end(), static_cast<unsigned char>(1));
}

ExpertPruning prune_experts(const Workload& workload, const ModelConfig& model, const std::vector<int64_t>& layers,
                            double below, const std::string& field) {
    ExpertPruning p;
    p.below = below;
    p.shares.resize(static_cast<size_t>(model.num_layers));
    p.keep.resize(static_cast<size_t>(model.num_layers));
    const std::string spec = workload.spec();
    p.shares_from = spec.rfind("trace:", 0) == 0
                        ? "the trace's counts of each layer over all its tokens (counted)"
                        : "the workload's expected share of each expert (" + spec + ": its popularity, as defined)";
    const int64_t E = model.moe.num_experts, K = model.moe.top_k;
    // Each layer's shares first: a refusal names the largest fraction every layer run can take.
    double bound = 1.0;
    for (int64_t l : layers) {
        if (!model.is_moe_layer(l)) continue;
        std::vector<double> share = workload.expected_load(l);
        if (static_cast<int64_t>(share.size()) != E)
            config_error(field,
                         fmt::format("drops the experts below a share of the routing, and {} {} gives no "
                                     "share before the run (the model's router decides)",
                                     flag_of("routing"), spec),
                         fmt::format("{:g}", below),
                         fmt::format("use a trace ({} trace:FILE, e.g. the model's own routing recorded with trace "
                                     "convert) or a synthetic workload, or drop {}",
                                     flag_of("routing"), flag_of("prune_below")));
        const double total = std::accumulate(share.begin(), share.end(), 0.0);
        if (total > 0)
            for (double& s : share) s /= total;
        std::vector<double> sorted = share;
        std::sort(sorted.begin(), sorted.end(), std::greater<>());
        bound = std::min(bound, sorted[static_cast<size_t>(K - 1)]);
        p.shares[static_cast<size_t>(l)] = std::move(share);
    }
    for (int64_t l : layers) {
        const std::vector<double>& share = p.shares[static_cast<size_t>(l)];
        if (share.empty()) continue;
        std::vector<unsigned char> keep(static_cast<size_t>(E), 0);
        for (int64_t e = 0; e < E; ++e) keep[static_cast<size_t>(e)] = share[static_cast<size_t>(e)] >= below ? 1 : 0;
        const int64_t kept = std::count(keep.begin(), keep.end(), static_cast<unsigned char>(1));
        if (kept < K)
            config_error(field, fmt::format("would keep {} experts of layer {}, fewer than its top-{}", kept, l, K),
                         fmt::format("{:g}", below),
                         fmt::format("use at most {:g} (the smallest {}th largest share of the layers run)", bound, K));
        p.keep[static_cast<size_t>(l)] = std::move(keep);
    }
    return p;
}

namespace {

class PrunedWorkload : public Workload {
public:
    PrunedWorkload(std::unique_ptr<Workload> inner, const ExpertPruning& pruning)
        : inner_(std::move(inner)), p_(pruning) {
        // Per layer the kept experts, most used first (ties: lower id): the substitutes in order.
        order_.resize(p_.keep.size());
        for (size_t l = 0; l < p_.keep.size(); ++l) {
            auto& o = order_[l];
            for (size_t e = 0; e < p_.keep[l].size(); ++e)
                if (p_.keep[l][e]) o.push_back(static_cast<int32_t>(e));
            std::stable_sort(o.begin(), o.end(), [&](int32_t a, int32_t b) {
                return p_.shares[l][static_cast<size_t>(a)] > p_.shares[l][static_cast<size_t>(b)];
            });
        }
    }
    std::string spec() const override { return inner_->spec(); }
    std::string describe() const override {
        return inner_->describe() + fmt::format(", experts below {:g} of the routing pruned", p_.below);
    }
    bool overrides_routing() const override { return inner_->overrides_routing(); }
    void check_layers(const std::vector<int64_t>& layers) const override { inner_->check_layers(layers); }
    std::optional<StepRouting> next_step(int64_t num_tokens, const std::vector<int64_t>& layers) override {
        std::optional<StepRouting> r = inner_->next_step(num_tokens, layers);
        position_ = inner_->position();
        if (!r) return r;
        for (size_t slot = 0; slot < layers.size() && slot < r->per_layer.size(); ++slot) {
            const auto l = static_cast<size_t>(layers[slot]);
            if (l >= p_.keep.size() || p_.keep[l].empty()) continue;
            LayerRouting& lr = r->per_layer[slot];
            for (int64_t t = 0; t < lr.num_tokens; ++t) {
                int32_t* row = lr.ids.data() + t * lr.k;
                for (int64_t j = 0; j < lr.k; ++j) {
                    if (row[j] < 0 || p_.keep[l][static_cast<size_t>(row[j])]) continue;
                    for (int32_t sub : order_[l])
                        if (std::find(row, row + lr.k, sub) == row + lr.k) {
                            row[j] = sub;  // its weight stays with the slot
                            break;
                        }
                }
            }
        }
        return r;
    }
    void interleave_sequences(int64_t batch) override { inner_->interleave_sequences(batch); }
    std::string token_order(bool decode) const override { return inner_->token_order(decode); }
    std::vector<double> expected_load(int64_t layer) const override { return inner_->expected_load(layer); }
    // independent_shares / popularity_permutation stay empty: the pruned stream is no longer the spec's, so the
    // statistical routing path (which draws from them) does not model it.
    void seek(int64_t position) override {
        inner_->seek(position);
        position_ = inner_->position();
    }

private:
    std::unique_ptr<Workload> inner_;
    ExpertPruning p_;
    std::vector<std::vector<int32_t>> order_;
};

}  // namespace

std::unique_ptr<Workload> pruned_workload(std::unique_ptr<Workload> inner, const ExpertPruning& pruning) {
    return std::make_unique<PrunedWorkload>(std::move(inner), pruning);
}

}  // namespace moebench
