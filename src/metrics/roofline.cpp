// SPDX-License-Identifier: Apache-2.0
#include "metrics/roofline.hpp"

#include "common/error.hpp"
#include "config/hardware.hpp"
#include "metrics/ceilings.hpp"

#include <algorithm>

namespace moebench {

namespace {

json rate_or_null(double v) { return v > 0 ? json(v) : json(nullptr); }

}  // namespace

RooflineCeilings profile_ceilings(const std::string& profile, double elem_bytes) {
    const bool fp32 = elem_bytes >= 4;
    HardwareProfile hw;
    try {
        hw = load_hardware(profile);
    } catch (const ConfigError& e) {
        std::string what = e.what();
        if (what.find("--hardware") != std::string::npos) throw;
        throw ConfigError("hardware (--hardware): " + what);
    }
    RooflineCeilings c;
    c.peak_flops_per_s = fp32 ? hw.fp32_flops : hw.bf16_flops;
    c.mem_bw_bytes_per_s = hw.memory_bw_bytes_per_s;
    c.source = "hardware profile " + hw.name;
    c.note = fmt::format("{} datasheet: {} peak and memory bandwidth", hw.display_name.empty() ? hw.name : hw.display_name,
                         fp32 ? "fp32" : "bf16");
    return c;
}

json roofline_block(const ModelConfig& model, const StepShape& shape, int64_t ep_size, const WorkBasis& basis,
                    const std::string& times_source, const std::vector<PhaseEntry>& plan,
                    const std::vector<StepTimes>& steps, const std::vector<MoeLayerSamples>& moe,
                    const std::map<Phase, TimingStats>& phase_stats, const RooflineCeilings& ceil) {
    const double elem_bytes = basis.elem_bytes;
    const MlaForm form = basis.mla_form;
    PhaseWorkOptions wopt;
    wopt.mla_form = form;
    const int64_t T = shape.num_tokens(), E = model.moe.num_experts;
    const int64_t num_steps = static_cast<int64_t>(steps.size());

    std::map<Phase, PhaseWork> per_phase;
    PhaseWork block;
    double block_measured_us = 0;
    std::vector<std::string> block_phases;
    for (size_t p = 0; p < plan.size(); ++p) {
        const PhaseEntry& e = plan[p];
        const PhaseGroup g = phase_group(e.phase);
        const bool in_block = g == PhaseGroup::router || g == PhaseGroup::dispatch || g == PhaseGroup::experts ||
                              g == PhaseGroup::combine;
        const MoeLayerSamples* acc = nullptr;
        for (const MoeLayerSamples& a : moe)
            if (a.slot == e.slot) acc = &a;
        PhaseWork w;
        if (acc && in_block && acc->k > 0 && E > 0) {
            // Average over the measured steps of the work at that step's tokens per expert.
            const int64_t k = acc->k;
            std::vector<int64_t> tpe(static_cast<size_t>(E));
            for (int64_t i = 0; i < num_steps; ++i) {
                std::fill(tpe.begin(), tpe.end(), 0);
                for (int64_t a = i * T * k; a < (i + 1) * T * k && a < static_cast<int64_t>(acc->ids.size()); ++a)
                    if (acc->ids[a] >= 0 && acc->ids[a] < E) ++tpe[static_cast<size_t>(acc->ids[a])];
                PhaseWork wi = phase_work(model, e.phase, e.layer, shape, tpe, elem_bytes, elem_bytes,
                                          ep_size, wopt);
                w.flops += wi.flops / num_steps;
                w.weight_bytes += wi.weight_bytes / num_steps;
                w.activation_bytes += wi.activation_bytes / num_steps;
            }
        } else {
            w = phase_work(model, e.phase, e.layer, shape, {}, elem_bytes, elem_bytes, ep_size, wopt);
        }
        PhaseWork& sum = per_phase[e.phase];
        sum.flops += w.flops;
        sum.weight_bytes += w.weight_bytes;
        sum.activation_bytes += w.activation_bytes;
        if (acc && in_block) {
            block.flops += w.flops;
            block.weight_bytes += w.weight_bytes;
            block.activation_bytes += w.activation_bytes;
            double mean = 0;
            for (int64_t i = 0; i < num_steps; ++i) mean += steps[static_cast<size_t>(i)].phase_us[p];
            block_measured_us += num_steps > 0 ? mean / num_steps : 0.0;
            std::string name(phase_name(e.phase));
            if (std::find(block_phases.begin(), block_phases.end(), name) == block_phases.end())
                block_phases.push_back(name);
        }
    }

    // The work counts every rank (the whole step); with expert parallelism (sim only) the ranks run side by side,
    // so the floors and fractions use the ranks' summed ceilings.
    const double ranks = static_cast<double>(std::max<int64_t>(1, ep_size));
    const double peak = ceil.peak_flops_per_s * ranks, bw = ceil.mem_bw_bytes_per_s * ranks;
    const bool have_ceilings = peak > 0 && bw > 0;
    json phases = json::object();
    for (const auto& [ph, w] : per_phase) {
        auto it = phase_stats.find(ph);
        const double us = it == phase_stats.end() ? 0.0 : it->second.mean_us;
        json j = {{"flops", w.flops},
                  {"bytes", w.bytes()},
                  {"weight_bytes", w.weight_bytes},
                  {"activation_bytes", w.activation_bytes},
                  {"arithmetic_intensity", w.bytes() > 0 ? json(w.flops / w.bytes()) : json(nullptr)},
                  {"mean_us", us},
                  {"achieved_tflops", us > 0 ? json(w.flops / (us * 1e-6) / 1e12) : json(nullptr)},
                  {"achieved_gbps", us > 0 ? json(w.bytes() / (us * 1e-6) / 1e9) : json(nullptr)}};
        if (have_ceilings) {
            Floor f = physical_floor(w.bytes(), w.flops, bw, peak);
            j["floor_us"] = f.floor_us;
            j["bound"] = f.bound;
            j["fraction_of_floor"] = us > 0 ? json(f.floor_us / us) : json(nullptr);
            j["fraction_of_peak_flops"] = us > 0 ? json(w.flops / (us * 1e-6) / peak) : json(nullptr);
            j["fraction_of_mem_bw"] = us > 0 ? json(w.bytes() / (us * 1e-6) / bw) : json(nullptr);
        } else {
            j["floor_us"] = nullptr;
            j["fraction_of_floor"] = nullptr;
        }
        phases[std::string(phase_name(ph))] = j;
    }
    json r = {{"source", "counted"},
              {"times_source", times_source},
              {"precision", basis.precision},
              {"weight_elem_bytes", elem_bytes},
              {"act_elem_bytes", elem_bytes},
              {"mla_form", to_string(form)},
              {"basis", "model/phase_work.hpp: FLOPs (2 per multiply-add) and bytes (weights touched once per step + "
                        "activations) per phase, summed over the layers run; MoE phases at each measured step's "
                        "tokens per expert, averaged over the steps"},
              {"peak_flops_per_s", rate_or_null(ceil.peak_flops_per_s)},
              {"mem_bw_bytes_per_s", rate_or_null(ceil.mem_bw_bytes_per_s)},
              {"ranks", static_cast<int64_t>(ranks)},
              {"ceiling_source", ceil.source.empty() ? json(nullptr) : json(ceil.source)},
              {"phases", phases}};
    if (!ceil.note.empty()) r["ceiling_note"] = ceil.note;
    if (!ceil.detail.empty()) r["ceiling_detail"] = ceil.detail;
    if (!have_ceilings)
        r["floor_unavailable"] = "no ceilings: give --hardware PROFILE (datasheet) or --measure-ceilings (cpu, cuda)";
    if (!block_phases.empty()) {
        json b = {{"phases", block_phases},
                  {"layers", static_cast<int64_t>(moe.size())},
                  {"flops", block.flops},
                  {"bytes", block.bytes()},
                  {"weight_bytes", block.weight_bytes},
                  {"measured_us", block_measured_us},
                  {"basis", "the MoE-layer phases of the router, dispatch, experts and combine groups, per step, "
                            "all MoE layers run; floor = max(bytes / bandwidth, FLOPs / peak) of their summed work"}};
        if (have_ceilings) {
            Floor f = physical_floor(block.bytes(), block.flops, bw, peak);
            b["floor_us"] = f.floor_us;
            b["memory_floor_us"] = f.memory_us;
            b["compute_floor_us"] = f.compute_us;
            b["bound"] = f.bound;
            b["ratio_to_floor"] = f.floor_us > 0 ? json(block_measured_us / f.floor_us) : json(nullptr);
            // Only a measured time below its floor points at an under-measured ceiling.
            const std::string warning = times_source == "measured" ? below_floor_warning(f, block_measured_us) : "";
            if (!warning.empty()) b["floor_warning"] = "the MoE block " + warning;
        } else {
            b["floor_us"] = nullptr;
            b["ratio_to_floor"] = nullptr;
        }
        r["moe_block"] = b;
    }
    return r;
}

}  // namespace moebench
