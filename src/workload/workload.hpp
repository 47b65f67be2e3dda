// SPDX-License-Identifier: Apache-2.0
// Workloads: the token stream's routing, seeded and reproducible (docs/workloads.md). A workload either imposes
// expert selections on each step (synthetic distributions, trace replay) or leaves the router in charge.
#pragma once
#include "config/model_config.hpp"
#include "core/step.hpp"
#include "workload/routing_spec.hpp"
#include "workload/trace.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace moebench {

/// A stream of tokens; each call to next_step() continues where the previous one stopped.
/// The routing of a token depends only on (spec, seed, layer, stream position), never on how the stream is cut
/// into steps or which other layers are requested.
class Workload {
public:
    virtual ~Workload() = default;

    /// The spec it was made from, e.g. "zipf:1.2".
    virtual std::string spec() const = 0;
    /// One line for reports and the terminal.
    virtual std::string describe() const = 0;
    /// True when next_step() returns routing (false for "router": the model's own router decides).
    virtual bool overrides_routing() const { return true; }

    /// Checks `layers` (model layer indices) before a run starts; ConfigError naming the layer and the fix.
    virtual void check_layers(const std::vector<int64_t>& layers) const;

    /// Routing for the next `num_tokens` tokens of the stream at every slot of `layers` (model layer indices,
    /// as given to Backend::prepare). Dense layers get k == 0. std::nullopt: no override (router workload).
    /// Each LayerRouting holds [num_tokens, k] ids (k = the model's top_k; -1 = no selection, trace only) and weights.
    virtual std::optional<StepRouting> next_step(int64_t num_tokens, const std::vector<int64_t>& layers) = 0;

    /// Decode steps of `batch` tokens: one token of each of `batch` sequences per step, as a serving engine batches
    /// them (trace workloads interleave their recorded sequences; synthetic streams have none, so nothing changes).
    virtual void interleave_sequences(int64_t batch) {}
    /// How the stream's tokens are ordered, for the report (which sequence each token of a step comes from).
    virtual std::string token_order(bool decode) const {
        return decode ? "stream order (step after step, batch row after row), one sequence"
                      : "consecutive tokens of each prefill sequence";
    }

    /// Each expert's expected share of model layer `layer`'s assignments over a long stream ([E], summing to 1), as
    /// the spec defines it: the popularity through the layer's permutation (uniform, zipf/powerlaw, hot, imbalance),
    /// even (balanced), the mean of the domains' popularities (domains), the trace's counts of that layer over all
    /// its tokens (trace). Empty when nothing is known before the run (router) and for dense layers. The load that
    /// --redundant-experts balances (workload/redundant_experts.hpp).
    virtual std::vector<double> expected_load(int64_t layer) const { return {}; }

    /// For a workload whose tokens pick their experts independently of each other and of their place in the stream,
    /// with the same probabilities at every position (uniform, zipf/powerlaw, hot, imbalance): the popularity shares
    /// by rank (summing to 1, each at most 1/k); layer `layer`'s expert perm[r] takes rank r's share
    /// (popularity_permutation). Empty for the others (balanced, domains and trace depend on the position; router: the
    /// model decides). What the statistical routing path draws from (workload/routing_statistics.hpp).
    virtual std::vector<double> independent_shares() const { return {}; }
    virtual std::vector<int32_t> popularity_permutation(int64_t layer) const { return {}; }

    /// Tokens handed out so far (the position of the next token).
    int64_t position() const { return position_; }
    /// Restarts the stream at `position` (0 = the beginning); the stream is the same as if it had run there.
    virtual void seek(int64_t position) { position_ = position; }

protected:
    int64_t position_ = 0;
};

/// Builds the workload for `spec` (see routing_spec.hpp) on `model`. Infeasible parameters for this model
/// (hot fraction above N/k, imbalance above E/k, a trace with ids beyond the model or more layers, top-k
/// differing from the model's) -> ConfigError with exit 2, naming the spec and the fix. `field` names the spec in
/// messages ("routing (--routing)", "run.routing").
std::unique_ptr<Workload> make_workload(const std::string& spec, const ModelConfig& model, uint64_t seed,
                                        const std::string& field = "routing");

/// Popularity shares by rank (before the per-layer permutation) that a synthetic spec uses; empty for router,
/// balanced, domains and trace. For tests and docs: zipf, hot, imbalance, uniform.
std::vector<double> popularity_shares(const RoutingSpec& spec, int64_t num_experts, int64_t top_k);

/// Runs `workload` for `num_tokens` tokens over `layers` (model layer indices; dense layers are left out of the
/// trace) in steps of `step_tokens`, and returns the trace (one sequence). Ids and weights as the workload made them.
RoutingTrace generate_trace(Workload& workload, const ModelConfig& model, const std::vector<int64_t>& layers,
                            int64_t num_tokens, int64_t step_tokens = 4096);

/// Index of each model layer among the MoE layers (-1 for dense layers); layer_is_moe empty = all MoE.
std::vector<int64_t> moe_ordinals(const ModelConfig& model);

}  // namespace moebench
