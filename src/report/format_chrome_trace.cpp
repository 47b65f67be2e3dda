// SPDX-License-Identifier: Apache-2.0
// Chrome trace view (chrome://tracing, Perfetto): per point one process; per rank a compute track and, with expert
// parallelism, a communication track. A multi-process run (its `ranks.timeline`): the last measured step as each
// rank recorded it, at its real start times. Otherwise a slice per phase per layer of one representative step built
// from the per-layer phase means laid end to end (not a recorded timeline: args say so).
#include "core/phase.hpp"

#include "common/flag_names.hpp"
#include "core/report_keys.hpp"
#include "report/formats.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace moebench {

using namespace formats_detail;

namespace {

// A link-bound phase (the phase table's bound) goes on the rank's communication track.
bool is_comm_phase(const std::string& ph) {
    const auto p = phase_from_name(ph);
    return p && is_link_bound(*p);
}

bool runs_per_layer(const std::string& ph) {
    const auto p = phase_from_name(ph);
    return p && phase_info(*p).scope == PhaseScope::layer;
}

void name_tracks(json& events, int pid, int64_t rank, const std::string& host) {
    const std::string where = host.empty() ? "" : " (" + host + ")";
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", pid},
                      {"tid", static_cast<int>(rank * 2)},
                      {"args", {{"name", fmt::format("rank {}{} compute", rank, where)}}}});
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", pid},
                      {"tid", static_cast<int>(rank * 2 + 1)},
                      {"args", {{"name", fmt::format("rank {}{} all-to-all", rank, where)}}}});
}

// One track pair per rank from the recorded timeline of a multi-process run.
void timeline_slices(json& events, int pid, const json& timeline) {
    for (const json& r : timeline.at("ranks")) {
        const int64_t rank = r.value("rank", int64_t{0});
        name_tracks(events, pid, rank, r.value("host", std::string()));
        for (const json& p : r.at("phases")) {
            const std::string ph = p.at(0).get<std::string>();
            const double ts = p.at(2).get<double>(), dur = p.at(3).get<double>();
            if (!(dur > 0) || !phase_from_name(ph)) continue;
            json args = {{"dur_us", dur}, {"source", "measured"}, {"basis", "recorded: the last measured step"}};
            if (p.at(1).get<int64_t>() >= 0) args["layer"] = p.at(1);
            events.push_back({{"ph", "X"},
                              {"name", ph},
                              {"cat", std::string(phase_group_name(ph))},
                              {"pid", pid},
                              {"tid", static_cast<int>(rank * 2 + (is_comm_phase(ph) ? 1 : 0))},
                              {"ts", ts},
                              {"dur", dur},
                              {"args", args}});
        }
    }
}

}  // namespace

namespace formats_detail {

std::string render_chrome_trace(const json& report) {
    json events = json::array();
    const json& runs = report.at(keys::kRuns);
    int pid = 0;
    for (size_t i = 0; i < runs.size(); ++i) {
        const json& r = runs[i];
        if (!run_ok(r) || run_phases(r).empty()) continue;
        ++pid;
        const std::string source = str_at(r, {keys::kLatency, "source"}, "measured");
        int64_t ranks = std::max<int64_t>(1, static_cast<int64_t>(num_at(r, {keys::kAxes, "ep"}, 1)));
        events.push_back({{"ph", "M"},
                          {"name", "process_name"},
                          {"pid", pid},
                          {"tid", 0},
                          {"args", {{"name", fmt::format("point {}: {}", i, run_label(r))}}}});
        events.push_back(
            {{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid}, {"tid", 0}, {"args", {{"sort_index", pid}}}});
        if (const json* tl = find_path(r, {"ranks", "timeline"}); tl && tl->is_object() && tl->contains("ranks")) {
            timeline_slices(events, pid, *tl);
            continue;
        }
        bool has_comm = false;
        for (const auto& ph : run_phases(r)) has_comm = has_comm || is_comm_phase(ph);
        // The report holds one set of per-layer means (rank 0's view when ep > 1); every rank gets the same step.
        for (int64_t rank = 0; rank < ranks; ++rank) {
            int compute_tid = static_cast<int>(rank * 2), comm_tid = static_cast<int>(rank * 2 + 1);
            events.push_back({{"ph", "M"},
                              {"name", "thread_name"},
                              {"pid", pid},
                              {"tid", compute_tid},
                              {"args", {{"name", fmt::format("rank {} compute", rank)}}}});
            if (has_comm)
                events.push_back({{"ph", "M"},
                                  {"name", "thread_name"},
                                  {"pid", pid},
                                  {"tid", comm_tid},
                                  {"args", {{"name", fmt::format("rank {} all-to-all", rank)}}}});
            double ts = 0;
            auto slice = [&](const std::string& ph, double dur, const json& layer) {
                if (!(dur > 0)) return;
                int tid = is_comm_phase(ph) ? comm_tid : compute_tid;
                std::string group(phase_group_name(ph));
                json args = {
                    {keys::kMeanUs, dur}, {"source", source}, {"basis", "per-layer phase mean, laid end to end"}};
                if (!layer.is_null()) args["layer"] = layer;
                events.push_back({{"ph", "X"},
                                  {"name", ph},
                                  {"cat", group},
                                  {"pid", pid},
                                  {"tid", tid},
                                  {"ts", ts},
                                  {"dur", dur},
                                  {"args", args}});
                ts += dur;
            };
            // The once-per-step phases (embed; final_norm, lm_head) before and after the layers, as the engine runs
            // them.
            auto step_slices = [&](PhaseScope scope) {
                for (const PhaseInfo& row : kPhaseTable) {
                    const std::string ph(row.name);
                    if (row.scope != scope) continue;
                    if (const json* p = find_path(r, {keys::kLatency, keys::kPhases, ph.c_str(), keys::kMeanUs}))
                        slice(ph, p->get<double>(), nullptr);
                }
            };
            step_slices(PhaseScope::before_layers);
            const json* per_layer = find_path(r, {keys::kLatency, keys::kPerLayer});
            if (per_layer && per_layer->is_array() && !per_layer->empty()) {
                for (const auto& l : *per_layer) {
                    const json* lp = find_path(l, {keys::kPhases});
                    if (!lp || !lp->is_object()) continue;
                    for (auto name : kPhaseNames) {  // the engine's execution order follows the vocabulary
                        std::string ph(name);
                        if (!runs_per_layer(ph)) continue;
                        if (const json* m = find_path(*lp, {ph.c_str(), keys::kMeanUs}); m && m->is_number())
                            slice(ph, m->get<double>(), l.value("layer", json()));
                    }
                }
            } else {
                // No per-layer breakdown: one slice per phase with its per-step mean.
                for (const auto& ph : run_phases(r))
                    if (runs_per_layer(ph))
                        slice(ph, num_at(r, {keys::kLatency, keys::kPhases, ph.c_str(), keys::kMeanUs}), nullptr);
            }
            step_slices(PhaseScope::after_layers);
        }
    }
    json doc = {{"traceEvents", events},
                {"displayTimeUnit", "ms"},
                {"otherData",
                 {{"generator", "moebench report " + flag_of("format") + " trace"},
                  {"command", str_at(report, {"command"})},
                  {"note", "one representative step per point: per-layer phase means (" + times_source(runs) +
                               ") laid end to end"}}}};
    return doc.dump(1) + "\n";
}

}  // namespace formats_detail

}  // namespace moebench
