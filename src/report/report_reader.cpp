// SPDX-License-Identifier: Apache-2.0
// The strict report reader: one pass over the document that checks every field the views and compare read, by JSON
// path, and types what compare needs. Which fields are required follows docs/report-schema.md: what every report of
// `moebench run` or `sweep` holds for an ok point; blocks a backend may leave out (expert_load, roofline, per_layer)
// are checked only when present.
#include "report/report_reader.hpp"
#include "core/report_keys.hpp"

#include "config/run_config.hpp"
#include "common/error.hpp"
#include "common/read_file.hpp"
#include "core/phase.hpp"
#include "report/report_json.hpp"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace moebench {

namespace {

const char* kFix = "pass a report written by moebench run or sweep, unedited";

std::string key_path(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }
std::string index_path(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

// Every check names the file and the JSON path of the field; `what` says what it must be.
class Checker {
public:
    explicit Checker(std::string file) : file_(std::move(file)) {}

    [[noreturn]] void fail(const std::string& path, const std::string& what, const json* got = nullptr) const {
        config_error(file_ + ": " + path, what, got ? json_brief(*got) : "", kFix);
    }
    [[noreturn]] void wrong_type(const std::string& path, const std::string& want, const json& got) const {
        fail(path, "unexpected type: must be " + want, &got);
    }

    // Present (null counts as present: it is then the wrong type), else the "required field is missing" error.
    const json& req(const json& obj, const std::string& key, const std::string& path) const {
        auto it = obj.find(key);
        if (it == obj.end()) fail(key_path(path, key), "required field is missing");
        return *it;
    }
    // Present and not null, else nullptr.
    static const json* opt(const json& obj, const std::string& key) {
        auto it = obj.find(key);
        return it == obj.end() || it->is_null() ? nullptr : &*it;
    }

    const json& object(const json& v, const std::string& path) const {
        if (!v.is_object()) wrong_type(path, "an object", v);
        return v;
    }
    const json& array(const json& v, const std::string& path) const {
        if (!v.is_array()) wrong_type(path, "an array", v);
        return v;
    }
    std::string string(const json& v, const std::string& path) const {
        if (!v.is_string()) wrong_type(path, "a string", v);
        return v.get<std::string>();
    }
    double number(const json& v, const std::string& path, bool non_negative = false) const {
        if (!v.is_number()) wrong_type(path, "a number", v);
        double d = v.get<double>();
        if (non_negative && d < 0) fail(path, "must not be negative", &v);
        return d;
    }
    int64_t integer(const json& v, const std::string& path) const {
        double d = number(v, path);
        if (std::floor(d) != d || std::fabs(d) > 9e15) wrong_type(path, "a whole number", v);
        return static_cast<int64_t>(d);
    }

    double req_number(const json& obj, const std::string& key, const std::string& path, bool non_negative = false) const {
        return number(req(obj, key, path), key_path(path, key), non_negative);
    }
    std::optional<double> opt_number(const json& obj, const std::string& key, const std::string& path) const {
        const json* v = opt(obj, key);
        return v ? std::optional<double>(number(*v, key_path(path, key))) : std::nullopt;
    }
    std::string opt_string(const json& obj, const std::string& key, const std::string& path) const {
        const json* v = opt(obj, key);
        return v ? string(*v, key_path(path, key)) : std::string();
    }
    const json* opt_object(const json& obj, const std::string& key, const std::string& path) const {
        const json* v = opt(obj, key);
        return v ? &object(*v, key_path(path, key)) : nullptr;
    }
    const json* opt_array(const json& obj, const std::string& key, const std::string& path) const {
        const json* v = opt(obj, key);
        return v ? &array(*v, key_path(path, key)) : nullptr;
    }
    void opt_numbers(const json& obj, const std::string& key, const std::string& path) const {
        const json* a = opt_array(obj, key, path);
        for (size_t i = 0; a && i < a->size(); ++i) number((*a)[i], index_path(key_path(path, key), i));
    }
    void opt_matrix(const json& obj, const std::string& key, const std::string& path) const {
        const json* m = opt_array(obj, key, path);
        for (size_t i = 0; m && i < m->size(); ++i) {
            const std::string row = index_path(key_path(path, key), i);
            const json& r = array((*m)[i], row);
            for (size_t j = 0; j < r.size(); ++j) number(r[j], index_path(row, j));
        }
    }

    ReadStats stats(const json& obj, const std::string& path) const {
        object(obj, path);
        ReadStats s;
        s.mean_us = req_number(obj, keys::kMeanUs, path, true);
        s.p50_us = req_number(obj, keys::kP50Us, path, true);
        s.p95_us = req_number(obj, keys::kP95Us, path, true);
        s.p99_us = req_number(obj, keys::kP99Us, path, true);
        s.min_us = req_number(obj, "min_us", path, true);
        s.max_us = req_number(obj, "max_us", path, true);
        s.stdev_us = req_number(obj, "stdev_us", path, true);
        s.cv = req_number(obj, "cv", path, true);
        return s;
    }

    const std::string& file() const { return file_; }

private:
    std::string file_;
};

std::string scalar_text(const json& v) {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_number()) {
        double d = v.get<double>();
        if (std::floor(d) == d && std::fabs(d) < 9e15) return std::to_string(static_cast<int64_t>(d));
        return fmt::format("{}", d);
    }
    return v.dump();
}

// Top level, except runs[]: what the headers of the views print and what compare warns about.
void check_header(const Checker& c, const json& doc, ReadReport& out) {
    c.object(doc, "<root>");
    const json& schema = c.req(doc, "schema", "");
    if (c.string(schema, "schema") != kReportSchema)
        c.fail("schema", std::string("is not a moebench report schema this version reads (expected ") + kReportSchema + ")",
               &schema);
    c.array(c.req(doc, keys::kRuns, ""), keys::kRuns);
    c.opt_string(doc, "command", "");
    c.opt_string(doc, "created_utc", "");
    if (const json* tool = c.opt_object(doc, "tool", ""))
        for (const char* k : {"name", "version", "git_rev", "build_type"})
            if (std::string v = c.opt_string(*tool, k, "tool"); !v.empty()) out.environment[std::string("tool.") + k] = v;
    if (const json* env = c.opt_object(doc, "environment", "")) {
        for (const char* k : {"host", "cpu_model", "blas", "backend", "backend_note"})
            if (std::string v = c.opt_string(*env, k, "environment"); !v.empty())
                out.environment[std::string("environment.") + k] = v;
        for (const char* k : {"num_cpus", "threads", "memory_bytes"})
            if (c.opt_number(*env, k, "environment")) out.environment[std::string("environment.") + k] = scalar_text(env->at(k));
        if (const json* ceil = c.opt_object(*env, "ceilings", "environment")) {
            c.opt_number(*ceil, "flops_per_s", "environment.ceilings");
            c.opt_number(*ceil, "bytes_per_s", "environment.ceilings");
        }
    }
    if (const json* config = c.opt_object(doc, "config", ""))
        if (const json* run = c.opt_object(*config, "run", "config")) {
            c.opt_string(*run, "model", "config.run");
            for (const auto& [k, v] : run->items())
                if (v.is_string() || v.is_number() || v.is_boolean()) out.environment["config.run." + k] = scalar_text(v);
        }
}

void check_sweep(const Checker& c, const json& doc, size_t num_runs) {
    const json* s = c.opt_object(doc, "sweep", "");
    if (!s) return;
    auto run_index = [&](const json& obj, const std::string& path) {
        const json* i = Checker::opt(obj, "run_index");
        if (i && (c.integer(*i, key_path(path, "run_index")) < 0 || i->get<double>() >= static_cast<double>(num_runs)))
            c.fail(key_path(path, "run_index"), fmt::format("must index runs[] (0..{})", num_runs == 0 ? 0 : num_runs - 1), i);
    };
    for (const char* k : {"stop_reason", "knee_rule", "golden_rule", "golden_reason"}) c.opt_string(*s, k, "sweep");
    c.opt_number(*s, "slo_p95_ms", "sweep");
    if (const json* g = c.opt_object(*s, "golden", "sweep")) {
        run_index(*g, "sweep.golden");
        c.opt_string(*g, "reason", "sweep.golden");
    }
    if (const json* va = c.opt_array(*s, "varying_axes", "sweep"))
        for (size_t i = 0; i < va->size(); ++i) c.string((*va)[i], index_path("sweep.varying_axes", i));
    if (const json* series = c.opt_array(*s, "series", "sweep"))
        for (size_t i = 0; i < series->size(); ++i) {
            const std::string p = index_path("sweep.series", i);
            c.object((*series)[i], p);
            c.opt_object((*series)[i], "fixed", p);
            if (const json* knee = c.opt_object((*series)[i], "knee", p)) {
                run_index(*knee, key_path(p, "knee"));
                c.opt_string(*knee, "reason", key_path(p, "knee"));
            }
        }
}

// The point's identity and description: checked for every record, whatever its status.
void check_point_fields(const Checker& c, const json& r, const std::string& p, ReadRun& run) {
    c.object(r, p);
    run.status = Checker::opt(r, keys::kStatus) ? c.string(r[keys::kStatus], key_path(p, keys::kStatus)) : "ok";
    if (run.status != "ok" && run.status != "skipped" && run.status != "failed")
        c.fail(key_path(p, keys::kStatus), "must be ok, skipped or failed", &r[keys::kStatus]);
    std::string skip = c.opt_string(r, "skip_reason", p), error = c.opt_string(r, "error", p);
    run.reason = run.status == "skipped" ? skip : run.status == "failed" ? error : "";
    run.axes = c.object(c.req(r, keys::kAxes, p), key_path(p, keys::kAxes));
    for (const auto& [k, v] : run.axes.items())
        if (!(v.is_string() || v.is_number() || v.is_boolean() || v.is_null()))
            c.wrong_type(key_path(key_path(p, keys::kAxes), k), "a string or a number", v);
    run.model = c.opt_string(r, "model", p);
    if (const json* spec = Checker::opt(run.axes, "model"); spec && spec->is_string()) run.model_spec = spec->get<std::string>();
    c.opt_string(r, "sweep_label", p);
    c.opt_object(r, "sweep_point", p);
    c.opt_string(r, "mode", p);
    c.opt_string(r, "backend", p);
    for (const char* k : {"batch", "seq_len", "context", "num_tokens"}) c.opt_number(r, k, p);
    // The shape is used as counts by the views (a trace track per rank, labels): whole numbers within what a run
    // accepts (config/run_config.hpp), in the record and in its axes. (An ep of 1e300 was undefined behaviour when
    // converted, and 1e8 ranks made the trace view loop for minutes.)
    for (const json* where : std::initializer_list<const json*>{&r, &run.axes})
        for (const auto& [k, hi] : {std::pair<const char*, int64_t>{"batch", kMaxStepTokens}, {"seq_len", kMaxStepTokens},
                                    {"num_tokens", kMaxStepTokens}, {"context", kMaxContext}, {"ep", kMaxEpSize},
                                    {"soft_topn", kMaxStepTokens}, {"layers", kMaxStepTokens}}) {
            const json* v = Checker::opt(*where, k);
            if (!v || !v->is_number()) continue;  // an axis may hold text; the record's fields were type-checked above
            const std::string path = key_path(where == &r ? p : key_path(p, keys::kAxes), k);
            const int64_t n = c.integer(*v, path);
            if (n < 0 || n > hi) c.fail(path, fmt::format("must be a whole number from 0 to {}", hi), v);
        }
    if (const json* bi = c.opt_object(r, keys::kBackendInfo, p)) {
        const std::string bp = key_path(p, keys::kBackendInfo);
        run.dtype = c.opt_string(*bi, "dtype", bp);
        if (c.opt_number(*bi, "threads", bp)) run.threads = scalar_text(bi->at("threads"));
        if (const json* hw = c.opt_object(*bi, "hardware", bp)) run.hardware = c.opt_string(*hw, "name", key_path(bp, "hardware"));
        if (const json* dev = Checker::opt(*bi, "device"); dev && dev->is_object())
            run.hardware = c.opt_string(*dev, "name", key_path(bp, "device"));
    }
    if (const json* hw = Checker::opt(run.axes, "hardware"); hw && hw->is_string()) run.hardware = hw->get<std::string>();
}

void check_expert_load(const Checker& c, const json& r, const std::string& p) {
    const json* el = c.opt_object(r, keys::kExpertLoad, p);
    if (!el) return;
    const std::string ep = key_path(p, keys::kExpertLoad);
    const json* layers = c.opt_array(*el, keys::kPerLayer, ep);
    for (size_t i = 0; layers && i < layers->size(); ++i) {
        const std::string lp = index_path(key_path(ep, keys::kPerLayer), i);
        const json& l = c.object((*layers)[i], lp);
        for (const char* k : {"layer", "num_tokens", "k", "num_experts", "num_assignments", "dropped", "mean", "max",
                              keys::kMaxOverMean, "cv", "gini", "top3_share", "idle_experts", "entropy_bits", "entropy_norm"})
            c.opt_number(l, k, lp);
        c.opt_numbers(l, "tokens_per_expert", lp);
        c.opt_numbers(l, "expert_gemm_us", lp);
        c.opt_matrix(l, "coactivation", lp);
        if (const json* w = c.opt_object(l, "windows", lp)) {
            c.opt_number(*w, "window_tokens", key_path(lp, "windows"));
            c.opt_matrix(*w, "counts", key_path(lp, "windows"));
        }
    }
}

void check_roofline(const Checker& c, const json& r, const std::string& p, ReadRun& run) {
    const json* rf = c.opt_object(r, keys::kRoofline, p);
    if (!rf) return;
    const std::string rp = key_path(p, keys::kRoofline);
    c.opt_number(*rf, "peak_flops_per_s", rp);
    c.opt_number(*rf, "mem_bw_bytes_per_s", rp);
    if (const json* prec = Checker::opt(*rf, "precision"); prec && prec->is_string() && run.dtype.empty())
        run.dtype = prec->get<std::string>();
    if (const json* phases = c.opt_object(*rf, keys::kPhases, rp))
        for (const auto& [name, ph] : phases->items()) {
            const std::string pp = key_path(key_path(rp, keys::kPhases), name);
            c.object(ph, pp);
            c.opt_number(ph, "flops", pp);
            c.opt_number(ph, "bytes", pp);
        }
}

void check_latency(const Checker& c, const json& r, const std::string& p, ReadRun& run) {
    const std::string lp = key_path(p, keys::kLatency);
    const json& lat = c.object(c.req(r, keys::kLatency, p), lp);
    run.timing_source = c.opt_string(lat, "source", lp);
    run.step = c.stats(c.req(lat, keys::kStep, lp), key_path(lp, keys::kStep));
    const json& phases = c.object(c.req(lat, keys::kPhases, lp), key_path(lp, keys::kPhases));
    for (const auto& [name, ph] : phases.items()) {
        if (!phase_from_name(name)) continue;  // a phase of a newer vocabulary: no view of this version shows it
        const std::string pp = key_path(key_path(lp, keys::kPhases), name);
        run.phases[name] = c.stats(ph, pp);
        c.req_number(ph, "share", pp, true);
        c.opt_number(ph, "flops", pp);
        c.opt_number(ph, "bytes", pp);
    }
    c.opt_numbers(lat, "step_samples_us", lp);
    if (const json* layers = c.opt_array(lat, keys::kPerLayer, lp))
        for (size_t i = 0; i < layers->size(); ++i) {
            const std::string pl = index_path(key_path(lp, keys::kPerLayer), i);
            const json& l = c.object((*layers)[i], pl);
            c.opt_number(l, "layer", pl);
            c.opt_string(l, "kind", pl);
            c.opt_number(l, keys::kMeanUs, pl);
            if (const json* lph = c.opt_object(l, keys::kPhases, pl))
                for (const auto& [name, ph] : lph->items()) {
                    const std::string pp = key_path(key_path(pl, keys::kPhases), name);
                    c.object(ph, pp);
                    c.opt_number(ph, keys::kMeanUs, pp);
                    c.opt_number(ph, keys::kP50Us, pp);
                }
        }
}

// What only a point that ran has: timings, iterations, throughput and the counted blocks.
void check_ok_run(const Checker& c, const json& r, const std::string& p, ReadRun& run) {
    const std::string ip = key_path(p, keys::kIterations);
    const json& it = c.object(c.req(r, keys::kIterations, p), ip);
    run.measured_iterations = c.integer(c.req(it, "measured", ip), key_path(ip, "measured"));
    if (run.measured_iterations < 1) c.fail(key_path(ip, "measured"), "must be at least 1", &it["measured"]);
    check_latency(c, r, p, run);
    const std::string tp = key_path(p, keys::kThroughput);
    run.tokens_per_s = c.req_number(c.object(c.req(r, keys::kThroughput, p), tp), keys::kTokensPerS, tp, true);
    check_expert_load(c, r, p);
    check_roofline(c, r, p, run);
}

// The model's name from the resolved model in config.model (config.run.model may be a path to the model file).
std::string model_of_config(const Checker& c, const json& doc) {
    const json* config = Checker::opt(doc, "config");
    const json* model = config ? c.opt_object(*config, "model", "config") : nullptr;
    return model ? c.opt_string(*model, "name", "config.model") : "";
}

// Records that did not run (and journal records) lack the model's name and the device; take them from the points of
// the report that have them, so such a point still lines up with its partner in a comparison. A sweep's records all
// carry the model as given (axes.model: a short name or a path), which says which name belongs to which record.
void fill_from_siblings(ReadReport& out, const std::string& config_model) {
    std::map<std::string, std::set<std::string>> name_by_spec, hardware_by_backend;
    std::set<std::string> models;
    auto backend_of = [](const ReadRun& r) { return r.axes.contains("backend") ? scalar_text(r.axes["backend"]) : ""; };
    for (const auto& r : out.runs) {
        if (!r.model.empty()) models.insert(r.model);
        if (!r.model.empty() && !r.model_spec.empty()) name_by_spec[r.model_spec].insert(r.model);
        if (!r.hardware.empty()) hardware_by_backend[backend_of(r)].insert(r.hardware);
    }
    auto name_for = [&](const ReadRun& r) -> std::string {
        auto named = name_by_spec.find(r.model_spec);
        if (named != name_by_spec.end() && named->second.size() == 1) return *named->second.begin();
        if (!config_model.empty()) return config_model;
        if (!r.model_spec.empty()) return r.model_spec;
        return models.size() == 1 ? *models.begin() : "";
    };
    for (auto& r : out.runs) {
        if (r.model.empty()) r.model = name_for(r);
        auto hw = hardware_by_backend.find(backend_of(r));
        if (r.hardware.empty() && hw != hardware_by_backend.end() && hw->second.size() == 1) r.hardware = *hw->second.begin();
    }
}

void require_model(const Checker& c, const ReadRun& run, const std::string& path) {
    if (run.ok() && run.model.empty()) c.fail(key_path(path, "model"), "required field is missing");
}

}  // namespace

