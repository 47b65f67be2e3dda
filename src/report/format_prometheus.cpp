// SPDX-License-Identifier: Apache-2.0
// Prometheus text exposition (format 0.0.4) of a report: expert activations (counter), per-phase latency (summary),
// step latency (histogram of the measured step samples), throughput and load-imbalance gauges. Every family has
// its HELP and TYPE lines and its samples together.
#include "core/report_keys.hpp"
#include "report/formats.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace moebench {

using namespace formats_detail;

namespace {

std::string label_escape(const std::string& s) {
    std::string o;
    for (char c : s) {
        if (c == '\\')
            o += "\\\\";
        else if (c == '"')
            o += "\\\"";
        else if (c == '\n')
            o += "\\n";
        else
            o += c;
    }
    return o;
}

std::string value_text(double v) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
    return fmt::format("{}", v);
}

// Labels that identify a point: its index and axes.
std::string point_labels(size_t index, const json& run) {
    std::string s = fmt::format("point=\"{}\"", index);
    for (const char* k : {"backend", "mode", "batch", "seq_len", "context", "routing", "ep"}) {
        const json* v = find_path(run, {keys::kAxes, k});
        if (!v) v = find_path(run, {k});
        if (v) s += fmt::format(",{}=\"{}\"", k, label_escape(scalar_text(*v)));
    }
    std::string model = run.contains("model") ? scalar_text(run["model"]) : "";
    if (!model.empty()) s += fmt::format(",model=\"{}\"", label_escape(model));
    return s;
}

// Collects the samples of each family so that they are written together, after HELP and TYPE.
struct Family {
    std::string help, type;
    std::vector<std::string> lines;
};

}  // namespace

