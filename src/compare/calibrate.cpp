// SPDX-License-Identifier: Apache-2.0
// moebench calibrate: read the measured reports (strictly), model each one's run on the sim once, fit the sim
// object's numbers by repricing those prepared steps, and tabulate the error per phase and per step.
#include "compare/calibrate.hpp"

#include "build_info.hpp"
#include "common/error.hpp"
#include "common/file_identity.hpp"
#include "common/flag_names.hpp"
#include "common/host_environment.hpp"
#include "core/phase.hpp"
#include "core/report_keys.hpp"
#include "harness/sim_replay.hpp"
#include "report/report_json.hpp"
#include "report/report_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

namespace moebench {

namespace {

constexpr double kTarget = 0.25;  // the error a phase or a step should stay within (docs/calibration.md)

// ---- reading the reports ----

// The machine a report ran on: its host, and its GPU where a device ran the step.
std::string report_machine(const json& doc) {
    std::string m = machine_identity(doc.contains("environment") ? doc.at("environment") : json());
    const json* run = doc.contains(keys::kRuns) && !doc[keys::kRuns].empty() ? &doc[keys::kRuns][0] : nullptr;
    if (m.empty() || !run || !run->contains(keys::kBackendInfo)) return m;
    const json& bi = run->at(keys::kBackendInfo);
    if (bi.is_object() && bi.contains("device") && bi["device"].is_object() && bi["device"].contains("name") &&
        bi["device"]["name"].is_string())
        m += ", GPU " + bi["device"]["name"].get<std::string>();
    return m;
}

// The number formats the measured backend resolved ("auto" of the report's config is the measured backend's own,
// which the sim's would not be).
void take_precision(const json& record, RunConfig& cfg) {
    if (record.contains("precision") && record["precision"].is_object()) {
        const json& p = record["precision"];
        auto set = [&](const char* key, std::string& to) {
            if (p.contains(key) && p[key].is_string()) to = p[key].get<std::string>();
        };
        set("dense_weights", cfg.precision.dtype);
        set("expert_weights", cfg.precision.expert_dtype);
        set("kv_cache", cfg.precision.kv_dtype);
        set("dispatch", cfg.precision.dispatch_dtype);
        return;
    }
    // Reports written before the precision block: the backend's one format.
    if (record.contains(keys::kBackendInfo) && record[keys::kBackendInfo].is_object() &&
        record[keys::kBackendInfo].contains("dtype") && record[keys::kBackendInfo]["dtype"].is_string())
        cfg.precision.dtype = record[keys::kBackendInfo]["dtype"].get<std::string>();
}

CalibrationCase case_of_report(const std::string& path) {
    const ReadReport rep = load_report(path);
    const json& doc = rep.doc;
    if (rep.runs.size() != 1)
        config_error(path + ": runs",
                     fmt::format("holds {} points; calibrate takes reports of one point", rep.runs.size()), "",
                     "pass each point's own report (moebench run " + flag_of("out") + " R.json)");
    const ReadRun& run = rep.runs[0];
    const json& record = doc[keys::kRuns][0];
    if (!run.ok())
        config_error(path + ": runs[0].status", "the point did not run",
                     run.status + (run.reason.empty() ? "" : ": " + run.reason), "pass reports of points that ran");
    if (run.timing_source != "measured")
        config_error(path + ": runs[0].latency.source",
                     "is not measured: a model is calibrated against measurements, never against a model's output",
                     run.timing_source,
                     "pass reports of the cpu or cuda backend (moebench run " + flag_of("backend") + " cpu)");
    CalibrationCase c;
    c.name = path;
    for (const auto& [phase, stats] : run.phases)
        if (stats.p50_us > 0) c.measured_phase_us[phase] = stats.p50_us;
    if (c.measured_phase_us.empty())
        config_error(path + ": runs[0].latency.phases", "holds no phase with a time", "",
                     "pass reports with per-phase times (moebench run writes them)");
    c.measured_step_us = run.step.p50_us;
    if (!doc.contains("config") || !doc["config"].is_object() || !doc["config"].contains("run") ||
        !doc["config"]["run"].is_object())
        config_error(path + ": config.run", "is missing: the report does not say what it ran", "",
                     "pass a report written by moebench run");
    json cfg = doc["config"]["run"];
    for (const char* output : {"out", "dump_tensors"}) cfg[output] = "";  // what it wrote is no input here
    c.run = run_config_from_json(cfg, path + ": config.run");
    take_precision(record, c.run);
    if (record.contains(keys::kRoofline) && record[keys::kRoofline].is_object() &&
        record[keys::kRoofline].contains("mla_form") && record[keys::kRoofline]["mla_form"].is_string())
        c.mla_form = record[keys::kRoofline]["mla_form"].get<std::string>();
    c.machine = report_machine(doc);
    if (c.machine.empty())
        config_error(path + ": environment", "does not record the machine the point ran on (host, CPU)", "",
                     "pass reports written by moebench run, which record it");
    return c;
}

// ---- pricing and the objective ----

struct Model {
    const std::vector<CalibrationCase>& cases;
    std::vector<SimReplay> replays;
    int64_t evaluations = 0;