ReadRun read_run(const json& record, const std::string& name, const std::string& path, const std::string& model) {
    Checker c(name);
    ReadRun run;
    check_point_fields(c, record, path, run);
    if (run.model.empty()) run.model = !model.empty() ? model : run.model_spec;
    if (run.ok()) check_ok_run(c, record, path, run);
    require_model(c, run, path);
    return run;
}

ReadReport read_report(json doc, const std::string& name) {
    Checker c(name);
    ReadReport out;
    out.name = name;
    check_header(c, doc, out);
    const json& runs = doc[keys::kRuns];
    for (size_t i = 0; i < runs.size(); ++i) {
        ReadRun run;
        run.index = i;
        check_point_fields(c, runs[i], index_path(keys::kRuns, i), run);
        if (run.ok()) check_ok_run(c, runs[i], index_path(keys::kRuns, i), run);
        out.runs.push_back(std::move(run));
    }
    check_sweep(c, doc, runs.size());
    fill_from_siblings(out, model_of_config(c, doc));
    for (const auto& run : out.runs) require_model(c, run, index_path(keys::kRuns, run.index));
    out.doc = std::move(doc);
    return out;
}

json report_from_journal(const std::string& path) {
    // Read whole through the one file reader: its checks (a folder, a device, a size bound) hold for journals too.
    std::istringstream in(read_file_bytes(path));
    json runs = json::array();
    std::map<std::string, size_t> at;
    std::string line;
    size_t n = 0;
    while (std::getline(in, line)) {
        ++n;
        if (line.empty()) continue;
        const std::string where = path + ":" + std::to_string(n);
        std::optional<json> parsed = parse_json_line(line, where, "remove that line");
        if (!parsed) {
            if (in.peek() == EOF) break;  // a torn last line: that point did not finish
            config_error(where, "is not a valid journal line", "", "remove that line");
        }
        const json& j = *parsed;
        if (!j.is_object() || !j.contains("record") || !j["record"].is_object() ||
            (j.contains("key") && !j["key"].is_string()))
            config_error(where, "is not a moebench sweep journal line", json_brief(j), "");
        std::string key = j.value("key", std::to_string(n));
        if (at.count(key)) {
            runs[at[key]] = j["record"];
        } else {
            at[key] = runs.size();
            runs.push_back(j["record"]);
        }
    }
    return json{{"schema", kReportSchema}, {"command", "(from sweep journal " + path + ")"}, {keys::kRuns, runs}};
}

ReadReport load_report(const std::string& path) {
    bool is_journal = path.size() > 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0;
    return read_report(is_journal ? report_from_journal(path) : load_json_file(path), path);
}

json run_key_value(const ReadReport& report, const ReadRun& run, const std::string& key) {
    json v;
    if (key == "model") v = run.model.empty() ? json(nullptr) : json(run.model);
    else if (key == "hardware") v = run.hardware.empty() ? json(nullptr) : json(run.hardware);
    else if (run.axes.contains(key)) v = run.axes[key];
    else if (const json& r = report.doc[keys::kRuns][run.index]; r.contains(key) && !r[key].is_object() && !r[key].is_array())
        v = r[key];
    else if (const json* cr = Checker::opt(report.doc, "config"); cr && cr->is_object() && cr->contains("run") &&
                                                                  (*cr)["run"].is_object() && (*cr)["run"].contains(key))
        v = (*cr)["run"][key];
    if (v.is_number()) {
        double d = v.get<double>();
        if (std::floor(d) == d && std::fabs(d) < 9e15) return json(static_cast<int64_t>(d));
        return json(d);
    }
    if (v.is_object() || v.is_array()) return json(json_brief(v));
    return v;
}

}  // namespace moebench
