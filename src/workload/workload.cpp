// SPDX-License-Identifier: Apache-2.0
// Workload generators: router (no override), uniform, balanced, zipf, hot, imbalance, domains, trace replay.
// Every layer gets its own seeded permutation of the popularity ranking, so hot experts differ across layers.
#include "workload/workload.hpp"

#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "workload/sampling.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace moebench {

using sampling::Rng;
using sampling::stream_key;

std::vector<int64_t> moe_ordinals(const ModelConfig& model) {
    std::vector<int64_t> ord(static_cast<size_t>(model.num_layers), -1);
    int64_t next = 0;
    for (int64_t l = 0; l < model.num_layers; ++l) {
        if (model.is_moe_layer(l)) ord[static_cast<size_t>(l)] = next++;
    }
    return ord;
}

void Workload::check_layers(const std::vector<int64_t>& layers) const { (void)layers; }

namespace {

/// Shared plumbing: the model's shape, layer checks, per-token weights.
class ModelWorkload : public Workload {
public:
    ModelWorkload(const RoutingSpec& spec, const ModelConfig& model, uint64_t seed)
        : spec_(spec),
          seed_(seed),
          num_experts_(model.moe.num_experts),
          top_k_(model.moe.top_k),
          num_layers_(model.num_layers),
          ordinals_(moe_ordinals(model)) {}

    std::string spec() const override { return spec_.text; }

    void check_layers(const std::vector<int64_t>& layers) const override {
        for (int64_t l : layers)
            if (l < 0 || l >= num_layers_)
                config_error("layers", "layer index outside the model", std::to_string(l),
                             fmt::format("use layers 0..{} (the model has {} layers)", num_layers_ - 1, num_layers_));
    }

    std::optional<StepRouting> next_step(int64_t num_tokens, const std::vector<int64_t>& layers) override {
        MOEBENCH_CHECK(num_tokens >= 0, "negative token count {}", num_tokens);
        check_layers(layers);
        StepRouting step;
        begin_step(num_tokens);
        for (int64_t l : layers) {
            LayerRouting r;
            r.num_tokens = num_tokens;
            if (ordinals_[static_cast<size_t>(l)] >= 0) {
                r.k = top_k_;
                r.ids.resize(static_cast<size_t>(num_tokens * top_k_));
                r.weights.resize(r.ids.size());
                fill_layer(l, ordinals_[static_cast<size_t>(l)], num_tokens, r);
            }
            step.per_layer.push_back(std::move(r));
        }
        position_ += num_tokens;
        return step;
    }

protected:
    /// Called once per step before the layers (stateful streams advance here).
    virtual void begin_step(int64_t num_tokens) {}
    /// Fills r.ids / r.weights for tokens position_ .. position_ + num_tokens - 1 of model layer `layer`.
    virtual void fill_layer(int64_t layer, int64_t ordinal, int64_t num_tokens, LayerRouting& r) = 0;

    /// Flat-Dirichlet weights, sorted descending, for one (layer, token position).
    void token_weights(int64_t layer, int64_t pos, float* out) const {
        Rng rng(stream_key(seed_, sampling::kTagWeights, static_cast<uint64_t>(layer), static_cast<uint64_t>(pos)));
        sampling::dirichlet_weights(top_k_, rng, out);
    }
    /// Shares by popularity rank, moved to the experts that layer `layer`'s permutation gives those ranks.
    std::vector<double> permuted_shares(int64_t layer, const std::vector<double>& by_rank) const {
        if (!is_moe(layer)) return {};
        const auto perm =
            sampling::permutation(num_experts_, stream_key(seed_, sampling::kTagPerm, static_cast<uint64_t>(layer)));
        std::vector<double> out(static_cast<size_t>(num_experts_), 0.0);
        for (int64_t r = 0; r < num_experts_; ++r)
            out[static_cast<size_t>(perm[static_cast<size_t>(r)])] = by_rank[static_cast<size_t>(r)];
        return out;
    }
    bool is_moe(int64_t layer) const {
        return layer >= 0 && layer < num_layers_ && ordinals_[static_cast<size_t>(layer)] >= 0;
    }
    const std::vector<int32_t>& layer_permutation(int64_t layer) {
        auto it = perms_.find(layer);
        if (it == perms_.end())
            it = perms_
                     .emplace(layer, sampling::permutation(num_experts_, stream_key(seed_, sampling::kTagPerm,
                                                                                    static_cast<uint64_t>(layer))))
                     .first;
        return it->second;
    }