    std::vector<ModeledStep> price(const SimParams& p) {
        ++evaluations;
        std::vector<ModeledStep> out;
        out.reserve(replays.size());
        for (SimReplay& r : replays) out.push_back(r.price(p));
        return out;
    }
    // Sum over the phases both sides have of ln(modeled / measured)^2.
    double objective(const std::vector<ModeledStep>& steps, int64_t* terms = nullptr) const {
        double sum = 0;
        int64_t n = 0;
        for (size_t i = 0; i < cases.size(); ++i)
            for (const auto& [phase, measured] : cases[i].measured_phase_us) {
                auto it = steps[i].phase_us.find(phase);
                if (it == steps[i].phase_us.end() || !(it->second > 0)) continue;
                const double e = std::log(it->second / measured);
                sum += e * e;
                ++n;
            }
        if (terms) *terms = n;
        return sum;
    }
    double objective(const SimParams& p) { return objective(price(p)); }
};

// The parameters in the fit's coordinates: ln(value) for a fraction, ln(value + 0.1 us) for a fixed cost (which may
// be 0), each within its accepted range.
struct Coordinates {
    std::vector<SimNumberField> fields;
    static constexpr double kOffsetUs = 0.1;
    bool is_us(size_t i) const { return fields[i].min == 0; }
    double to_x(size_t i, double v) const { return std::log(v + (is_us(i) ? kOffsetUs : 0.0)); }
    double to_v(size_t i, double x) const {
        return std::clamp(std::exp(x) - (is_us(i) ? kOffsetUs : 0.0), fields[i].min, fields[i].max);
    }
    double lo(size_t i) const { return to_x(i, fields[i].min); }
    double hi(size_t i) const { return to_x(i, fields[i].max); }
    std::vector<double> clamp(std::vector<double> x) const {
        for (size_t i = 0; i < x.size(); ++i) x[i] = std::clamp(x[i], lo(i), hi(i));
        return x;
    }
    SimParams params(const SimParams& base, const std::vector<double>& x) const {
        SimParams p = base;
        for (size_t i = 0; i < x.size(); ++i) p.*fields[i].member = to_v(i, x[i]);
        return p;
    }
    std::vector<double> point(const SimParams& p) const {
        std::vector<double> x(fields.size());
        for (size_t i = 0; i < x.size(); ++i) x[i] = std::clamp(to_x(i, p.*fields[i].member), lo(i), hi(i));
        return x;
    }
};

using Objective = std::function<double(const std::vector<double>&)>;

// Nelder-Mead (reflection 1, expansion 2, contraction 1/2, shrink 1/2) inside the box: every point is clamped to it.
// Improves x in place; returns f(x).
double nelder_mead(const Objective& f, const Coordinates& c, std::vector<double>& x, double step, int64_t max_evals) {
    const size_t n = x.size();
    std::vector<std::vector<double>> s(n + 1, c.clamp(x));
    for (size_t i = 0; i < n; ++i) {
        s[i + 1][i] += s[i + 1][i] + step <= c.hi(i) ? step : -step;
        s[i + 1] = c.clamp(s[i + 1]);
    }
    std::vector<double> fs(n + 1);
    for (size_t i = 0; i <= n; ++i) fs[i] = f(s[i]);
    int64_t evals = static_cast<int64_t>(n + 1);
    std::vector<size_t> order(n + 1);
    auto along = [&](const std::vector<double>& from, const std::vector<double>& to, double t) {
        std::vector<double> y(n);
        for (size_t k = 0; k < n; ++k) y[k] = from[k] + t * (to[k] - from[k]);
        return c.clamp(y);
    };
    while (evals < max_evals) {
        std::iota(order.begin(), order.end(), size_t{0});
        std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return fs[a] < fs[b]; });
        const size_t best = order.front(), worst = order.back(), second = order[n - 1];
        double size = 0;
        for (size_t i = 0; i <= n; ++i)
            for (size_t k = 0; k < n; ++k) size = std::max(size, std::fabs(s[i][k] - s[best][k]));
        if (size < 1e-10 || fs[worst] - fs[best] <= 1e-15 * fs[best]) break;
        std::vector<double> centroid(n, 0.0);
        for (size_t i = 0; i <= n; ++i)
            if (i != worst)
                for (size_t k = 0; k < n; ++k) centroid[k] += s[i][k] / static_cast<double>(n);
        const std::vector<double> r = along(s[worst], centroid, 2.0);  // centroid + (centroid - worst)
        const double fr = f(r);
        ++evals;
        if (fr < fs[best]) {
            const std::vector<double> e = along(s[worst], centroid, 3.0);
            const double fe = f(e);
            ++evals;
            if (fe < fr)
                s[worst] = e, fs[worst] = fe;
            else
                s[worst] = r, fs[worst] = fr;
        } else if (fr < fs[second]) {
            s[worst] = r, fs[worst] = fr;
        } else {
            const bool outside = fr < fs[worst];
            const std::vector<double> k = along(s[worst], centroid, outside ? 1.5 : 0.5);
            const double fk = f(k);
            ++evals;
            if (fk < std::min(fr, fs[worst])) {
                s[worst] = k, fs[worst] = fk;
            } else {
                for (size_t i = 0; i <= n; ++i) {
                    if (i == best) continue;
                    s[i] = along(s[best], s[i], 0.5);
                    fs[i] = f(s[i]);
                    ++evals;
                }
            }
        }
    }
    const size_t best = static_cast<size_t>(std::min_element(fs.begin(), fs.end()) - fs.begin());
    x = s[best];
    return fs[best];
}

