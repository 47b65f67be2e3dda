// SPDX-License-Identifier: Apache-2.0
// Point matching, noise-aware verdicts and the text / Markdown / JSON renderings of a comparison.
#include "compare/compare.hpp"

#include "common/error.hpp"
#include "engine/phase.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

namespace moebench {

namespace {

double num(const json& j, std::initializer_list<const char*> path, double dflt = NAN) {
    const json* cur = &j;
    for (const char* k : path) {
        if (!cur->is_object() || !cur->contains(k)) return dflt;
        cur = &cur->at(k);
    }
    return cur->is_number() ? cur->get<double>() : dflt;
}

std::string scalar(const json& v) {
    if (v.is_null()) return "-";
    if (v.is_string()) return v.get<std::string>();
    return v.dump();
}

// Samples behind a mean: measured iterations, else the number of step samples.
double sample_count(const json& run) {
    double n = num(run, {"iterations", "measured"});
    if (std::isnan(n)) {
        const json* s = run.contains("latency") && run["latency"].contains("step_samples_us") ? &run["latency"]["step_samples_us"] : nullptr;
        n = s && s->is_array() ? static_cast<double>(s->size()) : 1.0;
    }
    return std::max(1.0, n);
}

std::map<std::string, std::set<std::string>> axis_values(const json& runs) {
    std::map<std::string, std::set<std::string>> v;
    for (const auto& r : runs)
        if (r.contains("axes") && r["axes"].is_object())
            for (const auto& [k, x] : r["axes"].items()) v[k].insert(x.dump());
    return v;
}

json point_key(const json& run, const std::vector<std::string>& keys) {
    json k = json::object();
    for (const auto& name : keys) k[name] = run.contains("axes") && run["axes"].contains(name) ? run["axes"][name] : json(nullptr);
    return k;
}

json verdict_json(const Verdict& v) {
    return json{{"verdict", v.verdict}, {"ratio", v.ratio}, {"delta_us", v.delta_us}, {"noise_us", v.noise_us},
                {"regression", v.regression}};
}

// Only the axes that vary in either report identify a point for a reader.
std::string label_of(const json& key, const std::set<std::string>& shown) {
    std::string s;
    for (const auto& [k, v] : key.items()) {
        if (v.is_null() || !shown.count(k)) continue;
        s += (s.empty() ? "" : " ") + k + "=" + scalar(v);
    }
    return s.empty() ? "(single point)" : s;
}

}  // namespace

Verdict classify(double mean_a, double sd_a, double n_a, double mean_b, double sd_b, double n_b, const CompareOptions& o) {
    Verdict v;
    v.delta_us = mean_b - mean_a;
    v.ratio = mean_a > 0 ? mean_b / mean_a : (mean_b > 0 ? INFINITY : 1.0);
    double se = std::sqrt((n_a > 0 ? sd_a * sd_a / n_a : 0) + (n_b > 0 ? sd_b * sd_b / n_b : 0));
    // Two runs of the same thing drift apart by more than their standard errors (placement, clocks, a busy
    // neighbour), so a difference inside the central band of the step-to-step spread is also noise.
    double pooled_sd = std::sqrt((sd_a * sd_a + sd_b * sd_b) / 2);
    v.noise_us = std::max({o.k_sigma * se, o.spread_z * pooled_sd, o.noise_floor * std::fabs(mean_a)});
    if (std::fabs(v.delta_us) <= v.noise_us) v.verdict = "same";
    else v.verdict = v.delta_us > 0 ? "slower" : "faster";
    v.regression = v.verdict == "slower" && v.ratio - 1.0 > o.threshold;
    return v;
}

double parse_fraction(const std::string& text, const std::string& field) {
    std::string t = text;
    bool percent = !t.empty() && t.back() == '%';
    if (percent) t.pop_back();
    char* end = nullptr;
    double v = std::strtod(t.c_str(), &end);
    if (t.empty() || end != t.c_str() + t.size() || !std::isfinite(v) || v < 0)
        config_error(field, "must be a non-negative fraction or percentage", text, "write e.g. 5% or 0.05");
    if (percent || v >= 1) v /= 100.0;
    return v;
}

json compare_reports(const json& a, const json& b, const CompareOptions& o, const std::string& name_a, const std::string& name_b) {
    for (const auto& [r, n] : {std::pair{&a, &name_a}, std::pair{&b, &name_b}})
        if (!r->is_object() || !r->contains("runs") || !(*r)["runs"].is_array())
            config_error(*n, "is not a moebench report (no runs[])", "", "pass reports written by moebench run or sweep");
    const json& ra = a["runs"];
    const json& rb = b["runs"];

    // Matching keys: every axis, minus those constant within each report but different between them (the contrast:
    // backend=cpu vs backend=cuda is what is being compared, not a reason to leave points unmatched).
    auto va = axis_values(ra), vb = axis_values(rb);
    std::set<std::string> all;
    for (auto& [k, s] : va) all.insert(k);
    for (auto& [k, s] : vb) all.insert(k);
    std::vector<std::string> keys;
    json contrast = json::object();
    if (!o.match_keys.empty()) {
        keys = o.match_keys;
        std::string known;
        for (const auto& k : all) {
            if (!known.empty()) known += ", ";
            known += k;
        }
        for (const auto& k : keys)
            if (!all.count(k))
                config_error("--match", "is not an axis of either report", k,
                             "use axes the reports have: " + (known.empty() ? std::string("(none)") : known));
    } else {
        for (const auto& k : all) {
            bool const_a = va[k].size() == 1, const_b = vb[k].size() == 1;
            if (const_a && const_b && *va[k].begin() != *vb[k].begin()) {
                contrast[k] = {json::parse(*va[k].begin()), json::parse(*vb[k].begin())};
                continue;
            }
            keys.push_back(k);
        }
    }

    std::set<std::string> shown;
    for (const auto& k : keys)
        if (va[k].size() > 1 || vb[k].size() > 1) shown.insert(k);
    auto label_of = [&](const json& key) { return ::moebench::label_of(key, shown); };
    std::map<std::string, size_t> index_b;
    for (size_t j = 0; j < rb.size(); ++j) index_b.emplace(point_key(rb[j], keys).dump(), j);
    std::set<size_t> used_b;
    json points = json::array(), unmatched_a = json::array(), unmatched_b = json::array();
    int n_faster = 0, n_slower = 0, n_same = 0, n_regress = 0, n_not_ok = 0;
    for (size_t i = 0; i < ra.size(); ++i) {
        json key = point_key(ra[i], keys);
        auto it = index_b.find(key.dump());
        if (it == index_b.end() || used_b.count(it->second)) {
            unmatched_a.push_back(label_of(key));
            continue;
        }
        used_b.insert(it->second);
        const json& pa = ra[i];
        const json& pb = rb[it->second];
        json p = {{"key", key}, {"label", label_of(key)}, {"index_a", i}, {"index_b", it->second}};
        if (pa.value("status", "ok") != "ok" || pb.value("status", "ok") != "ok") {
            p["verdict"] = "not comparable";
            p["why"] = fmt::format("{}: {}, {}: {}", name_a, pa.value("status", "ok"), name_b, pb.value("status", "ok"));
            ++n_not_ok;
            points.push_back(p);
            continue;
        }
        double na = sample_count(pa), nb = sample_count(pb);
        Verdict step = classify(num(pa, {"latency", "step", "mean_us"}, 0), num(pa, {"latency", "step", "stdev_us"}, 0), na,
                                num(pb, {"latency", "step", "mean_us"}, 0), num(pb, {"latency", "step", "stdev_us"}, 0), nb, o);
        p["step"] = verdict_json(step);
        p["step"]["a_mean_us"] = num(pa, {"latency", "step", "mean_us"}, 0);
        p["step"]["b_mean_us"] = num(pb, {"latency", "step", "mean_us"}, 0);
        p["step"]["a_p95_us"] = num(pa, {"latency", "step", "p95_us"}, 0);
        p["step"]["b_p95_us"] = num(pb, {"latency", "step", "p95_us"}, 0);
        p["step"]["n_a"] = na;
        p["step"]["n_b"] = nb;
        double ta = num(pa, {"throughput", "tokens_per_s"}, 0), tb = num(pb, {"throughput", "tokens_per_s"}, 0);
        p["throughput_ratio"] = ta > 0 ? tb / ta : 0.0;
        p["a_tokens_per_s"] = ta;
        p["b_tokens_per_s"] = tb;
        bool regress = step.regression;
        json phases = json::array();
        for (auto name : kPhaseNames) {
            std::string ph(name);
            const json* xa = pa.contains("latency") && pa["latency"].contains("phases") && pa["latency"]["phases"].contains(ph)
                                 ? &pa["latency"]["phases"][ph] : nullptr;
            const json* xb = pb.contains("latency") && pb["latency"].contains("phases") && pb["latency"]["phases"].contains(ph)
                                 ? &pb["latency"]["phases"][ph] : nullptr;
            if (!xa && !xb) continue;
            if (!xa || !xb) {
                phases.push_back({{"phase", ph}, {"verdict", xa ? "only in " + name_a : "only in " + name_b}});
                continue;
            }
            Verdict v = classify(num(*xa, {"mean_us"}, 0), num(*xa, {"stdev_us"}, 0), na, num(*xb, {"mean_us"}, 0),
                                 num(*xb, {"stdev_us"}, 0), nb, o);
            json pj = verdict_json(v);
            pj["phase"] = ph;
            pj["a_mean_us"] = num(*xa, {"mean_us"}, 0);
            pj["b_mean_us"] = num(*xb, {"mean_us"}, 0);
            phases.push_back(pj);
            if (o.gate_phases && v.regression) regress = true;
        }
        p["phases"] = phases;
        p["verdict"] = step.verdict;
        p["regression"] = regress;
        if (step.verdict == "faster") ++n_faster;
        else if (step.verdict == "slower") ++n_slower;
        else ++n_same;
        if (regress) ++n_regress;
        points.push_back(p);
    }
    for (size_t j = 0; j < rb.size(); ++j)
        if (!used_b.count(j)) unmatched_b.push_back(label_of(point_key(rb[j], keys)));

    json out;
    out["a"] = name_a;
    out["b"] = name_b;
    out["rule"] = fmt::format("same when |mean_B - mean_A| <= max({} * sqrt(sd_A^2/n_A + sd_B^2/n_B), "
                              "{} * sqrt((sd_A^2 + sd_B^2)/2), {}% of mean_A); a regression is slower by more than {}% ({})",
                              o.k_sigma, o.spread_z, 100 * o.noise_floor, 100 * o.threshold,
                              o.gate_phases ? "step or any phase" : "step");
    out["threshold"] = o.threshold;
    out["match_keys"] = keys;
    out["contrast"] = contrast;
    out["points"] = points;
    out["unmatched_a"] = unmatched_a;
    out["unmatched_b"] = unmatched_b;
    out["counts"] = {{"matched", points.size()}, {"faster", n_faster}, {"slower", n_slower}, {"same", n_same},
                     {"not_comparable", n_not_ok}};
    out["regressions"] = n_regress;
    out["exit_code"] = n_regress > 0 ? 1 : 0;
    return out;
}

std::string render_comparison(const json& cmp, const std::string& format) {
    if (format == "json") return cmp.dump(2) + "\n";
    bool md = format == "md";
    if (!md && format != "text") config_error("--format", "unknown format", format, "use text, json or md");
    std::string a = cmp.value("a", "A"), b = cmp.value("b", "B"), o;
    o += md ? "# moebench compare\n\n" : "";
    o += fmt::format("{}A = {}\n{}B = {}\n", md ? "- " : "", a, md ? "- " : "", b);
    for (const auto& [k, v] : cmp["contrast"].items())
        o += fmt::format("{}contrast: {} = {} (A) vs {} (B)\n", md ? "- " : "", k, scalar(v[0]), scalar(v[1]));
    o += fmt::format("{}rule: {}\n\n", md ? "- " : "", cmp.value("rule", ""));
    if (md) o += "| point | phase | A mean µs | B mean µs | B/A | noise ± µs | verdict |\n|---|---|---:|---:|---:|---:|---|\n";
    else o += fmt::format("{:<36} {:<17} {:>12} {:>12} {:>7} {:>10}  {}\n", "point", "phase", "A mean us", "B mean us", "B/A", "noise us", "verdict");
    auto line = [&](const std::string& pt, const std::string& ph, double ma, double mb, double ratio, double noise, const std::string& verdict) {
        if (md) o += fmt::format("| {} | {} | {:.2f} | {:.2f} | {:.3f} | {:.2f} | {} |\n", pt, ph, ma, mb, ratio, noise, verdict);
        else o += fmt::format("{:<36} {:<17} {:>12.2f} {:>12.2f} {:>7.3f} {:>10.2f}  {}\n", pt.substr(0, 36), ph, ma, mb, ratio, noise, verdict);
    };
    for (const auto& p : cmp["points"]) {
        std::string label = p.value("label", "");
        if (!p.contains("step")) {
            if (md) o += fmt::format("| {} | step | | | | | {} ({}) |\n", label, p.value("verdict", ""), p.value("why", ""));
            else o += fmt::format("{:<36} {:<17} {}\n", label.substr(0, 36), "step", p.value("verdict", "") + " (" + p.value("why", "") + ")");
            continue;
        }
        const json& s = p["step"];
        std::string verdict = s.value("verdict", "") + (s.value("regression", false) ? " REGRESSION" : "");
        line(label, "step", s.value("a_mean_us", 0.0), s.value("b_mean_us", 0.0), s.value("ratio", 0.0), s.value("noise_us", 0.0), verdict);
        for (const auto& ph : p["phases"]) {
            if (!ph.contains("ratio")) {
                if (md) o += fmt::format("| | {} | | | | | {} |\n", ph.value("phase", ""), ph.value("verdict", ""));
                else o += fmt::format("{:<36} {:<17} {}\n", "", ph.value("phase", ""), ph.value("verdict", ""));
                continue;
            }
            std::string v = ph.value("verdict", "") + (ph.value("regression", false) ? " (beyond threshold)" : "");
            line("", "  " + ph.value("phase", ""), ph.value("a_mean_us", 0.0), ph.value("b_mean_us", 0.0), ph.value("ratio", 0.0),
                 ph.value("noise_us", 0.0), v);
        }
        if (!md) o += fmt::format("{:<36} {:<17} {:>12.1f} {:>12.1f} {:>7.3f}\n", "", "tokens/s", p.value("a_tokens_per_s", 0.0),
                                  p.value("b_tokens_per_s", 0.0), p.value("throughput_ratio", 0.0));
    }
    for (const char* side : {"unmatched_a", "unmatched_b"})
        for (const auto& u : cmp[side])
            o += fmt::format("{}unmatched (only in {}): {}\n", md ? "- " : "", side[10] == 'a' ? a : b, u.get<std::string>());
    const json& c = cmp["counts"];
    o += fmt::format("\n{}{} matched: {} faster, {} slower, {} same, {} not comparable; {} regression(s) beyond {:.1f}% -> exit {}\n",
                     md ? "**summary**: " : "summary: ", c.value("matched", 0), c.value("faster", 0), c.value("slower", 0),
                     c.value("same", 0), c.value("not_comparable", 0), cmp.value("regressions", 0),
                     100 * cmp.value("threshold", 0.0), cmp.value("exit_code", 0));
    return o;
}

}  // namespace moebench