    RoutingSpec spec_;
    uint64_t seed_;
    int64_t num_experts_, top_k_, num_layers_;
    std::vector<int64_t> ordinals_;
    std::map<int64_t, std::vector<int32_t>> perms_;
};

class RouterWorkload final : public ModelWorkload {
public:
    using ModelWorkload::ModelWorkload;
    std::string describe() const override { return "router: the model's own router on synthetic hidden states"; }
    bool overrides_routing() const override { return false; }
    std::optional<StepRouting> next_step(int64_t num_tokens, const std::vector<int64_t>& layers) override {
        check_layers(layers);
        position_ += num_tokens;
        return std::nullopt;
    }

protected:
    void fill_layer(int64_t, int64_t, int64_t, LayerRouting&) override {}
};

/// uniform, zipf, hot, imbalance: each token draws k distinct experts with inclusion probability k * share.
class SharesWorkload final : public ModelWorkload {
public:
    SharesWorkload(const RoutingSpec& spec, const ModelConfig& model, uint64_t seed, std::vector<double> shares,
                   std::string description)
        : ModelWorkload(spec, model, seed), shares_(std::move(shares)), description_(std::move(description)) {}
    std::string describe() const override { return description_; }
    std::vector<double> expected_load(int64_t layer) const override { return permuted_shares(layer, shares_); }
    // Each token draws from its own stream (seed, layer, position) with the same shares: independent tokens.
    std::vector<double> independent_shares() const override { return shares_; }
    std::vector<int32_t> popularity_permutation(int64_t layer) const override {
        if (!is_moe(layer)) return {};
        return sampling::permutation(num_experts_, stream_key(seed_, sampling::kTagPerm, static_cast<uint64_t>(layer)));
    }

protected:
    void fill_layer(int64_t layer, int64_t, int64_t num_tokens, LayerRouting& r) override {
        const auto& perm = layer_permutation(layer);
        std::vector<int32_t> ranks;
        for (int64_t t = 0; t < num_tokens; ++t) {
            const int64_t pos = position_ + t;
            Rng rng(stream_key(seed_, sampling::kTagPick, static_cast<uint64_t>(layer), static_cast<uint64_t>(pos)));
            ranks.clear();
            if (spec_.kind == WorkloadKind::uniform) {
                // k distinct experts, each equally likely (rejection of repeats; k <= E).
                while (static_cast<int64_t>(ranks.size()) < top_k_) {
                    auto e = static_cast<int32_t>(rng.below(num_experts_));
                    if (std::find(ranks.begin(), ranks.end(), e) == ranks.end()) ranks.push_back(e);
                }
            } else {
                sampling::sample_k_of_n(shares_, top_k_, rng, ranks);
            }
            for (int64_t j = 0; j < top_k_; ++j)
                r.ids[static_cast<size_t>(t * top_k_ + j)] = perm[static_cast<size_t>(ranks[static_cast<size_t>(j)])];
            token_weights(layer, pos, r.weights.data() + t * top_k_);
        }
    }

private:
    std::vector<double> shares_;
    std::string description_;
};

/// balanced: round-robin over a per-layer permutation; token p takes experts (p*k + j) mod E.
class BalancedWorkload final : public ModelWorkload {
public:
    using ModelWorkload::ModelWorkload;
    std::string describe() const override { return "balanced: round-robin, every expert equally loaded"; }
    std::vector<double> expected_load(int64_t layer) const override {
        if (!is_moe(layer)) return {};
        return std::vector<double>(static_cast<size_t>(num_experts_), 1.0 / static_cast<double>(num_experts_));
    }

protected:
    void fill_layer(int64_t layer, int64_t, int64_t num_tokens, LayerRouting& r) override {
        const auto& perm = layer_permutation(layer);
        for (int64_t t = 0; t < num_tokens; ++t) {
            const int64_t pos = position_ + t;
            for (int64_t j = 0; j < top_k_; ++j)
                r.ids[static_cast<size_t>(t * top_k_ + j)] =
                    perm[static_cast<size_t>((pos * top_k_ + j) % num_experts_)];
            token_weights(layer, pos, r.weights.data() + t * top_k_);
        }
    }
};

/// domains:D:SWITCH: the stream is a sequence of runs. A run starts at token 0 and, at every later token, with
/// probability SWITCH; it moves to another domain (uniformly among the other D - 1; the same one when D = 1) and
/// draws, per MoE layer, a fresh expert set from that domain's preferences (zipf 1.0 over a per-(layer, domain)
/// permutation), different from the previous run's set. Tokens of one run reuse its expert sets.
class DomainsWorkload final : public ModelWorkload {
public:
    DomainsWorkload(const RoutingSpec& spec, const ModelConfig& model, uint64_t seed)
        : ModelWorkload(spec, model, seed), domain_shares_(sampling::zipf_shares(num_experts_, top_k_, 1.0)) {
        for (int64_t o : ordinals_) num_moe_layers_ += (o >= 0);
        layer_of_ordinal_.resize(static_cast<size_t>(num_moe_layers_));
        for (size_t l = 0; l < ordinals_.size(); ++l)
            if (ordinals_[l] >= 0) layer_of_ordinal_[static_cast<size_t>(ordinals_[l])] = static_cast<int64_t>(l);
    }
    std::string describe() const override {
        return fmt::format("domains: {} domains, switch probability {} per token", spec_.num_domains,
                           spec_.switch_prob);
    }
    // Runs visit the domains evenly over a long stream (each new run moves to a uniformly chosen other domain), and
    // a run's set picks each expert with probability k x its domain share: the mean of the domains' shares (the
    // redraw of a set equal to the previous run's aside).
    std::vector<double> expected_load(int64_t layer) const override {
        if (!is_moe(layer)) return {};
        std::vector<double> out(static_cast<size_t>(num_experts_), 0.0);
        const double per_domain = 1.0 / static_cast<double>(spec_.num_domains);
        for (int64_t d = 0; d < spec_.num_domains; ++d) {
            const auto perm = sampling::permutation(
                num_experts_,
                stream_key(seed_, sampling::kTagDomainPerm, static_cast<uint64_t>(layer), static_cast<uint64_t>(d)));
            for (int64_t r = 0; r < num_experts_; ++r)
                out[static_cast<size_t>(perm[static_cast<size_t>(r)])] +=
                    per_domain * domain_shares_[static_cast<size_t>(r)];
        }
        return out;
    }
    void seek(int64_t position) override {
        position_ = 0;
        sets_.clear();
        for (int64_t p = 0; p < position; ++p) advance(p);
        position_ = position;
    }

protected:
    void begin_step(int64_t num_tokens) override {
        // Token t of this step uses step_sets_[t]; the stream state advances token by token.
        step_sets_.clear();
        for (int64_t t = 0; t < num_tokens; ++t) {
            advance(position_ + t);
            step_sets_.push_back(sets_);
        }
    }
    void fill_layer(int64_t layer, int64_t ordinal, int64_t num_tokens, LayerRouting& r) override {
        for (int64_t t = 0; t < num_tokens; ++t) {
            const auto& set = step_sets_[static_cast<size_t>(t)][static_cast<size_t>(ordinal)];
            std::copy(set.begin(), set.end(), r.ids.begin() + t * top_k_);
            token_weights(layer, position_ + t, r.weights.data() + t * top_k_);
        }
    }

private:
    void advance(int64_t pos) {
        bool new_run = pos == 0;
        if (!new_run) {
            Rng rng(stream_key(seed_, sampling::kTagSwitch, static_cast<uint64_t>(pos)));
            new_run = rng.uniform() < spec_.switch_prob;
        }
        if (!new_run) return;
        Rng drng(stream_key(seed_, sampling::kTagDomain, static_cast<uint64_t>(pos)));
        if (pos == 0)
            domain_ = drng.below(spec_.num_domains);
        else if (spec_.num_domains > 1)
            domain_ = (domain_ + 1 + drng.below(spec_.num_domains - 1)) % spec_.num_domains;
        std::vector<std::vector<int32_t>> next(static_cast<size_t>(num_moe_layers_));
        for (int64_t o = 0; o < num_moe_layers_; ++o) {
            const int64_t layer = layer_of_ordinal_[static_cast<size_t>(o)];
            const auto perm = sampling::permutation(
                num_experts_, stream_key(seed_, sampling::kTagDomainPerm, static_cast<uint64_t>(layer),
                                         static_cast<uint64_t>(domain_)));
            // Redraw (bounded) until the set differs from the previous run's, so a new run always switches.
            for (uint64_t attempt = 0; attempt < 64; ++attempt) {
                Rng rng(stream_key(seed_, sampling::kTagRunSet, static_cast<uint64_t>(layer),
                                   static_cast<uint64_t>(pos), attempt));
                std::vector<int32_t> ranks;
                sampling::sample_k_of_n(domain_shares_, top_k_, rng, ranks);
                std::vector<int32_t> ids;
                for (int32_t rk : ranks) ids.push_back(perm[static_cast<size_t>(rk)]);
                next[static_cast<size_t>(o)] = ids;
                if (sets_.empty()) break;
                auto a = ids, b = sets_[static_cast<size_t>(o)];
                std::sort(a.begin(), a.end());
                std::sort(b.begin(), b.end());
                if (a != b) break;
            }
        }
        sets_ = std::move(next);
    }