// Nelder-Mead restarted from its own result until a restart no longer improves.
double minimise(const Objective& f, const Coordinates& c, std::vector<double>& x) {
    double fx = f(x);
    for (int restart = 0; restart < 12; ++restart) {
        const double before = fx;
        fx = nelder_mead(f, c, x, restart == 0 ? 0.5 : 0.1, 4000);
        if (!(before - fx > 1e-12 * before)) break;
    }
    return fx;
}

// Starting points: a coarse grid over every fitted parameter (at most 4 of them: 7^4 points), else a grid along each
// in turn; the start itself comes first.
std::vector<std::vector<double>> starting_points(const Objective& f, const Coordinates& c,
                                                 const std::vector<double>& x0) {
    const std::vector<double> fractions = {0.02, 0.05, 0.1, 0.2, 0.4, 0.7, 1.0};
    const std::vector<double> micros = {0, 1, 3, 10, 30, 100, 300};
    const size_t n = x0.size();
    std::vector<std::pair<double, std::vector<double>>> scored;
    auto values = [&](size_t i) {
        std::vector<double> v;
        for (double u : c.is_us(i) ? micros : fractions)
            v.push_back(c.to_x(i, std::clamp(u, c.fields[i].min, c.fields[i].max)));
        return v;
    };
    if (n <= 4) {
        std::vector<size_t> idx(n, 0);
        while (true) {
            std::vector<double> x(n);
            for (size_t i = 0; i < n; ++i) x[i] = values(i)[idx[i]];
            scored.emplace_back(f(x), x);
            size_t i = 0;
            while (i < n && ++idx[i] == values(i).size()) idx[i++] = 0;
            if (i == n) break;
        }
    } else {
        std::vector<double> x = x0;
        for (size_t i = 0; i < n; ++i) {
            double best = f(x);
            for (double v : values(i)) {
                std::vector<double> y = x;
                y[i] = v;
                const double fy = f(y);
                if (fy < best) best = fy, x = y;
            }
        }
        scored.emplace_back(f(x), x);
    }
    std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::vector<double>> out = {x0};
    for (size_t i = 0; i < scored.size() && out.size() < 4; ++i) out.push_back(scored[i].second);
    return out;
}

