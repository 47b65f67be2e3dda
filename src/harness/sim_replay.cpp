// SPDX-License-Identifier: Apache-2.0
// The sim's side of calibration: the prepare stage of runner.cpp for the sim alone (validate, model and layers,
// workload, backend and what its traits accept, layout and formats, placement, plan), then one step per price.
#include "harness/sim_replay.hpp"

#include "config/layout_request.hpp"
#include "config/run_fields.hpp"
#include "engine/engine.hpp"
#include "harness/validate.hpp"
#include "workload/redundant_experts.hpp"
#include "workload/workload.hpp"

namespace moebench {

SimReplay::SimReplay(const RunConfig& measured, const HardwareProfile& hw, const SimParams& p) {
    RunConfig cfg = measured;
    cfg.backend = "sim";
    cfg.hardware = hw.source.empty() ? hw.name : hw.source;
    cfg.out.clear();
    cfg.dump_tensors.clear();
    cfg.check = false;
    cfg.measure_ceilings = false;
    cfg.options.expert_gemm = "auto";
    cfg.options.attention_kernel = "auto";
    cfg.options.cuda_graph = cfg.options.cold_l2 = cfg.options.expert_times = false;
    // The measured run's phase work: every token's experts, as cpu and cuda ran them (the statistical path draws
    // counts from the workload's shares instead, another step than the one measured).
    cfg.routing_path = "per-token";
    validate_run(cfg);
    model_ = load_model(cfg.model);
    layers_ = layers_to_run(model_, cfg);
    check_layout_for_model(model_, resolve_layout(cfg.layout));
    // The workload before the backend, as a run builds it: a bad --routing fails before any allocation.
    std::unique_ptr<Workload> workload =
        make_workload(cfg.routing, model_, cfg.options.seed, run_field_label("", "routing"));
    workload->check_layers(layers_);
    if (cfg.shape.mode == Mode::decode) workload->interleave_sequences(cfg.shape.batch);
    backend_ = make_sim_backend(hw, p);
    const BackendTraits traits = backend_->traits();
    check_backend_accepts(traits, cfg);
    check_backend_runs_model(traits, model_, layers_);
    RunOptions options = resolved_options(cfg, traits);
    Topology topo;
    if (options.layout.moe_ep > 1 && model_.is_moe_model()) {
        placement_ = load_placement(cfg.layout.placement, model_.moe.num_experts, options.layout.moe_ep);
        if (options.layout.redundant_experts > 0)  // each layer's replicas, as the run chose them
            placement_ = with_redundant_experts(placement_, *workload, model_, layers_, cfg.shape,
                                                options.layout.redundant_experts);
        topo.placement = &placement_;
    }
    options.routing_statistics = false;
    // Not asked whether the modeled deployment fits the profile's memory: the measured run ran.
    backend_->prepare(model_, layers_, cfg.shape, options, topo);
    plan_ = step_plan(model_, layers_, options.layout, cfg.include_lm_head);
    // The first measured step's routing (a run's warm-up steps rewind the stream to its start).
    workload->seek(0);
    routing_ = workload->next_step(cfg.shape.num_tokens(), layers_);
    backend_->set_routing_override(routing_ ? &*routing_ : nullptr);
}

SimReplay::~SimReplay() = default;
SimReplay::SimReplay(SimReplay&&) noexcept = default;
SimReplay& SimReplay::operator=(SimReplay&&) noexcept = default;

ModeledStep SimReplay::price(const SimParams& p) {
    reprice_sim(*backend_, p);
    const StepTimes t = run_step(*backend_, plan_);
    ModeledStep out;
    for (size_t i = 0; i < plan_.size(); ++i) {
        out.phase_us[std::string(phase_name(plan_[i].phase))] += t.phase_us[i];
        out.step_us += t.phase_us[i];
    }
    return out;
}

}  // namespace moebench
