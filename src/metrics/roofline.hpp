// SPDX-License-Identifier: Apache-2.0
// The roofline derivation: counted work per phase (model/phase_work) against the ceilings a run had, as the report's
// `roofline` block (docs/report-schema.md, "roofline"), and the MoE block's floor.
#pragma once
#include "common/json_util.hpp"
#include "config/model_config.hpp"
#include "core/step.hpp"
#include "metrics/moe_samples.hpp"
#include "metrics/timing_stats.hpp"
#include "model/phase_work.hpp"

#include <map>
#include <string>
#include <vector>

namespace moebench {

// The two rates a floor is computed against, and where they came from.
struct RooflineCeilings {
    double peak_flops_per_s = 0;    // 0 = unknown
    double mem_bw_bytes_per_s = 0;  // 0 = unknown
    std::string source;             // "hardware profile <name>" | "measured on this machine" | ""
    std::string note;               // why they are missing, or what was measured
    json detail = json::object();
};

/// Ceilings from a hardware profile's datasheet: the peak of the dense weights' format (model/decode_floor.hpp
/// profile_rate: fp32 for a backend that computes in fp32, bf16 for bf16, ...; 0, unknown, where the profile does not
/// give it). A bad profile -> ConfigError naming --hardware.
RooflineCeilings profile_ceilings(const std::string& profile, const Precision& precision);

/// How the backend that ran counts: the number formats it computed in, its MLA form and its name (for the report's
/// precision line); with expert parallelism, how the all-to-alls move rows (as PhaseWorkOptions: placement, dedup,
/// dispatch row bytes).
struct WorkBasis {
    Precision precision = uniform_precision(DType::fp32);
    MlaForm mla_form = MlaForm::expanded_cache;
    std::string backend;
    const ExpertPlacement* placement = nullptr;  // null: contiguous blocks
    bool a2a_dedup = false;
    double dispatch_row_bytes = 0;  // 0: hidden x the activations' bytes
};

/// Per-phase counted work summed over the layers run (MoE phases at each measured step's tokens per expert,
/// averaged over the steps), achieved rates from the phase means, floors where the ceilings are known.
json roofline_block(const ModelConfig& model, const StepShape& shape, const Layout& layout, const WorkBasis& basis,
                    const std::string& times_source, const std::vector<PhaseEntry>& plan,
                    const std::vector<StepTimes>& steps, const std::vector<MoeLayerSamples>& moe,
                    const std::map<Phase, TimingStats>& phase_stats, const RooflineCeilings& ceil);

}  // namespace moebench