// Whether any modeled phase of any case changes when field `f` moves far from `p`'s value.
bool used(Model& m, const SimParams& p, const std::vector<ModeledStep>& at_p, const SimNumberField& f) {
    SimParams q = p;
    const double v = p.*f.member;
    q.*f.member = f.min == 0 ? v + 1000.0 : (v > 2 * f.min ? f.min : f.max);
    const std::vector<ModeledStep> at_q = m.price(q);
    for (size_t i = 0; i < at_p.size(); ++i)
        for (const auto& [phase, us] : at_p[i].phase_us) {
            auto it = at_q[i].phase_us.find(phase);
            if (it == at_q[i].phase_us.end() || std::fabs(it->second - us) > 1e-9 * std::max(us, 1.0)) return true;
        }
    return false;
}

// ---- the tables ----

double error_of(double modeled, double measured) {
    return modeled >= 0 && measured > 0 ? modeled / measured - 1.0 : std::nan("");
}

struct Spread {
    int64_t count = 0, within = 0;
    double median = 0, p90 = 0, max = 0;  // of |error|
    std::string worst;                    // "report phase"
    double worst_error = 0;
};

Spread spread(const std::vector<CalibrationRow>& rows, bool steps, bool after) {
    Spread s;
    std::vector<double> a;
    for (const CalibrationRow& r : rows) {
        if ((r.phase == "step") != steps) continue;
        const double e = error_of(after ? r.after_us : r.before_us, r.measured_us);
        if (std::isnan(e)) continue;
        a.push_back(std::fabs(e));
        s.within += std::fabs(e) <= kTarget ? 1 : 0;
        if (std::fabs(e) >= s.max) s.max = std::fabs(e), s.worst = r.report + " " + r.phase, s.worst_error = e;
    }
    s.count = static_cast<int64_t>(a.size());
    if (a.empty()) return s;
    std::sort(a.begin(), a.end());
    auto q = [&](double f) { return a[std::min(a.size() - 1, static_cast<size_t>(std::ceil(f * a.size())) - 1)]; };
    s.median = a.size() % 2 ? a[a.size() / 2] : 0.5 * (a[a.size() / 2 - 1] + a[a.size() / 2]);
    s.p90 = q(0.9);
    return s;
}

json spread_json(const Spread& s) {
    return {
        {"count", s.count},       {"within_25pct", s.within}, {"median_abs_error", s.median}, {"p90_abs_error", s.p90},
        {"max_abs_error", s.max}, {"worst", s.worst},         {"worst_error", s.worst_error}};
}

// Per phase name over the reports: the median error (signed) and the worst, after the fit (or before without one).
std::vector<std::pair<std::string, json>> by_phase(const std::vector<CalibrationRow>& rows, bool after) {
    std::vector<std::string> order;
    std::map<std::string, std::vector<std::pair<double, std::string>>> errs;
    for (const CalibrationRow& r : rows) {
        const double e = error_of(after ? r.after_us : r.before_us, r.measured_us);
        if (std::isnan(e)) continue;
        if (!errs.count(r.phase)) order.push_back(r.phase);
        errs[r.phase].push_back({e, r.report});
    }
    std::stable_partition(order.begin(), order.end(), [](const std::string& p) { return p != "step"; });
    std::vector<std::pair<std::string, json>> out;
    for (const std::string& p : order) {
        auto v = errs[p];
        std::vector<double> e;
        for (const auto& [x, _] : v) e.push_back(x);
        std::sort(e.begin(), e.end());
        const double median = e.size() % 2 ? e[e.size() / 2] : 0.5 * (e[e.size() / 2 - 1] + e[e.size() / 2]);
        const auto worst = *std::max_element(
            v.begin(), v.end(), [](const auto& a, const auto& b) { return std::fabs(a.first) < std::fabs(b.first); });
        out.push_back({p,
                       {{"reports", v.size()},
                        {"median_error", median},
                        {"worst_error", worst.first},
                        {"worst_report", worst.second}}});
    }
    return out;
}

}  // namespace