    std::vector<double> domain_shares_;
    int64_t num_moe_layers_ = 0;
    std::vector<int64_t> layer_of_ordinal_;
    int64_t domain_ = 0;
    std::vector<std::vector<int32_t>> sets_;                    // [moe ordinal][k] of the current run
    std::vector<std::vector<std::vector<int32_t>>> step_sets_;  // [token of step][moe ordinal][k]
};

/// trace:FILE: trace layer slot j replays on the model's j-th MoE layer; tokens wrap around.
class TraceWorkload final : public ModelWorkload {
public:
    TraceWorkload(const RoutingSpec& spec, const ModelConfig& model, uint64_t seed, const std::string& field)
        : ModelWorkload(spec, model, seed), trace_(read_trace(spec.trace_path)), field_(field) {
        const std::string& path = spec.trace_path;
        int64_t num_moe = 0;
        for (int64_t o : ordinals_) num_moe += (o >= 0);
        if (trace_.num_tokens == 0)
            config_error(field, "trace holds no tokens", path, "record or generate a longer trace");
        if (trace_.num_layers > num_moe)
            config_error(field,
                         fmt::format("trace has {} layers but model '{}' has {} MoE layers", trace_.num_layers,
                                     model.name, num_moe),
                         path,
                         trace_.model.empty()
                             ? "replay it on the model it was recorded on (the trace does not name it)"
                             : "replay it on the model it was recorded on (trace model: '" + trace_.model + "')");
        if (trace_.top_k != top_k_)
            config_error(field, fmt::format("trace top_k {} differs from the model's top_k {}", trace_.top_k, top_k_),
                         path, "replay it on a model with the same top-k");
        int32_t max_id = -1;
        for (int32_t e : trace_.topk_ids) max_id = std::max(max_id, e);
        if (max_id >= num_experts_)
            config_error(
                field,
                fmt::format("trace expert id {} is beyond model '{}' ({} experts)", max_id, model.name, num_experts_),
                path, "replay it on a model with at least " + std::to_string(max_id + 1) + " experts");
    }
    std::string describe() const override {
        return fmt::format("trace: {} ({} layers, {} tokens, {} missing selections; model '{}')", spec_.trace_path,
                           trace_.num_layers, trace_.num_tokens, trace_.num_missing(), trace_.model);
    }
    void check_layers(const std::vector<int64_t>& layers) const override {
        ModelWorkload::check_layers(layers);
        for (int64_t l : layers) {
            int64_t o = ordinals_[static_cast<size_t>(l)];
            if (o >= trace_.num_layers)
                config_error(field_,
                             fmt::format("trace has {} layers, too few for model layer {} (MoE layer {})",
                                         trace_.num_layers, l, o),
                             spec_.trace_path,
                             fmt::format("use a trace with one layer per MoE layer of the model, or run at most the "
                                         "layers it covers ({})",
                                         flag_of("layers")));
        }
    }

