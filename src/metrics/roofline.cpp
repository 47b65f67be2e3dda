// SPDX-License-Identifier: Apache-2.0
#include "metrics/roofline.hpp"
#include "core/report_keys.hpp"

#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "config/hardware.hpp"
#include "config/run_fields.hpp"
#include "metrics/ceilings.hpp"
#include "model/decode_floor.hpp"

#include <algorithm>
#include <map>

namespace moebench {

namespace {

json rate_or_null(double v) { return v > 0 ? json(v) : json(nullptr); }

}  // namespace

RooflineCeilings profile_ceilings(const std::string& profile, const Precision& precision) {
    HardwareProfile hw;
    try {
        hw = load_hardware(profile);
    } catch (const ConfigError& e) {
        std::string what = e.what();
        if (what.find(flag_of("hardware")) != std::string::npos) throw;  // names the field already
        throw ConfigError(run_field_label("", "hardware") + ": " + what);
    }
    RooflineCeilings c;
    // The peak of the dense weights' format; 0 (unknown: no floors) where the profile does not give it.
    const ComputeRate rate = dtype_info(precision.dense_weights).weight_compute;
    c.peak_flops_per_s = profile_rate(hw, rate);
    c.mem_bw_bytes_per_s = hw.memory_bw_bytes_per_s;
    c.source = "hardware profile " + hw.name;
    c.note = c.peak_flops_per_s > 0
                 ? fmt::format("{} datasheet: {} peak and memory bandwidth",
                               hw.display_name.empty() ? hw.name : hw.display_name, to_string(precision.dense_weights))
                 : fmt::format("hardware {} gives no {} (the peak {} computes at): no floors", hw.name,
                               rate_field(rate), to_string(precision.dense_weights));
    return c;
}

namespace {

// Counted work of the step: per phase summed over the layers run, and of the MoE block (its measured time too).
struct CountedWork {
    std::map<Phase, PhaseWork> per_phase;
    PhaseWork block;
    double block_measured_us = 0;
    std::vector<std::string> block_phases;
};

void add_work(PhaseWork& sum, const PhaseWork& w) {
    sum.flops += w.flops;
    sum.weight_bytes += w.weight_bytes;
    sum.activation_bytes += w.activation_bytes;
}

// A MoE phase's work averaged over the measured steps, each at that step's tokens per expert.
PhaseWork mean_moe_work(const ModelConfig& model, const PhaseEntry& e, const StepShape& shape, const Layout& layout,
                        const WorkBasis& basis, const MoeLayerSamples& acc, int64_t num_steps) {
    const int64_t T = shape.num_tokens(), E = model.moe.num_experts, k = acc.k, ep_size = layout.moe_ep;
    PhaseWorkOptions wopt;
    wopt.mla_form = basis.mla_form;
    wopt.layout = &layout;
    wopt.placement = basis.placement ? &basis.placement->of_layer(e.layer) : nullptr;  // the layer's replicas
    wopt.a2a_dedup = basis.a2a_dedup;
    wopt.dispatch_row_bytes = basis.dispatch_row_bytes;
    // The link-bound phases count the rows this step's routing sends (the sim's and the engine's traffic), not an
    // estimate.
    const bool link = is_link_bound(e.phase);
    LayerRouting step_routing;
    step_routing.num_tokens = T;
    step_routing.k = k;
    PhaseWork w;
    auto add_step = [&](const PhaseWork& wi, double weight) {
        w.flops += wi.flops * weight;
        w.weight_bytes += wi.weight_bytes * weight;
        w.activation_bytes += wi.activation_bytes * weight;
    };
    // Steps routed by counts (the sim's statistical path): each distinct step once, weighted by how often it ran.
    int64_t from_ids = num_steps;
    for (const MoeLayerSamples::CountedSteps& c : acc.counted) {
        PhaseWorkOptions copt = wopt;
        copt.cross_rank_rows = c.a2a_rows;
        add_step(phase_work(model, e.phase, e.layer, shape, c.tokens_per_expert, basis.precision, ep_size, copt),
                 static_cast<double>(c.steps) / static_cast<double>(num_steps));
        from_ids -= c.steps;
    }
    std::vector<int64_t> tpe(static_cast<size_t>(from_ids > 0 ? E : 0));  // (none on the statistical path)
    for (int64_t i = 0; i < from_ids; ++i) {
        std::fill(tpe.begin(), tpe.end(), 0);
        for (int64_t a = i * T * k; a < (i + 1) * T * k && a < static_cast<int64_t>(acc.ids.size()); ++a)
            if (acc.ids[a] >= 0 && acc.ids[a] < E) ++tpe[static_cast<size_t>(acc.ids[a])];
        const bool have_ids = static_cast<int64_t>(acc.ids.size()) >= (i + 1) * T * k;
        if (link && have_ids && ep_size > 1) {
            step_routing.ids.assign(acc.ids.begin() + i * T * k, acc.ids.begin() + (i + 1) * T * k);
            wopt.routing = &step_routing;
        } else {
            wopt.routing = nullptr;
        }
        add_step(phase_work(model, e.phase, e.layer, shape, tpe, basis.precision, ep_size, wopt),
                 1.0 / static_cast<double>(num_steps));
    }
    return w;
}

CountedWork count_work(const ModelConfig& model, const StepShape& shape, const Layout& layout, const WorkBasis& basis,
                       const std::vector<PhaseEntry>& plan, const std::vector<StepTimes>& steps,
                       const std::vector<MoeLayerSamples>& moe) {
    const int64_t ep_size = layout.moe_ep;
    PhaseWorkOptions wopt;
    wopt.mla_form = basis.mla_form;
    wopt.layout = &layout;
    const int64_t num_steps = static_cast<int64_t>(steps.size());
    // The attention replicas (data-parallel) that hold tokens: each reads its own copy of the replicated weights.
    const int64_t replicas = std::max<int64_t>(1, layout.attn_dp);
    int64_t ranks_with_tokens = 0;
    for (int64_t r = 0; r < replicas; ++r) ranks_with_tokens += sequences_on_rank(shape, r, replicas) > 0 ? 1 : 0;
    CountedWork c;
    std::map<int64_t, const MoeLayerSamples*> by_slot;  // (a scan per plan entry made this layers squared)
    for (const MoeLayerSamples& a : moe) by_slot[a.slot] = &a;
    std::map<std::pair<int, int64_t>, PhaseWork> by_class;  // the work of a phase on alike layers, counted once
    for (size_t p = 0; p < plan.size(); ++p) {
        const PhaseEntry& e = plan[p];
        const bool in_block = phase_group_info(phase_group(e.phase)).moe_block;
        const auto found = by_slot.find(e.slot);
        const MoeLayerSamples* acc = found != by_slot.end() ? found->second : nullptr;
        PhaseWork w;
        if (acc && in_block && acc->k > 0 && model.moe.num_experts > 0) {
            w = mean_moe_work(model, e, shape, layout, basis, *acc, num_steps);
        } else {
            const auto key = std::make_pair(static_cast<int>(e.phase), layer_work_class(model, e.layer));
            auto it = by_class.find(key);
            if (it == by_class.end())
                it = by_class
                         .emplace(key, phase_work(model, e.phase, e.layer, shape, {}, basis.precision, ep_size, wopt))
                         .first;
            w = it->second;
        }
        // Under tensor parallelism phase_work counts one GPU of a TP group (attention's on the token side, moe_tp's
        // on the expert side): the group's GPUs together do tp times that (the link phases count every GPU already).
        if (!is_link_bound(e.phase)) {
            const double tp = static_cast<double>(is_routed_expert_phase(e.phase) ? layout.moe_tp : layout.attn_tp);
            w.flops *= tp;
            w.weight_bytes *= tp;
            w.activation_bytes *= tp;
        }
        // Every replica that holds tokens reads its own copy of the replicated weights; the phase table says which
        // phases count theirs once for all ranks (the routed experts, split over the ranks; embed's rows).
        if (phase_info(e.phase).weights == PhaseWeights::replicated)
            w.weight_bytes *= static_cast<double>(ranks_with_tokens);
        add_work(c.per_phase[e.phase], w);
        if (!acc || !in_block) continue;
        add_work(c.block, w);
        double mean = 0;
        for (int64_t i = 0; i < num_steps; ++i) mean += steps[static_cast<size_t>(i)].phase_us[p];
        c.block_measured_us += num_steps > 0 ? mean / num_steps : 0.0;
        std::string name(phase_name(e.phase));
        if (std::find(c.block_phases.begin(), c.block_phases.end(), name) == c.block_phases.end())
            c.block_phases.push_back(name);
    }
    return c;
}

// One phase's counted work, achieved rates, and (with ceilings `bw`, `peak` > 0) its floor.
json phase_roofline(const PhaseWork& w, double us, double bw, double peak) {
    json j = {{"flops", w.flops},
              {"bytes", w.bytes()},
              {"weight_bytes", w.weight_bytes},
              {"activation_bytes", w.activation_bytes},
              {"arithmetic_intensity", w.bytes() > 0 ? json(w.flops / w.bytes()) : json(nullptr)},
              {keys::kMeanUs, us},
              {"achieved_tflops", us > 0 ? json(w.flops / (us * 1e-6) / 1e12) : json(nullptr)},
              {"achieved_gbps", us > 0 ? json(w.bytes() / (us * 1e-6) / 1e9) : json(nullptr)}};
    if (peak > 0 && bw > 0) {
        Floor f = physical_floor(w.bytes(), w.flops, bw, peak);
        j[keys::kFloorUs] = f.floor_us;
        j["bound"] = f.bound;
        j["fraction_of_floor"] = us > 0 ? json(f.floor_us / us) : json(nullptr);
        j["fraction_of_peak_flops"] = us > 0 ? json(w.flops / (us * 1e-6) / peak) : json(nullptr);
        j["fraction_of_mem_bw"] = us > 0 ? json(w.bytes() / (us * 1e-6) / bw) : json(nullptr);
    } else {
        j[keys::kFloorUs] = nullptr;
        j["fraction_of_floor"] = nullptr;
    }
    return j;
}

// The MoE block's summed work against its floor; only a measured time below its floor points at an
// under-measured ceiling.
json moe_block_roofline(const CountedWork& c, int64_t num_moe_layers, double bw, double peak,
                        const std::string& times_source) {
    json b = {{keys::kPhases, c.block_phases},
              {"layers", num_moe_layers},
              {"flops", c.block.flops},
              {"bytes", c.block.bytes()},
              {"weight_bytes", c.block.weight_bytes},
              {"measured_us", c.block_measured_us},
              {"basis",
               "the MoE-layer phases of the router, dispatch, experts and combine groups, per step, "
               "all MoE layers run; floor = max(bytes / bandwidth, FLOPs / peak) of their summed work"}};
    if (peak > 0 && bw > 0) {
        Floor f = physical_floor(c.block.bytes(), c.block.flops, bw, peak);
        b[keys::kFloorUs] = f.floor_us;
        b["memory_floor_us"] = f.memory_us;
        b["compute_floor_us"] = f.compute_us;
        b["bound"] = f.bound;
        b[keys::kRatioToFloor] = f.floor_us > 0 ? json(c.block_measured_us / f.floor_us) : json(nullptr);
        const std::string warning = times_source == "measured" ? below_floor_warning(f, c.block_measured_us) : "";
        if (!warning.empty()) b["floor_warning"] = "the MoE block " + warning;
    } else {
        b[keys::kFloorUs] = nullptr;
        b[keys::kRatioToFloor] = nullptr;
    }
    return b;
}

}  // namespace

json roofline_block(const ModelConfig& model, const StepShape& shape, const Layout& layout, const WorkBasis& basis,
                    const std::string& times_source, const std::vector<PhaseEntry>& plan,
                    const std::vector<StepTimes>& steps, const std::vector<MoeLayerSamples>& moe,
                    const std::map<Phase, TimingStats>& phase_stats, const RooflineCeilings& ceil) {
    const CountedWork c = count_work(model, shape, layout, basis, plan, steps, moe);
    // The work counts every GPU (the whole step: each replica's copy of the replicated weights, each TP group's
    // GPUs, the all-to-alls' rows as the run's placement and mode move them, the collectives' ring bytes); the GPUs
    // run side by side (modeled by sim, or processes), so the floors and fractions use their summed ceilings.
    const double ranks = static_cast<double>(std::max<int64_t>(1, layout.num_gpus()));
    const double peak = ceil.peak_flops_per_s * ranks, bw = ceil.mem_bw_bytes_per_s * ranks;
    json phases = json::object();
    for (const auto& [ph, w] : c.per_phase) {
        auto it = phase_stats.find(ph);
        phases[std::string(phase_name(ph))] =
            phase_roofline(w, it == phase_stats.end() ? 0.0 : it->second.mean_us, bw, peak);
    }
    json r = {{"source", "counted"},
              {"times_source", times_source},
              {"precision", basis.precision.describe() + " (" + basis.backend + ")"},
              {"weight_elem_bytes", basis.precision.dense_weight_bytes()},
              {"act_elem_bytes", basis.precision.act_bytes()},
              {"mla_form", to_string(basis.mla_form)},
              {"basis",
               "model/phase_work.hpp: FLOPs (2 per multiply-add) and bytes (weights touched once per step + "
               "activations) per phase, summed over the layers run; MoE phases at each measured step's "
               "tokens per expert, averaged over the steps"},
              {"peak_flops_per_s", rate_or_null(ceil.peak_flops_per_s)},
              {"mem_bw_bytes_per_s", rate_or_null(ceil.mem_bw_bytes_per_s)},
              {"ranks", static_cast<int64_t>(ranks)},
              {"ceiling_source", ceil.source.empty() ? json(nullptr) : json(ceil.source)},
              {keys::kPhases, phases}};
    if (!ceil.note.empty()) r["ceiling_note"] = ceil.note;
    if (!ceil.detail.empty()) r["ceiling_detail"] = ceil.detail;
    if (!(peak > 0 && bw > 0))
        r["floor_unavailable"] = fmt::format("no ceilings: give {} PROFILE (datasheet) or {} (cpu, cuda)",
                                             flag_of("hardware"), flag_of("measure_ceilings"));
    if (!c.block_phases.empty())
        r[keys::kMoeBlock] = moe_block_roofline(c, static_cast<int64_t>(moe.size()), bw, peak, times_source);
    return r;
}

}  // namespace moebench
