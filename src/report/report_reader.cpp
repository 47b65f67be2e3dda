// SPDX-License-Identifier: Apache-2.0
// The strict report reader: one pass over the document that checks every field the views and compare read, by JSON
// path, and types what compare needs. Which fields are required follows docs/report-schema.md: what every report of
// `moebench run` or `sweep` holds for an ok point; blocks a backend may leave out (expert_load, roofline, per_layer)
// are checked only when present.
#include "report/report_reader.hpp"

#include "config/file_kind.hpp"
#include "config/layout_request.hpp"
#include "core/report_keys.hpp"

#include "backends/registry.hpp"
#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "common/read_file.hpp"
#include "config/run_config.hpp"
#include "core/phase.hpp"
#include "report/journal_reader.hpp"
#include "report/report_json.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace moebench {

namespace {

const char* kFix = "pass a report written by moebench run or sweep, unedited";
// No step of a benchmark takes longer (about 11.6 days): a larger time is a corrupted or edited figure.
constexpr double kMaxPlausibleUs = 1e12;

std::string key_path(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }
std::string index_path(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

// Every check names the file and the JSON path of the field; `what` says what it must be.
class Checker {
public:
    explicit Checker(std::string file) : file_(std::move(file)) {}

    [[noreturn]] void fail(const std::string& path, const std::string& what, const json* got = nullptr,
                           const char* fix = kFix) const {
        config_error(file_ + ": " + path, what, got ? json_brief(*got) : "", fix);
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
        if (!std::isfinite(d)) fail(path, "must be a finite number", &v);  // only a document built in memory holds one
        if (non_negative && d < 0) fail(path, "must not be negative", &v);
        return d;
    }
    int64_t integer(const json& v, const std::string& path) const {
        double d = number(v, path);
        if (std::floor(d) != d || std::fabs(d) > 9e15) wrong_type(path, "a whole number", v);
        return static_cast<int64_t>(d);
    }

    double req_number(const json& obj, const std::string& key, const std::string& path,
                      bool non_negative = false) const {
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
        c.fail("schema",
               std::string("is not a moebench report schema this version reads (expected ") + kReportSchema + ")",
               &schema);
    c.array(c.req(doc, keys::kRuns, ""), keys::kRuns);
    c.opt_string(doc, "command", "");
    c.opt_string(doc, "created_utc", "");
    if (const json* tool = c.opt_object(doc, "tool", ""))
        for (const char* k : {"name", "version", "git_rev", "build_type"})
            if (std::string v = c.opt_string(*tool, k, "tool"); !v.empty())
                out.environment[std::string("tool.") + k] = v;
    if (const json* env = c.opt_object(doc, "environment", "")) {
        for (const char* k : {"host", "cpu_model", "blas", "backend", "backend_note"})
            if (std::string v = c.opt_string(*env, k, "environment"); !v.empty())
                out.environment[std::string("environment.") + k] = v;
        for (const char* k : {"num_cpus", "threads", "memory_bytes"})
            if (c.opt_number(*env, k, "environment"))
                out.environment[std::string("environment.") + k] = scalar_text(env->at(k));
        if (const json* ceil = c.opt_object(*env, "ceilings", "environment")) {
            c.opt_number(*ceil, "flops_per_s", "environment.ceilings");
            c.opt_number(*ceil, "bytes_per_s", "environment.ceilings");
        }
    }
    if (const json* config = c.opt_object(doc, "config", ""))
        if (const json* run = c.opt_object(*config, "run", "config")) {
            c.opt_string(*run, "model", "config.run");
            for (const auto& [k, v] : run->items())
                if (v.is_string() || v.is_number() || v.is_boolean())
                    out.environment["config.run." + k] = scalar_text(v);
        }
}

void check_sweep(const Checker& c, const json& doc, size_t num_runs) {
    const json* s = c.opt_object(doc, "sweep", "");
    if (!s) return;
    auto run_index = [&](const json& obj, const std::string& path) {
        const json* i = Checker::opt(obj, "run_index");
        if (i && (c.integer(*i, key_path(path, "run_index")) < 0 || i->get<double>() >= static_cast<double>(num_runs)))
            c.fail(key_path(path, "run_index"),
                   fmt::format("must index runs[] (0..{})", num_runs == 0 ? 0 : num_runs - 1), i);
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
// Axes that reports of an earlier moebench do not carry take the value their run had: the layout of --ep (attention
// data-parallel over the expert-parallel ranks), the backend's own number formats, the first layer (0) and no redundant
// experts (0), nothing pruned (0). So such a report still matches a new one of the same point in compare.
void fill_axes_added_later(json& axes) {
    if (!axes.contains("first_layer")) axes["first_layer"] = 0;  // runs started at layer 0 before it was a field
    if (!axes.contains("redundant_experts")) axes["redundant_experts"] = 0;  // no replicas before it was a field
    // Every expert resident before expert offload was a field.
    if (!axes.contains("resident_experts")) axes["resident_experts"] = 0;
    if (!axes.contains("offload_ratio")) axes["offload_ratio"] = 0.0;  // a double, as the writer has it
    if (!axes.contains("offload_policy")) axes["offload_policy"] = "lru";
    if (!axes.contains("prune_below")) axes["prune_below"] = 0;  // nothing pruned before it was a field
    if (!axes.contains("ep") || !axes["ep"].is_number_integer()) return;
    const json ep = axes["ep"];
    for (const auto& [k, v] : {std::pair<const char*, json>{"tp", 1},
                               {"attention_dp", ep},
                               {"moe_tp", 1},
                               {"moe_ep", ep},
                               {"dtype", "auto"},
                               {"expert_dtype", "auto"},
                               {"kv_dtype", "auto"}})
        if (!axes.contains(k)) axes[k] = v;
}

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
    if (const json* spec = Checker::opt(run.axes, "model"); spec && spec->is_string())
        run.model_spec = spec->get<std::string>();
    c.opt_string(r, "sweep_label", p);
    c.opt_object(r, "sweep_point", p);
    c.opt_string(r, "mode", p);
    c.opt_string(r, "backend", p);
    for (const char* k : {"batch", "seq_len", "context", "num_tokens"}) c.opt_number(r, k, p);
    // The shape is used as counts by the views (a trace track per rank, labels): whole numbers within what a run
    // accepts (config/run_config.hpp), in the record and in its axes. (An ep of 1e300 was undefined behaviour when
    // converted, and 1e8 ranks made the trace view loop for minutes.)
    for (const json* where : std::initializer_list<const json*>{&r, &run.axes})
        for (const auto& [k, hi] : {std::pair<const char*, int64_t>{"batch", kMaxStepTokens},
                                    {"seq_len", kMaxStepTokens},
                                    {"num_tokens", kMaxStepTokens},
                                    {"context", kMaxContext},
                                    {"ep", kMaxLayoutGpus},
                                    {"tp", kMaxLayoutGpus},
                                    {"attention_dp", kMaxLayoutGpus},
                                    {"moe_tp", kMaxLayoutGpus},
                                    {"moe_ep", kMaxLayoutGpus},
                                    {"soft_topn", kMaxStepTokens},
                                    {"layers", kMaxStepTokens},
                                    {"first_layer", kMaxStepTokens},
                                    {"redundant_experts", kMaxRedundantExperts},
                                    {"resident_experts", kMaxRedundantExperts}}) {
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
        if (const json* hw = c.opt_object(*bi, "hardware", bp))
            run.hardware = c.opt_string(*hw, "name", key_path(bp, "hardware"));
        if (const json* dev = Checker::opt(*bi, "device"); dev && dev->is_object())
            run.hardware = c.opt_string(*dev, "name", key_path(bp, "device"));
    }
    if (const json* hw = Checker::opt(run.axes, "hardware"); hw && hw->is_string())
        run.hardware = hw->get<std::string>();
    fill_axes_added_later(run.axes);
}

// Expert counts against themselves and against the model: one entry per expert in every per-expert list (the layer's
// num_experts, and config.model's when the report names the model: `model_experts` > 0), the totals their sums.
void check_expert_load(const Checker& c, const json& r, const std::string& p, int64_t model_experts) {
    const json* el = c.opt_object(r, keys::kExpertLoad, p);
    if (!el) return;
    const std::string ep = key_path(p, keys::kExpertLoad);
    const json* layers = c.opt_array(*el, keys::kPerLayer, ep);
    for (size_t i = 0; layers && i < layers->size(); ++i) {
        const std::string lp = index_path(key_path(ep, keys::kPerLayer), i);
        const json& l = c.object((*layers)[i], lp);
        for (const char* k :
             {"layer", "num_tokens", "k", "num_experts", "num_assignments", "dropped", "mean", "max",
              keys::kMaxOverMean, "cv", "gini", "top3_share", "idle_experts", "entropy_bits", "entropy_norm"})
            c.opt_number(l, k, lp);
        c.opt_numbers(l, "tokens_per_expert", lp);
        c.opt_numbers(l, "expert_gemm_us", lp);
        c.opt_matrix(l, "coactivation", lp);
        const json* windows = c.opt_object(l, "windows", lp);
        if (windows) {
            c.opt_number(*windows, "window_tokens", key_path(lp, "windows"));
            c.opt_matrix(*windows, "counts", key_path(lp, "windows"));
        }
        const std::string np = key_path(lp, "num_experts");
        const json* ne = Checker::opt(l, "num_experts");
        if (ne && model_experts > 0 && c.integer(*ne, np) != model_experts)
            c.fail(np,
                   fmt::format("must be the model's expert count ({}, config.model.moe.num_experts)", model_experts),
                   ne);
        const json* tpe = Checker::opt(l, "tokens_per_expert");
        if (!tpe) continue;
        const std::string tp = key_path(lp, "tokens_per_expert");
        const int64_t num = static_cast<int64_t>(tpe->size());
        if (ne && num != c.integer(*ne, np))
            c.fail(tp, fmt::format("has {} entries: one per expert, and the layer has {} experts (num_experts)", num,
                                   c.integer(*ne, np)));
        if (model_experts > 0 && num != model_experts)
            c.fail(tp, fmt::format("has {} entries: one per expert, and the model has {} experts "
                                   "(config.model.moe.num_experts)",
                                   num, model_experts));
        int64_t sum = 0, top = 0;
        for (size_t e = 0; e < tpe->size(); ++e) {
            const int64_t v = c.integer((*tpe)[e], index_path(tp, e));
            if (v < 0) c.fail(index_path(tp, e), "must not be negative: a count of tokens", &(*tpe)[e]);
            sum += v;
            top = std::max(top, v);
        }
        if (const json* na = Checker::opt(l, "num_assignments");
            na && c.integer(*na, key_path(lp, "num_assignments")) != sum)
            c.fail(key_path(lp, "num_assignments"), fmt::format("must be the sum of tokens_per_expert ({})", sum), na);
        if (const json* mx = Checker::opt(l, "max"); mx && num > 0 && mx->get<double>() != static_cast<double>(top))
            c.fail(key_path(lp, "max"), fmt::format("must be the largest entry of tokens_per_expert ({})", top), mx);
        // The other per-expert lists: empty (not measured, or omitted) or one entry per expert.
        auto per_expert = [&](const json* list, const std::string& path) {
            if (list && !list->empty() && static_cast<int64_t>(list->size()) != num)
                c.fail(path,
                       fmt::format("has {} entries: one per expert ({}, as tokens_per_expert)", list->size(), num));
        };
        per_expert(Checker::opt(l, "expert_gemm_us"), key_path(lp, "expert_gemm_us"));
        if (const json* co = Checker::opt(l, "coactivation")) {
            per_expert(co, key_path(lp, "coactivation"));
            for (size_t e = 0; e < co->size(); ++e) per_expert(&(*co)[e], index_path(key_path(lp, "coactivation"), e));
        }
        if (const json* counts = windows ? Checker::opt(*windows, "counts") : nullptr)
            for (size_t w = 0; w < counts->size(); ++w)
                per_expert(&(*counts)[w], index_path(key_path(key_path(lp, "windows"), "counts"), w));
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

// ---- what the figures can be ----

// The steps behind a run's statistics, and the field that counts them (for messages).
struct SampleCount {
    int64_t n = 0;
    std::string field;  // "iterations.measured" or "iterations.modeled"
};

// Rounding, nothing more: figures written from the same doubles agree to far better than this.
double slack(double v) { return 1e-9 * std::max(1.0, std::fabs(v)); }

bool outside(double v, double lo, double hi) { return v < lo - slack(lo) || v > hi + slack(hi); }

// What the statistics of n samples can be (docs/report-schema.md, "Statistics"): the mean and every percentile inside
// [min, max], the percentiles in order, the sample stdev no wider than n values in that range give, cv = stdev / mean,
// `count` = n. An edited or corrupted block is refused here, before a view draws it or compare trusts its spread.
void check_plausible(const Checker& c, const json& obj, const ReadStats& s, const std::string& path,
                     const SampleCount& n) {
    auto at = [&](const char* k) { return key_path(path, k); };
    if (s.max_us > kMaxPlausibleUs)
        c.fail(at("max_us"),
               fmt::format("is not a plausible time (more than {:g} us, about 11.6 days)", kMaxPlausibleUs),
               &obj.at("max_us"));
    if (s.min_us > s.max_us) c.fail(at("min_us"), fmt::format("is above max_us ({:g})", s.max_us), &obj.at("min_us"));
    const std::string range = fmt::format("[min_us, max_us] = [{:g}, {:g}]", s.min_us, s.max_us);
    for (const auto& [k, v] : {std::pair<const char*, double>{keys::kMeanUs, s.mean_us},
                               {keys::kP50Us, s.p50_us},
                               {keys::kP95Us, s.p95_us},
                               {keys::kP99Us, s.p99_us}})
        if (outside(v, s.min_us, s.max_us)) c.fail(at(k), "is outside " + range + " of the same samples", &obj.at(k));
    if (s.p50_us > s.p95_us + slack(s.p95_us))
        c.fail(at(keys::kP95Us), fmt::format("is below p50_us ({:g}): percentiles do not decrease", s.p50_us),
               &obj.at(keys::kP95Us));
    if (s.p95_us > s.p99_us + slack(s.p99_us))
        c.fail(at(keys::kP99Us), fmt::format("is below p95_us ({:g}): percentiles do not decrease", s.p95_us),
               &obj.at(keys::kP99Us));
    // n values in [min, max] have a sample standard deviation of at most (max - min) / 2 * sqrt(n / (n - 1)) (half of
    // them at each end); one value has none. An unknown count takes the widest case, n = 2.
    const double nd = static_cast<double>(n.n);
    const double bound = n.n == 1 ? 0.0 : (s.max_us - s.min_us) / 2 * std::sqrt(n.n >= 2 ? nd / (nd - 1) : 2.0);
    if (s.stdev_us > bound * (1 + 1e-9) + slack(s.max_us))
        c.fail(at("stdev_us"),
               fmt::format("cannot be the standard deviation of {} within {} (at most {:g})",
                           n.n >= 1 ? fmt::format("{} samples", n.n) : std::string("samples"), range, bound),
               &obj.at("stdev_us"));
    const double cv = s.mean_us > 0 ? s.stdev_us / s.mean_us : 0.0;
    if (std::fabs(s.cv - cv) > 1e-6 * std::max(cv, 1e-6))
        c.fail(at("cv"), fmt::format("must be stdev_us / mean_us ({:g})", cv), &obj.at("cv"));
    if (const json* count = Checker::opt(obj, "count"); count && n.n > 0 && c.integer(*count, at("count")) != n.n)
        c.fail(at("count"), fmt::format("must be the number of samples, {} ({})", n.field, n.n), count);
    for (const char* k : {"p50_ci_low_us", "p50_ci_high_us"})
        if (std::optional<double> v = c.opt_number(obj, k, path); v && outside(*v, s.min_us, s.max_us))
            c.fail(at(k), "is outside " + range + " of the same samples", &obj.at(k));
}

// step_samples_us: one per step, each a time inside latency.step, and together the samples latency.step was made of.
void check_step_samples(const Checker& c, const json& lat, const std::string& lp, const ReadStats& step,
                        const SampleCount& n) {
    const json* samples = c.opt_array(lat, "step_samples_us", lp);
    if (!samples) return;
    const std::string sp = key_path(lp, "step_samples_us");
    if (n.n > 0 && static_cast<int64_t>(samples->size()) != n.n)
        c.fail(sp, fmt::format("holds {} samples: one per step, {} ({})", samples->size(), n.field, n.n));
    if (samples->empty()) return;
    double sum = 0, lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < samples->size(); ++i) {
        const double x = c.number((*samples)[i], index_path(sp, i), /*non_negative=*/true);
        if (outside(x, step.min_us, step.max_us))
            c.fail(index_path(sp, i),
                   fmt::format("is outside [min_us, max_us] = [{:g}, {:g}] of latency.step", step.min_us, step.max_us),
                   &(*samples)[i]);
        sum += x;
        lo = std::min(lo, x);
        hi = std::max(hi, x);
    }
    const double count = static_cast<double>(samples->size()), mean = sum / count;
    double ss = 0;
    for (const json& v : *samples) ss += (v.get<double>() - mean) * (v.get<double>() - mean);
    const double sd = samples->size() > 1 ? std::sqrt(ss / (count - 1)) : 0.0;
    for (const auto& [k, from, recorded] : {std::tuple<const char*, double, double>{"min_us", lo, step.min_us},
                                            {"max_us", hi, step.max_us},
                                            {keys::kMeanUs, mean, step.mean_us},
                                            {"stdev_us", sd, step.stdev_us}})
        if (std::fabs(from - recorded) > 1e-6 * std::max(std::fabs(from), std::fabs(recorded)) + slack(step.max_us))
            c.fail(sp, fmt::format("do not give latency.step: {} {:g} from the samples, {:g} in latency.step", k, from,
                                   recorded));
}

// The source a run's backend gives its times ("measured" or "modeled"; "" for a backend this version does not
// know), and the backend's name.
std::pair<std::string, std::string> backend_source(const json& r, const ReadRun& run) {
    std::string name;
    if (const json* b = Checker::opt(r, "backend"); b && b->is_string())
        name = b->get<std::string>();
    else if (const json* ab = Checker::opt(run.axes, "backend"); ab && ab->is_string())
        name = ab->get<std::string>();
    const BackendTraits* t = name.empty() ? nullptr : find_backend_traits(name);
    return {name, t ? (t->measures ? "measured" : "modeled") : ""};
}

// latency.source against the backend (a cpu or cuda run is never modeled, a sim run never measured), and the other
// labels of the same steps against latency.source. Sets run.timing_source (the backend's when the label is absent).
void check_timing_source(const Checker& c, const json& r, const std::string& p, ReadRun& run) {
    const std::string lp = key_path(p, keys::kLatency);
    const json& lat = c.object(c.req(r, keys::kLatency, p), lp);
    const auto [backend, expected] = backend_source(r, run);
    const std::string label = c.opt_string(lat, "source", lp);
    if (!label.empty() && label != "measured" && label != "modeled")
        c.fail(key_path(lp, "source"), "must be measured or modeled", &lat.at("source"));
    if (!label.empty() && !expected.empty() && label != expected)
        c.fail(key_path(lp, "source"),
               fmt::format("contradicts the backend: backend {} {} its times", backend,
                           expected == "measured" ? "measures" : "models"),
               &lat.at("source"));
    run.timing_source = label.empty() ? expected : label;
    if (run.timing_source.empty()) return;
    for (const auto& [block, key] :
         {std::pair<const char*, const char*>{keys::kThroughput, "source"}, {keys::kRoofline, "times_source"}}) {
        const json* b = Checker::opt(r, block);
        if (!b || !b->is_object()) continue;  // its type is checked with the block
        const std::string t = c.opt_string(*b, key, key_path(p, block));
        if (!t.empty() && t != run.timing_source)
            c.fail(key_path(key_path(p, block), key),
                   fmt::format("must be latency.source ({}): it labels the same steps", run.timing_source),
                   &b->at(key));
    }
}

// iterations: a measured run measured its steps (measured >= 1), a modeled run modeled them (measured 0, modeled >= 1).
SampleCount check_iterations(const Checker& c, const json& r, const std::string& p, ReadRun& run) {
    const std::string ip = key_path(p, keys::kIterations);
    const json& it = c.object(c.req(r, keys::kIterations, p), ip);
    const std::string mp = key_path(ip, "measured"), dp = key_path(ip, "modeled");
    run.measured_iterations = c.integer(c.req(it, "measured", ip), mp);
    const json* modeled = Checker::opt(it, "modeled");
    const int64_t num_modeled = modeled ? c.integer(*modeled, dp) : 0;
    SampleCount n;
    if (run.timing_source == "modeled") {
        if (run.measured_iterations != 0)
            c.fail(mp, "a modeled run measures no step: must be 0", &it.at("measured"),
                   "rerun it with this moebench (earlier versions counted the sim's modeled steps as measured)");
        if (!modeled) c.fail(dp, "required field is missing");
        if (num_modeled < 1) c.fail(dp, "must be at least 1", modeled);
        n = {num_modeled, "iterations.modeled"};
    } else {
        if (run.measured_iterations < 1) c.fail(mp, "must be at least 1", &it.at("measured"));
        if (num_modeled != 0) c.fail(dp, "a measured run models no step: must be 0 or absent", modeled);
        n = {run.measured_iterations, "iterations.measured"};
    }
    run.num_samples = n.n;
    return n;
}

// whole_model: its source is the latency's, or `extrapolated` (extrapolated_from then names the latency's) when it
// was extrapolated from fewer layers than the model has.
void check_whole_model(const Checker& c, const json& lat, const std::string& lp, const ReadRun& run) {
    const json* w = c.opt_object(lat, keys::kWholeModel, lp);
    if (!w) return;
    const std::string wp = key_path(lp, keys::kWholeModel);
    const json* ex = Checker::opt(*w, "extrapolated");
    if (ex && !ex->is_boolean()) c.wrong_type(key_path(wp, "extrapolated"), "true or false", *ex);
    const bool extrapolated = ex && ex->get<bool>();
    const std::string source = c.opt_string(*w, "source", wp), from = c.opt_string(*w, "extrapolated_from", wp);
    c.opt_number(*w, keys::kStepUs, wp);
    c.opt_number(*w, keys::kTokensPerS, wp);
    const std::string& ts = run.timing_source;
    if (!extrapolated && (source == "extrapolated" || (!ts.empty() && !source.empty() && source != ts)))
        c.fail(key_path(wp, "source"),
               fmt::format("must be latency.source ({}): this whole model is not extrapolated (extrapolated: false)",
                           ts.empty() ? "measured or modeled" : ts),
               &w->at("source"));
    // An earlier version's label (the latency's source) is read and relabelled (relabel_extrapolated).
    if (extrapolated && !source.empty() && source != "extrapolated" && !ts.empty() && source != ts)
        c.fail(key_path(wp, "source"), "must be extrapolated (extrapolated: true)", &w->at("source"));
    if (!from.empty() && !ts.empty() && from != ts)
        c.fail(key_path(wp, "extrapolated_from"), fmt::format("must be latency.source ({})", ts),
               &w->at("extrapolated_from"));
}

void check_latency(const Checker& c, const json& r, const std::string& p, ReadRun& run, const SampleCount& n) {
    const std::string lp = key_path(p, keys::kLatency);
    const json& lat = c.object(c.req(r, keys::kLatency, p), lp);
    const json& step = c.req(lat, keys::kStep, lp);
    run.step = c.stats(step, key_path(lp, keys::kStep));
    check_plausible(c, step, run.step, key_path(lp, keys::kStep), n);
    const json& phases = c.object(c.req(lat, keys::kPhases, lp), key_path(lp, keys::kPhases));
    for (const auto& [name, ph] : phases.items()) {
        if (!phase_from_name(name)) continue;  // a phase of a newer vocabulary: no view of this version shows it
        const std::string pp = key_path(key_path(lp, keys::kPhases), name);
        run.phases[name] = c.stats(ph, pp);
        check_plausible(c, ph, run.phases[name], pp, n);
        if (c.req_number(ph, "share", pp, true) > 1 + 1e-9)
            c.fail(key_path(pp, "share"), "must be at most 1: the phase's share of the phase sum", &ph.at("share"));
        c.opt_number(ph, "flops", pp);
        c.opt_number(ph, "bytes", pp);
    }
    check_step_samples(c, lat, lp, run.step, n);
    check_whole_model(c, lat, lp, run);
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

// What only a point that ran has: timings, iterations, throughput and the counted blocks. `model_experts`: the
// model's expert count when the report says which model this point ran (config.model), else 0.
void check_ok_run(const Checker& c, const json& r, const std::string& p, ReadRun& run, int64_t model_experts) {
    check_timing_source(c, r, p, run);
    const SampleCount n = check_iterations(c, r, p, run);
    check_latency(c, r, p, run, n);
    const std::string tp = key_path(p, keys::kThroughput);
    run.tokens_per_s = c.req_number(c.object(c.req(r, keys::kThroughput, p), tp), keys::kTokensPerS, tp, true);
    check_expert_load(c, r, p, model_experts);
    check_roofline(c, r, p, run);
}

// Reports written before the `extrapolated` label gave an extrapolated whole model the latency's source
// ("measured"): the views of this version see what it is.
void relabel_extrapolated(json& run) {
    json* w = nullptr;
    if (auto lat = run.find(keys::kLatency); lat != run.end() && lat->is_object())
        if (auto it = lat->find(keys::kWholeModel); it != lat->end() && it->is_object()) w = &*it;
    if (!w || !w->value("extrapolated", false)) return;
    if (auto src = w->find("source"); src != w->end() && *src != "extrapolated") {
        (*w)["extrapolated_from"] = *src;
        (*w)["source"] = "extrapolated";
    }
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
        if (r.hardware.empty() && hw != hardware_by_backend.end() && hw->second.size() == 1)
            r.hardware = *hw->second.begin();
    }
}

// The expert count of the model in config.model (a `run` report; a sweep's has none): 0 when absent or dense.
int64_t experts_of_config(const Checker& c, const json& doc) {
    const json* config = Checker::opt(doc, "config");
    const json* model = config ? c.opt_object(*config, "model", "config") : nullptr;
    const json* moe = model ? c.opt_object(*model, "moe", "config.model") : nullptr;
    const json* ne = moe ? Checker::opt(*moe, "num_experts") : nullptr;
    return ne ? c.integer(*ne, "config.model.moe.num_experts") : 0;
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
    if (run.ok()) check_ok_run(c, record, path, run, /*model_experts=*/0);
    require_model(c, run, path);
    return run;
}

ReadReport read_report(json doc, const std::string& name) {
    Checker c(name);
    ReadReport out;
    out.name = name;
    check_header(c, doc, out);
    const json& runs = doc[keys::kRuns];
    const std::string config_model = model_of_config(c, doc);
    const int64_t config_experts = experts_of_config(c, doc);
    for (size_t i = 0; i < runs.size(); ++i) {
        ReadRun run;
        run.index = i;
        check_point_fields(c, runs[i], index_path(keys::kRuns, i), run);
        // A point of the model in config.model (a record without a name is one: fill_from_siblings).
        const bool config_model_ran = run.model.empty() || run.model == config_model;
        if (run.ok()) check_ok_run(c, runs[i], index_path(keys::kRuns, i), run, config_model_ran ? config_experts : 0);
        out.runs.push_back(std::move(run));
    }
    check_sweep(c, doc, runs.size());
    fill_from_siblings(out, config_model);
    for (const auto& run : out.runs)
        if (run.ok()) relabel_extrapolated(doc[keys::kRuns][run.index]);
    for (const auto& run : out.runs) require_model(c, run, index_path(keys::kRuns, run.index));
    out.doc = std::move(doc);
    return out;
}

json report_from_journal(const std::string& path) {
    // The journal reader every journal reader shares (report/journal_reader.hpp): bad lines, two sweeps in one file
    // and a point recorded twice are refused there.
    const JournalText journal = read_journal(path);
    if (journal.lines.empty())
        config_error(
            path, "holds no finished point (an empty sweep journal): there is nothing to render or compare", "",
            "let the sweep finish a point first (moebench sweep ... " + flag_of("resume") + "), or pass a report");
    return report_of_journal(journal, path);
}

ReadReport load_report(const std::string& path) {
    bool is_journal = path.size() > 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0;
    if (is_journal) return read_report(report_from_journal(path), path);
    json doc = load_json_file(path);
    refuse_other_file_kind(doc, path, {FileKind::report});
    return read_report(std::move(doc), path);
}

json run_key_value(const ReadReport& report, const ReadRun& run, const std::string& key) {
    json v;
    if (key == "model")
        v = run.model.empty() ? json(nullptr) : json(run.model);
    else if (key == "hardware")
        v = run.hardware.empty() ? json(nullptr) : json(run.hardware);
    else if (run.axes.contains(key))
        v = run.axes[key];
    else if (const json& r = report.doc[keys::kRuns][run.index];
             r.contains(key) && !r[key].is_object() && !r[key].is_array())
        v = r[key];
    else if (const json* cr = Checker::opt(report.doc, "config");
             cr && cr->is_object() && cr->contains("run") && (*cr)["run"].is_object() && (*cr)["run"].contains(key))
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