    // The trace's own counts of the layer's slot over all its tokens (what `moebench place` balances).
    std::vector<double> expected_load(int64_t layer) const override {
        if (!is_moe(layer) || ordinals_[static_cast<size_t>(layer)] >= trace_.num_layers) return {};
        const int32_t* ids = trace_.layer_ids(ordinals_[static_cast<size_t>(layer)]);
        std::vector<double> out(static_cast<size_t>(num_experts_), 0.0);
        double total = 0;
        for (int64_t a = 0; a < trace_.num_tokens * top_k_; ++a)
            if (ids[a] >= 0) {
                out[static_cast<size_t>(ids[a])] += 1;
                total += 1;
            }
        if (total > 0)
            for (double& x : out) x /= total;
        return out;
    }
    void interleave_sequences(int64_t batch) override { batch_ = batch; }
    std::string token_order(bool decode) const override {
        if (!decode || batch_ <= 0 || trace_.seq_starts.size() < 2) return ModelWorkload::token_order(decode);
        return fmt::format(
            "decode: row b of step s is token s of trace sequence b mod {} (the {} recorded sequences "
            "interleaved, one token of each per step, as a serving engine batches them; rows beyond "
            "the sequences start further along them); consecutive stream tokens are different sequences",
            trace_.seq_starts.size(), trace_.seq_starts.size());
    }

protected:
    // The trace token at stream position `pos`: in order, or (decode with a batch) interleaved over the sequences.
    int64_t source_token(int64_t pos) const { return trace_token_at(trace_, pos, batch_); }