std::vector<CalibrationCase> calibration_cases(const std::vector<std::string>& paths, const HardwareProfile& hw) {
    if (paths.empty())
        config_error(
            "REPORT", "no report given", "",
            "pass the measured reports: moebench calibrate R1.json R2.json ... " + flag_of("hardware") + " PROFILE");
    std::vector<CalibrationCase> cases;
    for (size_t i = 0; i < paths.size(); ++i) {
        for (size_t j = 0; j < i; ++j)
            if (paths[i] == paths[j] || same_file(paths[i], paths[j]))
                config_error("REPORT", "the same report is given twice (it would count twice in the fit)",
                             paths[j] + " and " + paths[i], "pass each report once");
        cases.push_back(case_of_report(paths[i]));
        const CalibrationCase& c = cases.back();
        if (c.machine != cases.front().machine)
            config_error(c.name + ": environment",
                         fmt::format("is another machine than {} ({}); a profile models one machine",
                                     cases.front().name, cases.front().machine),
                         c.machine, "calibrate each machine's reports against its own profile");
        if (!hw.machine.empty() && c.machine != hw.machine)
            config_error(
                c.name + ": environment",
                fmt::format("is another machine than the one profile {} was measured on ({})", hw.name, hw.machine),
                c.machine,
                "pass reports of that machine, or measure this one's profile (moebench devices " +
                    flag_of("cpu_profile") + ")");
    }
    return cases;
}

CalibrationResult calibrate(const std::vector<CalibrationCase>& cases, const HardwareProfile& hw,
                            const SimParams& start, bool fit) {
    if (cases.empty())
        config_error(
            "REPORT", "no report given", "",
            "pass the measured reports: moebench calibrate R1.json R2.json ... " + flag_of("hardware") + " PROFILE");
    Model m{cases, {}, 0};
    for (const CalibrationCase& c : cases) {
        SimParams p = start;
        if (!c.mla_form.empty())
            p.mla_form = sim_params_from_json({{"mla_form", c.mla_form}}, c.name + ": roofline.mla_form").mla_form;
        try {
            m.replays.emplace_back(c.run, hw, p);
        } catch (const ConfigError& e) {
            throw ConfigError(c.name + ": its run config on the sim with profile " + hw.name + ": " + e.what());
        } catch (const UnsupportedError& e) {
            throw UnsupportedError(c.name + ": its run config on the sim with profile " + hw.name + ": " + e.what());
        }
    }
    CalibrationResult r;
    r.hardware = hw.name;
    r.fitted = fit;
    r.before = start;
    const std::vector<ModeledStep> before = m.price(start);
    r.objective_before = m.objective(before, &r.num_terms);

    Coordinates c;
    for (const SimNumberField& f : sim_number_fields()) {
        const bool is_used = used(m, start, before, f);
        if (is_used) c.fields.push_back(f);
        r.params.push_back({f.key, start.*f.member, start.*f.member, is_used ? "fitted" : "unused"});
    }
    SimParams best = start;
    if (fit) {
        if (cases.size() < c.fields.size()) {
            std::string keys;
            for (const SimNumberField& f : c.fields) keys += (keys.empty() ? "" : ", ") + f.key;
            config_error("REPORT",
                         fmt::format("{} report(s) for {} parameters to fit ({})", cases.size(), c.fields.size(), keys),
                         std::to_string(cases.size()),
                         fmt::format("pass at least {} measured reports of this machine (other batch sizes, modes, "
                                     "models), or {} for the profile's own errors",
                                     c.fields.size(), flag_of("no_fit")));
        }
        if (r.num_terms == 0)
            config_error("REPORT", "no phase of these reports is one the sim models", "",
                         "pass reports of moebench run (their phases are the sim's)");
        const Objective f = [&](const std::vector<double>& x) { return m.objective(c.params(start, x)); };
        std::vector<double> xbest = c.point(start);
        double fbest = f(xbest);
        for (std::vector<double> x : starting_points(f, c, xbest)) {
            const double fx = minimise(f, c, x);
            if (fx < fbest) fbest = fx, xbest = x;
        }
        best = c.params(start, xbest);
        // A parameter no phase is bound by at the optimum moved freely: its start value fits as well, and is kept.
        for (const SimNumberField& f : c.fields) {
            if (best.*f.member == start.*f.member) continue;
            SimParams q = best;
            q.*f.member = start.*f.member;
            const double fq = m.objective(q);
            if (fq > fbest * (1 + 1e-9)) continue;
            best = q;
            fbest = fq;
            for (CalibrationParam& p : r.params)
                if (p.key == f.key) p.status = "not determined";
        }
        for (CalibrationParam& p : r.params)
            for (const SimNumberField& f : c.fields)
                if (p.key == f.key) p.after = best.*f.member;
    }
    r.after = best;
    const std::vector<ModeledStep> after = fit ? m.price(best) : before;
    r.objective_after = m.objective(after);
    r.evaluations = m.evaluations;

    for (size_t i = 0; i < cases.size(); ++i) {
        const CalibrationCase& cs = cases[i];
        for (size_t k = 0; k < kNumPhases; ++k) {
            const std::string phase(phase_name(static_cast<Phase>(k)));
            auto meas = cs.measured_phase_us.find(phase);
            auto b = before[i].phase_us.find(phase), a = after[i].phase_us.find(phase);
            if (meas == cs.measured_phase_us.end() && b == before[i].phase_us.end()) continue;
            r.rows.push_back({cs.name, phase, meas == cs.measured_phase_us.end() ? -1.0 : meas->second,
                              b == before[i].phase_us.end() ? -1.0 : b->second,
                              a == after[i].phase_us.end() ? -1.0 : a->second});
        }
        r.rows.push_back({cs.name, "step", cs.measured_step_us > 0 ? cs.measured_step_us : -1.0, before[i].step_us,
                          after[i].step_us});
    }
    return r;
}

