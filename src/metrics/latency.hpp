// SPDX-License-Identifier: Apache-2.0
// The latency derivation: per phase (summed over the layers run, per step), per phase group, per layer, the whole
// step, and the whole model extrapolated from the layers run (docs/report-schema.md, "latency").
#pragma once
#include "common/json_util.hpp"
#include "config/model_config.hpp"
#include "core/step.hpp"
#include "metrics/timing_stats.hpp"

#include <map>
#include <string>
#include <vector>

namespace moebench {

struct Latency {
    json block;                                // the report's `latency`
    std::map<Phase, TimingStats> phase_stats;  // per phase, summed over the layers run (the roofline's times)
    TimingStats step;                          // the whole step
};

/// `steps[i].phase_us[p]` belongs to `plan[p]`; `layers` are the model layers run (their slots index it).
/// `times_source` "measured": the step is the host clock around it; otherwise the sum of its (modeled) phases.
/// `per_layer` false: no per_layer block (a brief record; the whole model still uses each layer's total).
Latency derive_latency(const ModelConfig& model, const std::vector<int64_t>& layers,
                       const std::vector<PhaseEntry>& plan, const std::vector<StepTimes>& steps,
                       const std::string& times_source, bool includes_head, int64_t num_tokens, bool per_layer = true);

}  // namespace moebench