    void fill_layer(int64_t, int64_t ordinal, int64_t num_tokens, LayerRouting& r) override {
        const int32_t* ids = trace_.layer_ids(ordinal);
        const float* w = trace_.layer_weights(ordinal);
        for (int64_t t = 0; t < num_tokens; ++t) {
            const int64_t src = source_token(position_ + t);
            int64_t valid = 0;
            for (int64_t j = 0; j < top_k_; ++j) valid += ids[src * top_k_ + j] >= 0;
            for (int64_t j = 0; j < top_k_; ++j) {
                int32_t e = ids[src * top_k_ + j];
                r.ids[static_cast<size_t>(t * top_k_ + j)] = e;
                // Without recorded weights, the valid selections share the token equally.
                float weight = w ? w[src * top_k_ + j] : (valid > 0 ? 1.0f / static_cast<float>(valid) : 0.0f);
                r.weights[static_cast<size_t>(t * top_k_ + j)] = e >= 0 ? weight : 0.0f;
            }
        }
    }

private:
    RoutingTrace trace_;
    std::string field_;
    int64_t batch_ = 0;  // decode batch when interleaving sequences (0: the stream in order)
};

/// Zipf exponent whose (capped) top share gives max/mean = ratio; bisection, the top share grows with s.
double solve_imbalance_exponent(int64_t num_experts, int64_t top_k, double ratio) {
    double lo = 0, hi = 64;
    for (int i = 0; i < 200; ++i) {
        double mid = 0.5 * (lo + hi);
        double top = sampling::zipf_shares(num_experts, top_k, mid)[0] * static_cast<double>(num_experts);
        (top < ratio ? lo : hi) = mid;
    }
    return 0.5 * (lo + hi);
}

}  // namespace