namespace formats_detail {

namespace {

// The metric families in order of first appearance, each with its samples.
struct Families {
    std::vector<std::string> order;
    std::map<std::string, Family> fam;
    void operator()(const std::string& name, const std::string& type, const std::string& help,
                    const std::string& sample_name, const std::string& labels, double v) {
        if (!fam.count(name)) {
            order.push_back(name);
            fam[name] = Family{help, type, {}};
        }
        fam[name].lines.push_back(fmt::format("{}{{{}}} {}", sample_name, labels, value_text(v)));
    }
    std::string text() const {
        std::string out;
        for (const auto& name : order) {
            const Family& f = fam.at(name);
            out += "# HELP " + name + " " + f.help + "\n# TYPE " + name + " " + f.type + "\n";
            for (const auto& l : f.lines) out += l + "\n";
        }
        return out;
    }
};

void add_phase_summaries(const json& r, const std::string& pl, Families& add) {
    // Per-phase latency: a summary from the recorded quantiles (the report keeps quantiles, not samples).
    // The steps behind the quantiles: measured, or modeled (sim).
    double n = num_at(r, {keys::kIterations, find_path(r, {keys::kIterations, "modeled"}) ? "modeled" : "measured"}, 0);
    for (const auto& ph : run_phases(r)) {
        const json& p = r[keys::kLatency][keys::kPhases][ph];
        std::string l = pl + fmt::format(",phase=\"{}\"", ph);
        const char* fname = "moebench_phase_latency_seconds";
        const char* help =
            "Per-step latency of each phase summed over the layers run (label source: measured, or "
            "modeled by the sim backend), quantiles over the steps.";
        for (auto [q, key] : {std::pair{"0.5", keys::kP50Us}, {"0.95", keys::kP95Us}, {"0.99", keys::kP99Us}})
            add(fname, "summary", help, fname, l + fmt::format(",quantile=\"{}\"", q), num_at(p, {key}) * 1e-6);
        add(fname, "summary", help, std::string(fname) + "_sum", l, num_at(p, {keys::kMeanUs}) * 1e-6 * n);
        add(fname, "summary", help, std::string(fname) + "_count", l, n);
    }
}

void add_step_histogram(const json& r, const std::string& pl, Families& add) {
    // Step latency: a real histogram of the measured step samples.
    if (const json* samples = find_path(r, {keys::kLatency, "step_samples_us"});
        samples && samples->is_array() && !samples->empty()) {
        std::vector<double> s;
        for (const auto& v : *samples)
            if (v.is_number()) s.push_back(v.get<double>() * 1e-6);
        std::sort(s.begin(), s.end());
        // Buckets: powers of two from just below the fastest sample to above the slowest.
        double lo = std::pow(2.0, std::floor(std::log2(std::max(s.front(), 1e-9)))), hi = s.back();
        const char* fname = "moebench_step_latency_seconds";
        const char* help =
            "End-to-end step latency of the layers run (label source: measured, or modeled by the sim "
            "backend), histogram of the steps.";
        double sum = 0;
        for (double v : s) sum += v;
        for (double le = lo;; le *= 2) {
            size_t c = static_cast<size_t>(std::upper_bound(s.begin(), s.end(), le) - s.begin());
            add(fname, "histogram", help, std::string(fname) + "_bucket",
                pl + fmt::format(",le=\"{}\"", value_text(le)), static_cast<double>(c));
            if (le >= hi) break;
        }
        add(fname, "histogram", help, std::string(fname) + "_bucket", pl + ",le=\"+Inf\"",
            static_cast<double>(s.size()));
        add(fname, "histogram", help, std::string(fname) + "_sum", pl, sum);
        add(fname, "histogram", help, std::string(fname) + "_count", pl, static_cast<double>(s.size()));
    }
}

void add_expert_load(const json& r, const std::string& pl, Families& add) {
    // Expert load: activations (counter) and imbalance gauges per layer.
    if (const json* layers = find_path(r, {keys::kExpertLoad, keys::kPerLayer}); layers && layers->is_array())
        for (const auto& l : *layers) {
            std::string ll = pl + fmt::format(",layer=\"{}\"", scalar_text(l.value("layer", json())));
            if (const json* tpe = find_path(l, {"tokens_per_expert"}); tpe && tpe->is_array())
                for (size_t e = 0; e < tpe->size(); ++e)
                    add("moebench_expert_activations_total", "counter",
                        "Token-to-expert assignments over the measured steps (counted).",
                        "moebench_expert_activations_total", ll + fmt::format(",expert=\"{}\"", e),
                        (*tpe)[e].is_number() ? (*tpe)[e].get<double>() : 0.0);
            for (auto [key, name, help] :
                 {std::tuple{keys::kMaxOverMean, "moebench_expert_load_max_over_mean",
                             "Load imbalance: busiest expert's tokens over the mean (counted)."},
                  {"cv", "moebench_expert_load_cv", "Coefficient of variation of tokens per expert (counted)."},
                  {"gini", "moebench_expert_load_gini", "Gini coefficient of tokens per expert (counted)."},
                  {"idle_experts", "moebench_expert_idle", "Experts that received no token (counted)."},
                  {"dropped", "moebench_expert_dropped_total", "Assignments dropped by expert capacity (counted)."}})
                if (l.contains(key) && l[key].is_number())
                    add(name,
                        std::string(name).size() > 6 &&
                                std::string(name).substr(std::string(name).size() - 6) == "_total"
                            ? "counter"
                            : "gauge",
                        help, name, ll, l[key].get<double>());
        }
}

}  // namespace

std::string render_prometheus(const json& report) {
    Families add;
    const json& runs = report.at(keys::kRuns);
    for (size_t i = 0; i < runs.size(); ++i) {
        const json& r = runs[i];
        const std::string pl = point_labels(i, r);
        // The timing families say where their times came from (a sim report's are modeled).
        const std::string tl =
            pl + fmt::format(",source=\"{}\"", label_escape(str_at(r, {keys::kLatency, "source"}, "measured")));
        add("moebench_point_ok", "gauge", "1 when the point ran, 0 when it was skipped or failed.", "moebench_point_ok",
            pl + fmt::format(",status=\"{}\"", label_escape(r.value(keys::kStatus, "ok"))), run_ok(r) ? 1 : 0);
        if (!run_ok(r)) continue;
        add("moebench_throughput_tokens_per_second", "gauge",
            "Tokens per second of the step (label source: measured, or modeled by the sim backend).",
            "moebench_throughput_tokens_per_second", tl, num_at(r, {keys::kThroughput, keys::kTokensPerS}));
        if (const EnergyPerToken e = energy_per_token(r); e.available)
            add("moebench_energy_joules_per_token", "gauge",
                "Energy per token over the measured steps (counter: NVML on cuda, RAPL packages on cpu).",
                "moebench_energy_joules_per_token", pl + fmt::format(",scope=\"{}\"", label_escape(e.where)),
                e.joules_per_token);
        if (const std::string c = tri_state(r, {keys::kConditions, "host", "contended"}); !c.empty())
            add("moebench_host_contended", "gauge",
                "1 when steal or other processes' CPU time was above the thresholds while measuring (counter).",
                "moebench_host_contended", pl, c == "yes" ? 1 : 0);
        add_phase_summaries(r, tl, add);
        add_step_histogram(r, tl, add);
        add_expert_load(r, pl, add);
    }
    return add.text();
}

}  // namespace formats_detail

}  // namespace moebench
