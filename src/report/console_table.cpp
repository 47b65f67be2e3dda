// SPDX-License-Identifier: Apache-2.0
// Terminal summary of one run record; reads only the report JSON, so any report (run or sweep point) can be shown.
#include "report/console_table.hpp"

#include "common/flag_names.hpp"
#include "core/report_keys.hpp"

#include "core/phase.hpp"
#include "metrics/timing_stats.hpp"

#include <fmt/format.h>

namespace moebench {

static double num(const json& j, const char* key, double dflt = 0) {
    return j.is_object() && j.contains(key) && j.at(key).is_number() ? j.at(key).get<double>() : dflt;
}

static std::string str(const json& j, const char* key, const std::string& dflt = "") {
    return j.is_object() && j.contains(key) && j.at(key).is_string() ? j.at(key).get<std::string>() : dflt;
}

// true only for a present boolean true (null means "unknown" in the conditions block).
static bool is_true(const json& j, const char* key) {
    return j.is_object() && j.contains(key) && j.at(key).is_boolean() && j.at(key).get<bool>();
}

// Whether the stats object flags `key` as from too few samples (metrics/timing_stats.hpp).
static bool low_confidence(const json& stats, const std::string& key) {
    if (!stats.is_object() || !stats.contains(keys::kLowConfidence) || !stats.at(keys::kLowConfidence).is_array())
        return false;
    for (const json& k : stats.at(keys::kLowConfidence))
        if (k.is_string() && k.get<std::string>() == key) return true;
    return false;
}

// p95 with a "~" in front when too few samples support it.
static std::string p95_cell(const json& stats) {
    return fmt::format("{}{:.1f}", low_confidence(stats, keys::kP95Us) ? "~" : "", num(stats, keys::kP95Us));
}

// Energy per token: the device's counter where the backend has one, else the host's RAPL packages.
static std::string energy_line(const json& conditions) {
    std::string out;
    for (const char* where : {"device", "host"}) {
        const json& block = conditions.value(where, json::object());
        if (!block.is_object() || !block.contains("energy")) continue;
        const json& e = block.at("energy");
        if (e.contains("joules_per_token"))
            return fmt::format("energy: {:.4g} J/token, {:.4g} J over the measured steps ({}, {}: {})\n",
                               num(e, "joules_per_token"), num(e, "joules"), where, str(e, "source", "counter"),
                               str(e, "scope"));
        if (out.empty()) out = fmt::format("energy: not available ({})\n", str(e, "reason", "no counter"));
    }
    return out;
}

namespace {

// What ran, and how often.
void summary_header(const json& run, std::string& s) {
    const json& layers = run.value("layers", json::object());
    int64_t num_run = layers.contains("run") ? static_cast<int64_t>(layers.at("run").size()) : 0;
    s += fmt::format("moebench run: {}  {}  batch {}  seq_len {}  context {}  layers {} of {}  backend {}\n",
                     str(run, "model", "?"), str(run, "mode", "?"), num(run, "batch"), num(run, "seq_len"),
                     num(run, "context"), num_run, num(layers, "model_total"), str(run, "backend", "?"));
    const json& it = run.value(keys::kIterations, json::object());
    // A modeled run (sim) measured nothing: its steps are counted as what they are.
    const std::string steps =
        it.contains("modeled")
            ? fmt::format("{} modeled step{}, none measured", num(it, "modeled"), num(it, "modeled") == 1 ? "" : "s")
            : fmt::format("{} measured", num(it, "measured"));
    s += fmt::format("iterations: {} warm-up + {} (stop: {}); routing: {}\n", num(it, "warmup"), steps,
                     str(it, "stop_reason", "?"), str(run.value("routing", json::object()), "workload", "?"));
}

// Per phase in execution order, the step, the conditions, and per layer.
void summary_latency(const json& run, std::string& s) {
    const json& it = run.value(keys::kIterations, json::object());
    const json& lat = run.value(keys::kLatency, json::object());
    s += fmt::format("\n{:<18} {:>11} {:>11} {:>12} {:>7}   ({} per step, all layers run)\n", "phase", keys::kMeanUs,
                     keys::kP50Us, keys::kP95Us, "share", str(lat, "source", "?"));
    if (lat.contains(keys::kPhases)) {
        // Execution order (the phase vocabulary), not the JSON object's alphabetical order.
        const json& phases = lat.at(keys::kPhases);
        for (std::string_view name_view : kPhaseNames) {
            std::string name(name_view);
            if (!phases.contains(name)) continue;
            const json& p = phases.at(name);
            s += fmt::format("{:<18} {:>11.1f} {:>11.1f} {:>12} {:>6.1f}%\n", name, num(p, keys::kMeanUs),
                             num(p, keys::kP50Us), p95_cell(p), 100.0 * num(p, "share"));
        }
    }
    const json& step = lat.value(keys::kStep, json::object());
    s += fmt::format("{:<18} {:>11.1f}\n", "sum of phases", num(lat, "phase_sum_us"));
    s += fmt::format("{:<18} {:>11.1f} {:>11.1f} {:>12}   cv {:.3f}  ({})\n", keys::kStep, num(step, keys::kMeanUs),
                     num(step, keys::kP50Us), p95_cell(step), num(step, "cv"), str(lat, "step_clock", "end to end"));
    if (low_confidence(step, keys::kP95Us))
        s += fmt::format("(~: p95 from {} samples is next to the maximum; run >= {} iterations for a p95 to trust)\n",
                         num(it, it.contains("modeled") ? "modeled" : "measured"), kMinSamplesP95);
    if (const json& c = run.value(keys::kConditions, json::object()).value("host", json::object());
        is_true(c, "contended") || is_true(c, "throttled"))
        s += fmt::format("warning: the host was not quiet while measuring: {}\n", str(c, "note"));
    if (const json& d = run.value(keys::kConditions, json::object()).value("device", json::object());
        is_true(d, "throttled"))
        s += fmt::format("warning: the device throttled while measuring: {}\n", str(d, "note"));

    if (lat.contains(keys::kPerLayer) && !lat.at(keys::kPerLayer).empty()) {
        s += "per layer (mean_us):";
        for (const json& l : lat.at(keys::kPerLayer))
            s += fmt::format(" L{} {} {:.1f}", num(l, "layer"), str(l, "kind", "?"), num(l, keys::kMeanUs));
        s += "\n";
    }
}

// Throughput, energy, and the whole model extrapolated from the layers run.
void summary_throughput(const json& run, std::string& s) {
    const json& lat = run.value(keys::kLatency, json::object());
    const json& thr = run.value(keys::kThroughput, json::object());
    s += fmt::format("\ntokens/s: {:.1f} ({}; {} tokens per step, the layers run)\n", num(thr, keys::kTokensPerS),
                     str(thr, "source", "?"), num(run, "num_tokens"));
    s += energy_line(run.value(keys::kConditions, json::object()));
    const json& whole = lat.value(keys::kWholeModel, json::object());
    if (whole.contains(keys::kStepUs) && whole.at(keys::kStepUs).is_number()) {
        // An extrapolation is not a measurement: say what it was derived from instead of "(measured)".
        const bool extrapolated = whole.value("extrapolated", false);
        s += fmt::format("whole model: step {:.1f} us, {:.1f} tokens/s ({})\n", num(whole, keys::kStepUs),
                         num(whole, keys::kTokensPerS),
                         extrapolated ? "extrapolated from the " + str(lat, "source", "?") + " layers run"
                                      // not the step clock above: say how it differs (e.g. slowest rank per phase)
                                      : str(lat, "source", "?") + ": " + str(whole, "method", "?"));
    } else if (whole.contains("unavailable")) {
        s += fmt::format("whole model: not extrapolated ({})\n", str(whole, "unavailable"));
    }
}

// The MoE block against its floor, expert load, and --check.
void summary_block(const json& run, std::string& s) {
    const json& lat = run.value(keys::kLatency, json::object());
    // Roofline: the MoE block (all MoE layers run) against its floor, when the ceilings are known.
    const json& roof = run.value(keys::kRoofline, json::object());
    const json& block = roof.value(keys::kMoeBlock, json::object());
    if (block.contains(keys::kRatioToFloor) && block.at(keys::kRatioToFloor).is_number()) {
        // The block's time carries the latency's source: "modeled" on the sim backend, never called measured.
        s += fmt::format("MoE block: {:.1f} us {}, floor {:.1f} us ({}-bound, {}) -> {:.2f}x the floor\n",
                         num(block, "measured_us"), str(roof, "times_source", str(lat, "source", "?")),
                         num(block, keys::kFloorUs), str(block, "bound", "?"), str(roof, "ceiling_source", "?"),
                         num(block, keys::kRatioToFloor));
        if (block.contains("floor_warning")) s += fmt::format("warning: {}\n", str(block, "floor_warning"));
    } else if (!block.empty()) {
        s += fmt::format("MoE block floor: not available (no ceilings: use {} PROFILE or {})\n", flag_of("hardware"),
                         flag_of("measure_ceilings"));
    }

    const json& load = run.value(keys::kExpertLoad, json::object());
    if (load.contains(keys::kPerLayer) && !load.at(keys::kPerLayer).empty()) {
        s += fmt::format("expert load max/mean ({}):", str(load, "source", "counted"));
        for (const json& l : load.at(keys::kPerLayer)) {
            s += fmt::format(" L{} {:.2f}", num(l, "layer"), num(l, keys::kMaxOverMean));
            if (num(l, "dropped") > 0) s += fmt::format(" ({} dropped)", num(l, "dropped"));
        }
        s += "\n";
    }
    if (run.contains("check") && run.at("check").is_object()) {
        const json& c = run.at("check");
        s += fmt::format(
            "check (layer {}, {} tokens): {}  rel L2 {:.3g} (tolerance {:.0e}), ids mismatched {}, "
            "near-ties {}\n",
            num(c, "layer"), num(c, "tokens"), c.value("passed", false) ? "PASSED" : "FAILED",
            num(c, "rel_l2_error", -1), num(c, "tolerance"), num(c, "ids_mismatched"), num(c, "ids_near_tie"));
    }
}

}  // namespace

std::string console_summary(const json& run) {
    if (str(run, keys::kStatus, "ok") != "ok") {
        return fmt::format("run {}: {}\n", str(run, keys::kStatus),
                           str(run, "skip_reason", str(run, "error", "no reason given")));
    }
    std::string s;
    summary_header(run, s);
    summary_latency(run, s);
    summary_throughput(run, s);
    summary_block(run, s);
    return s;
}

}  // namespace moebench