std::vector<double> popularity_shares(const RoutingSpec& spec, int64_t num_experts, int64_t top_k) {
    const double e = static_cast<double>(num_experts);
    switch (spec.kind) {
        case WorkloadKind::uniform: return std::vector<double>(static_cast<size_t>(num_experts), 1.0 / e);
        case WorkloadKind::zipf: return sampling::zipf_shares(num_experts, top_k, spec.zipf_exponent);
        case WorkloadKind::imbalance:
            return sampling::zipf_shares(num_experts, top_k,
                                         solve_imbalance_exponent(num_experts, top_k, spec.imbalance_ratio));
        case WorkloadKind::hot: {
            std::vector<double> s(static_cast<size_t>(num_experts));
            for (int64_t i = 0; i < num_experts; ++i)
                s[static_cast<size_t>(i)] =
                    i < spec.hot_experts
                        ? spec.hot_fraction / static_cast<double>(spec.hot_experts)
                        : (1 - spec.hot_fraction) / static_cast<double>(num_experts - spec.hot_experts);
            return s;
        }
        default: return {};
    }
}

std::unique_ptr<Workload> make_workload(const std::string& spec_text, const ModelConfig& model, uint64_t seed,
                                        const std::string& field) {
    RoutingSpec spec = parse_routing_spec(spec_text, field);
    if (spec.kind == WorkloadKind::router) return std::make_unique<RouterWorkload>(spec, model, seed);
    const int64_t e = model.moe.num_experts, k = model.moe.top_k;
    if (!model.is_moe_model() || k < 1 || k > e)
        config_error(field, "routing workloads need an MoE model with 1 <= top_k <= num_experts", spec_text,
                     "pick an MoE model, or use " + flag_of("routing") + " router");
    const std::string fix_tail = " (each token picks an expert at most once, so one expert takes at most 1/k = " +
                                 fmt::format("{:.4g}", 1.0 / static_cast<double>(k)) + " of the assignments)";
    switch (spec.kind) {
        case WorkloadKind::uniform:
            return std::make_unique<SharesWorkload>(spec, model, seed, popularity_shares(spec, e, k),
                                                    "uniform: k distinct experts, each equally likely");
        case WorkloadKind::balanced: return std::make_unique<BalancedWorkload>(spec, model, seed);
        case WorkloadKind::zipf: {
            const bool power = spec.text.rfind("powerlaw", 0) == 0;
            return std::make_unique<SharesWorkload>(
                spec, model, seed, popularity_shares(spec, e, k),
                fmt::format("{}: expert popularity ∝ rank^-{} (per-layer ranking{})", power ? "powerlaw" : "zipf",
                            spec.zipf_exponent, power ? "; the same workload as zipf" : ""));
        }
        case WorkloadKind::hot: {
            if (spec.hot_experts >= e)
                config_error(field, fmt::format("hot expert count must be below the model's {} experts", e), spec_text,
                             fmt::format("use hot:N:F with N < {}", e));
            double per_hot = spec.hot_fraction / static_cast<double>(spec.hot_experts);
            double per_cold = (1 - spec.hot_fraction) / static_cast<double>(e - spec.hot_experts);
            // Hot means busier than the rest: F at or below the even share N/E would make them the coldest.
            if (per_hot <= per_cold)
                config_error(field,
                             fmt::format("hot fraction must exceed the even share N/E = {:.4g} of {} experts",
                                         static_cast<double>(spec.hot_experts) / static_cast<double>(e), e),
                             spec_text, "use a larger F (or uniform for even load)" + fix_tail);
            if (per_hot * static_cast<double>(k) > 1 + 1e-9)
                config_error(
                    field, "hot fraction is too large for this top-k", spec_text,
                    fmt::format("use F <= N/k = {:.4g}", static_cast<double>(spec.hot_experts) / k) + fix_tail);
            if (per_cold * static_cast<double>(k) > 1 + 1e-9)
                config_error(field, "too few cold experts for the cold fraction", spec_text,
                             "use a larger F or a smaller N" + fix_tail);
            return std::make_unique<SharesWorkload>(spec, model, seed, popularity_shares(spec, e, k),
                                                    fmt::format("hot: {} hot experts per layer take {} of assignments",
                                                                spec.hot_experts, spec.hot_fraction));
        }
        case WorkloadKind::imbalance: {
            double max_ratio = static_cast<double>(e) / static_cast<double>(k);
            if (spec.imbalance_ratio > max_ratio + 1e-9)
                config_error(field,
                             fmt::format("imbalance ratio is above the largest possible, E/k = {:.4g}", max_ratio),
                             spec_text, fmt::format("use imbalance:R with 1 <= R <= {:.4g}", max_ratio) + fix_tail);
            double s = solve_imbalance_exponent(e, k, spec.imbalance_ratio);
            return std::make_unique<SharesWorkload>(
                spec, model, seed, sampling::zipf_shares(e, k, s),
                fmt::format("imbalance: target max/mean load {} (zipf exponent {:.3f})", spec.imbalance_ratio, s));
        }
        case WorkloadKind::domains: return std::make_unique<DomainsWorkload>(spec, model, seed);
        case WorkloadKind::trace: return std::make_unique<TraceWorkload>(spec, model, seed, field);
        case WorkloadKind::router: break;
    }
    throw Error(std::string("unhandled workload kind ") + to_string(spec.kind));
}