json calibration_document(const CalibrationResult& r) {
    json params = json::array();
    for (const CalibrationParam& p : r.params)
        params.push_back({{"key", p.key}, {"before", p.before}, {"after", p.after}, {"status", p.status}});
    json rows = json::array();
    auto num = [](double v) { return v < 0 ? json(nullptr) : json(v); };
    auto err = [](double e) { return std::isnan(e) ? json(nullptr) : json(e); };
    for (const CalibrationRow& x : r.rows)
        rows.push_back({{"report", x.report},
                        {"phase", x.phase},
                        {"measured_us", num(x.measured_us)},
                        {"modeled_before_us", num(x.before_us)},
                        {"modeled_after_us", num(x.after_us)},
                        {"error_before", err(error_of(x.before_us, x.measured_us))},
                        {"error_after", err(error_of(x.after_us, x.measured_us))}});
    json per_phase = json::object();
    for (const auto& [phase, j] : by_phase(r.rows, r.fitted)) per_phase[phase] = j;
    return {{"schema", "moebench.calibration/1"},
            {"hardware", r.hardware},
            {"fitted", r.fitted},
            {"sources",
             {{"measured_us",
               "measured: the report's p50 over its measured steps (phases: the step's sum "
               "over the layers run)"},
              {"modeled_before_us", "modeled: the sim with the profile as given"},
              {"modeled_after_us", "modeled: the sim with the fitted parameters"},
              {"error", "modeled / measured - 1"}}},
            {"objective",
             {{"sum_sq_log_error_before", r.objective_before},
              {"sum_sq_log_error_after", r.objective_after},
              {"phase_rows", r.num_terms},
              {"parameter_sets_priced", r.evaluations}}},
            {"params", params},
            {"sim", sim_params_to_json(r.after)},
            {"summary",
             {{"phases_before", spread_json(spread(r.rows, false, false))},
              {"phases_after", spread_json(spread(r.rows, false, true))},
              {"steps_before", spread_json(spread(r.rows, true, false))},
              {"steps_after", spread_json(spread(r.rows, true, true))},
              {"per_phase", per_phase}}},
            {"rows", rows}};
}

json calibrated_profile(const json& profile, const CalibrationResult& r, const std::vector<std::string>& reports,
                        const std::string& name) {
    json doc = profile;
    doc["name"] = name;
    doc["sim"] = sim_params_to_json(r.after);
    std::string list;
    for (const std::string& rep : reports) list += (list.empty() ? "" : ", ") + rep;
    const Spread pb = spread(r.rows, false, false), pa = spread(r.rows, false, true);
    const Spread sb = spread(r.rows, true, false), sa = spread(r.rows, true, true);
    std::string fitted;
    for (const CalibrationParam& p : r.params)
        if (p.status == "fitted") fitted += (fitted.empty() ? "" : ", ") + p.key;
    if (!doc.contains("sources") || !doc["sources"].is_array()) doc["sources"] = json::array();
    doc["sources"].push_back(fmt::format(
        "sim {} fitted by moebench calibrate (moebench {}, {}) from profile {} to {} measured report(s): {}; median "
        "|error| per phase {:.1f}% -> {:.1f}%, per step {:.1f}% -> {:.1f}% (on the reports it was fitted to: judge it "
        "on others)",
        fitted.empty() ? "nothing" : fitted, MOEBENCH_GIT_REV, utc_now(false), r.hardware, reports.size(), list,
        100 * pb.median, 100 * pa.median, 100 * sb.median, 100 * sa.median));
    return doc;
}

}  // namespace moebench
