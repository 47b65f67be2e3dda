// SPDX-License-Identifier: Apache-2.0
// The backend contract: the engine owns the order of phases, a backend executes (or models) each one.
// cpu, cuda and sim implement it; nothing upstream of the engine knows which one runs.
#pragma once
#include "common/json_util.hpp"
#include "common/tensor_file.hpp"
#include "config/model_config.hpp"
#include "engine/phase.hpp"
#include "engine/step.hpp"

#include <memory>
#include <string>
#include <vector>

namespace moebench {

class Backend {
public:
    virtual ~Backend() = default;

    virtual std::string name() const = 0;
    /// Environment block for the report: threads and BLAS (cpu), device and library versions (cuda), profile (sim).
    virtual json describe() const = 0;
    /// Where this backend's phase times come from: "measured" (cpu, cuda) or "modeled" (sim).
    virtual std::string timing_source() const { return "measured"; }

    /// Allocates weights (random from opt.seed) and buffers for `layers` (model layer indices, ascending) at `shape`.
    /// Throws UnsupportedError / ConfigError with the fix when the memory would not suffice.
    virtual void prepare(const ModelConfig& model, const std::vector<int64_t>& layers, const StepShape& shape,
                         const RunOptions& opt) = 0;
    /// Routing imposed on the next steps (nullptr: the router decides). The router GEMM and top-k still run and are timed.
    virtual void set_routing_override(const StepRouting* routing) = 0;

    virtual void begin_step() = 0;
    /// Runs one phase. layer_slot indexes `layers` from prepare(); -1 for embed, final_norm and lm_head.
    virtual void run_phase(Phase phase, int64_t layer_slot) = 0;
    /// Records a timestamp in the stream of work (host clock or CUDA event). The engine marks before the first
    /// phase and after every phase.
    virtual void mark() = 0;
    /// Finishes the step; returns the intervals between consecutive marks, in microseconds.
    virtual std::vector<double> end_step() = 0;

    /// Routing, loads and router logits observed in the MoE layer at `layer_slot` during the last step.
    virtual MoeLayerResult moe_result(int64_t layer_slot) const = 0;
    /// A reading of the device's own counters (clocks, throttle reasons, energy), taken just before and just after
    /// the measured steps; null where the backend has none (cpu: the host's counters are read by the runner; sim).
    virtual json read_device_counters() const { return nullptr; }
    /// The report's conditions.device block from two readings and the tokens processed between them (energy per
    /// token); null where the backend has no device counters.
    virtual json device_conditions(const json& before, const json& after, int64_t tokens) const { return nullptr; }

    /// fp32 host copies of the MoE block of `layer_slot` (see --dump-tensors in docs/report-schema.md).
    virtual std::vector<NamedTensor> moe_block_tensors(int64_t layer_slot) const = 0;
};

/// "auto" picks cuda when built and a GPU is present, else cpu; `why` receives the one-line reason.
/// Unknown or unavailable backend -> ConfigError (exit 2) saying so.
std::unique_ptr<Backend> make_backend(const std::string& name, std::string* why);
/// The same, with the hardware profile the sim backend models (RunConfig::hardware; "" = h200-sxm). cpu and cuda
/// ignore it. A bad profile -> ConfigError naming --hardware.
std::unique_ptr<Backend> make_backend(const std::string& name, std::string* why, const std::string& hardware);

}  // namespace moebench
