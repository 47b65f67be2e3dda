// SPDX-License-Identifier: Apache-2.0
// A run config modeled by the sim, prepared once and priced under any efficiencies and fixed costs: what `moebench
// calibrate` compares a measured report with (compare/calibrate.hpp), many times over, without preparing it again.
#pragma once
#include "backends/sim/sim_backend.hpp"
#include "config/model_config.hpp"
#include "config/run_config.hpp"
#include "model/placement.hpp"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace moebench {

/// One modeled step: per phase the step's time (summed over the layers run, as a report's latency.phases), and the
/// step (the sum of the phases: the sim has no overlap).
struct ModeledStep {
    std::map<std::string, double> phase_us;
    double step_us = 0;
};

class SimReplay {
public:
    /// `measured` as the measured run ran it (a report's config.run, its number formats resolved): the backend
    /// becomes the sim on `hw`, and what only steers measuring or writing (outputs, --check, --measure-ceilings,
    /// kernel choices, CUDA graphs) is dropped. The step is the one `moebench run --backend sim --hardware HW
    /// --routing-path per-token --config REPORT.json` models first: the same model, layers, layout, formats and the
    /// workload's first step of routing, every token's experts as the measured run routed them (never the
    /// statistical path's drawn counts). ConfigError as that run would give it.
    SimReplay(const RunConfig& measured, const HardwareProfile& hw, const SimParams& p);
    ~SimReplay();
    SimReplay(SimReplay&&) noexcept;
    SimReplay& operator=(SimReplay&&) noexcept;

    /// The prepared step priced with the efficiencies and fixed costs of `p` (its dtype and MLA form are those of
    /// construction).
    ModeledStep price(const SimParams& p);

private:
    ModelConfig model_;
    std::vector<int64_t> layers_;
    ExpertPlacement placement_;
    std::unique_ptr<Backend> backend_;
    std::vector<PhaseEntry> plan_;
    std::optional<StepRouting> routing_;
};

}  // namespace moebench
