// SPDX-License-Identifier: Apache-2.0
#include "metrics/latency.hpp"

#include "common/flag_names.hpp"
#include "core/report_keys.hpp"

namespace moebench {

namespace {

std::string layer_kind(const ModelConfig& m, int64_t layer) { return m.is_moe_layer(layer) ? "moe" : "dense"; }

// Per phase (ordered by the phase vocabulary): each step's sum over the layers run.
std::map<Phase, TimingStats> phase_stats_of(const std::vector<PhaseEntry>& plan, const std::vector<StepTimes>& steps) {
    std::map<Phase, std::vector<double>> per_phase;
    for (const PhaseEntry& e : plan) per_phase[e.phase].assign(steps.size(), 0.0);
    for (size_t i = 0; i < steps.size(); ++i)
        for (size_t p = 0; p < plan.size(); ++p) per_phase[plan[p].phase][i] += steps[i].phase_us[p];
    std::map<Phase, TimingStats> stats;
    for (const auto& [ph, samples] : per_phase) stats[ph] = summarize(samples);
    return stats;
}

// The phases with their share of the phase sum, and the phase groups ("dispatch is 35% of latency").
void phase_and_group_blocks(const std::map<Phase, TimingStats>& stats, double phase_sum_us, json& phases,
                            json& groups) {
    phases = json::object();
    std::map<std::string, double> group_us;
    std::vector<std::string> group_order;
    for (const auto& [ph, st] : stats) {
        json p = to_json(st);
        p["share"] = phase_sum_us > 0 ? st.mean_us / phase_sum_us : 0.0;
        phases[std::string(phase_name(ph))] = p;
        std::string g(phase_group_name(phase_group(ph)));
        if (!group_us.count(g)) group_order.push_back(g);
        group_us[g] += st.mean_us;
    }
    groups = json::object();
    for (const std::string& g : group_order)
        groups[g] = {{keys::kMeanUs, group_us[g]}, {"share", phase_sum_us > 0 ? group_us[g] / phase_sum_us : 0.0}};
}

// Per layer: the mean of each phase of that layer and the layer's total (one pass over the plan); `totals_by_kind`
// collects the totals. Without `detail` only the totals are made (no JSON, no percentiles).
json per_layer_block(const ModelConfig& model, const std::vector<int64_t>& layers, const std::vector<PhaseEntry>& plan,
                     const std::vector<StepTimes>& steps, std::map<std::string, std::vector<double>>& totals_by_kind,
                     bool detail) {
    std::vector<json> phases(detail ? layers.size() : 0, json::object());
    std::vector<double> totals(layers.size(), 0.0);
    std::vector<double> samples(steps.size());
    for (size_t p = 0; p < plan.size(); ++p) {
        const int64_t s = plan[p].slot;
        if (s < 0 || s >= static_cast<int64_t>(layers.size())) continue;
        double mean = 0;
        for (size_t i = 0; i < steps.size(); ++i) mean += samples[i] = steps[i].phase_us[p];
        mean = steps.empty() ? 0.0 : mean / static_cast<double>(steps.size());
        totals[static_cast<size_t>(s)] += mean;
        if (!detail) continue;
        const TimingStats st = summarize(samples);
        phases[static_cast<size_t>(s)][std::string(phase_name(plan[p].phase))] = {{keys::kMeanUs, st.mean_us},
                                                                                  {keys::kP50Us, st.p50_us}};
    }
    json per_layer = json::array();
    for (size_t s = 0; s < layers.size(); ++s) {
        std::string kind = layer_kind(model, layers[s]);
        totals_by_kind[kind].push_back(totals[s]);
        if (detail)
            per_layer.push_back(
                {{"layer", layers[s]}, {"kind", kind}, {keys::kMeanUs, totals[s]}, {keys::kPhases, phases[s]}});
    }
    return per_layer;
}

// Whole model: once-per-step phases + the mean layer of each kind times the model's count of that kind.
json whole_model_block(const ModelConfig& model, int64_t num_run, const std::vector<PhaseEntry>& plan,
                       const std::map<Phase, TimingStats>& stats,
                       const std::map<std::string, std::vector<double>>& totals_by_kind, const std::string& source,
                       bool includes_head, int64_t num_tokens) {
    const bool extrapolated = num_run != model.num_layers;
    // A figure for layers that did not run is neither measured nor modeled: it is extrapolated from those that did.
    json whole = {{"source", extrapolated ? "extrapolated" : source}, {"extrapolated", extrapolated}};
    if (extrapolated) whole["extrapolated_from"] = source;
    double step_us = 0;
    for (const PhaseEntry& e : plan)
        if (e.slot < 0) step_us += stats.at(e.phase).mean_us;
    const std::map<std::string, int64_t> model_counts = {{"moe", model.num_moe_layers()},
                                                         {"dense", model.num_dense_layers()}};
    json method = json::object();
    for (const auto& [kind, count] : model_counts) {
        if (count == 0) continue;
        auto it = totals_by_kind.find(kind);
        if (it == totals_by_kind.end()) {
            whole["unavailable"] = "no " + kind + " layer was run; use more " + flag_of("layers");
            return whole;
        }
        double mean = 0;
        for (double v : it->second) mean += v;
        mean /= static_cast<double>(it->second.size());
        step_us += mean * static_cast<double>(count);
        method[kind] = {{"layers_run", it->second.size()}, {"layer_mean_us", mean}, {"model_layers", count}};
    }
    whole[keys::kStepUs] = step_us;
    whole[keys::kTokensPerS] = step_us > 0 ? static_cast<double>(num_tokens) / (step_us * 1e-6) : 0.0;
    whole["method"] = extrapolated ? "once-per-step phases + mean layer time of each kind x the model's count"
                                   : "sum of phase means over all layers";
    whole["per_kind"] = method;
    whole["includes_embed_and_head"] = includes_head;
    return whole;
}

}  // namespace

Latency derive_latency(const ModelConfig& model, const std::vector<int64_t>& layers,
                       const std::vector<PhaseEntry>& plan, const std::vector<StepTimes>& steps,
                       const std::string& times_source, bool includes_head, int64_t num_tokens, bool per_layer) {
    Latency out;
    out.phase_stats = phase_stats_of(plan, steps);
    double phase_sum_us = 0;
    for (const auto& [ph, st] : out.phase_stats) phase_sum_us += st.mean_us;
    json phases, groups;
    phase_and_group_blocks(out.phase_stats, phase_sum_us, phases, groups);
    std::map<std::string, std::vector<double>> totals_by_kind;
    json layer_block = per_layer_block(model, layers, plan, steps, totals_by_kind, per_layer);
    json whole = whole_model_block(model, static_cast<int64_t>(layers.size()), plan, out.phase_stats, totals_by_kind,
                                   times_source, includes_head, num_tokens);

    // The step: the host clock around the whole step when the phases are measured; for a modeled backend (sim)
    // the host time means nothing, so the step is the sum of its modeled phases.
    const bool measured = times_source == "measured";
    std::vector<double> step_samples(steps.size());
    for (size_t i = 0; i < steps.size(); ++i) {
        double sum = 0;
        for (double v : steps[i].phase_us) sum += v;
        step_samples[i] = measured ? steps[i].wall_us : sum;
    }
    out.step = summarize(step_samples);
    out.block = {{"source", times_source},
                 {keys::kStep, to_json(out.step)},
                 {"step_clock", measured ? "host steady_clock around begin_step..end_step"
                                         : "sum of the modeled phases (" + times_source + ")"},
                 {"phase_sum_us", phase_sum_us},
                 {"step_minus_phase_sum_us", out.step.mean_us - phase_sum_us},
                 {keys::kPhases, phases},
                 {"groups", groups},
                 {"step_samples_us", step_samples},
                 {keys::kWholeModel, whole}};
    if (per_layer) out.block[keys::kPerLayer] = std::move(layer_block);
    return out;
}

}  // namespace moebench