RoutingTrace generate_trace(Workload& workload, const ModelConfig& model, const std::vector<int64_t>& layers,
                            int64_t num_tokens, int64_t step_tokens) {
    if (!workload.overrides_routing())
        config_error(flag_of("routing"), "'router' routing needs the model's router running on a backend",
                     workload.spec(),
                     "trace gen takes a synthetic spec or trace:FILE (record real routing with "
                     "scripts/record_routing.py)");
    workload.check_layers(layers);
    const auto ordinals = moe_ordinals(model);
    std::vector<size_t> moe_slots;
    std::string layer_list;
    for (size_t i = 0; i < layers.size(); ++i)
        if (ordinals[static_cast<size_t>(layers[i])] >= 0) {
            moe_slots.push_back(i);
            if (!layer_list.empty()) layer_list += ',';  // (not "" : "," + ...: GCC 12 -Wrestrict false positive)
            layer_list += std::to_string(layers[i]);
        }
    if (moe_slots.empty())
        config_error(flag_of("layers"), "no MoE layer among the layers asked for",
                     std::to_string(layers.size()) + " layers", "include at least one MoE layer");
    RoutingTrace t;
    t.num_layers = static_cast<int64_t>(moe_slots.size());
    t.num_tokens = num_tokens;
    t.top_k = model.moe.top_k;
    t.num_experts = model.moe.num_experts;
    t.model = model.name;
    t.topk_ids.resize(static_cast<size_t>(t.num_layers * num_tokens * t.top_k));
    t.topk_weights.resize(t.topk_ids.size());
    if (num_tokens > 0) t.seq_starts = {0};
    t.extra_metadata["layer_indices"] = layer_list;
    const int64_t k = t.top_k;
    for (int64_t done = 0; done < num_tokens;) {
        int64_t n = std::min(step_tokens, num_tokens - done);
        auto step = workload.next_step(n, layers);
        MOEBENCH_CHECK(step.has_value(), "workload {} gave no routing", workload.spec());
        for (size_t s = 0; s < moe_slots.size(); ++s) {
            const LayerRouting& r = step->per_layer[moe_slots[s]];
            size_t at = static_cast<size_t>((static_cast<int64_t>(s) * num_tokens + done) * k);
            std::copy(r.ids.begin(), r.ids.end(), t.topk_ids.begin() + static_cast<std::ptrdiff_t>(at));
            std::copy(r.weights.begin(), r.weights.end(), t.topk_weights.begin() + static_cast<std::ptrdiff_t>(at));
        }
        done += n;
    }
    return t;
}

}  // namespace moebench
