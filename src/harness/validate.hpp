// SPDX-License-Identifier: Apache-2.0
// The validate stage of a run point: the run config's values, and what the chosen backend accepts (from its traits,
// so that no check here knows a backend by name).
#pragma once
#include "config/model_config.hpp"
#include "config/run_config.hpp"
#include "engine/backend.hpp"

#include <cstdint>
#include <vector>

namespace moebench {

/// Before anything runs (run, sweep: every point up front): validate(cfg), the backend's name, and the options
/// against the named backend's traits ("auto" is checked once it has picked one). ConfigError naming the field.
/// The layout is written back resolved (every size given), as the report records it.
void validate_run(RunConfig& cfg);

/// The options of `cfg` against the traits of the backend that will run them: --expert-gemm, --cuda-graph,
/// --cold-l2, the layout (--ep, --tp, ...), the number formats (--dtype, ...), --check, --dump-tensors,
/// --measure-ceilings. ConfigError naming the field, the backend, and which backend accepts the option.
void check_backend_accepts(const BackendTraits& traits, const RunConfig& cfg);
/// The options a backend is prepared with: cfg.options with the layout and the number formats resolved (for the
/// backend of `traits`: "auto" formats are its native ones).
RunOptions resolved_options(const RunConfig& cfg, const BackendTraits& traits);
/// What of the model's forward path the backend runs (linear attention, gated attention output): exit 2 naming the
/// backend that does.
void check_backend_runs_model(const BackendTraits& traits, const ModelConfig& model,
                              const std::vector<int64_t>& layers);

/// The model layers a point runs (cfg.layers from cfg.first_layer on, 0 = all from there), checked against the model
/// and the options that need a MoE layer or divide its experts. ConfigError naming the field.
std::vector<int64_t> layers_to_run(const ModelConfig& model, const RunConfig& cfg);

}  // namespace moebench
