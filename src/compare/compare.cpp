// SPDX-License-Identifier: Apache-2.0
// Noise-aware verdicts of matched points and the text / Markdown / JSON renderings of a comparison (matching:
// point_match.cpp; warnings: environment_diff.cpp).
#include "compare/compare.hpp"
#include "core/report_keys.hpp"

#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "compare/environment_diff.hpp"
#include "compare/point_match.hpp"
#include "core/phase.hpp"
#include "report/formats.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace moebench {

namespace {

json verdict_json(const Verdict& v) {
    json j{{"verdict", v.verdict},
           {"ratio", v.ratio},
           {"delta_us", v.delta_us},
           {"noise_us", v.noise_us},
           {"regression", v.regression}};
    if (v.inconclusive) {
        j["inconclusive"] = true;
        j["rerun_iterations"] = v.rerun_iterations;
        j["spread_us"] = v.spread_us;
        j["spread_too_wide"] = v.spread_too_wide;
    }
    return j;
}

// What would make an inconclusive verdict conclusive: more iterations narrow the standard-error term (to about
// rerun_iterations per run); the spread term narrows only when it came from a few cold or disturbed steps.
std::string rerun_advice(const Verdict& v, double mean_a, double n_now, const CompareOptions& o) {
    std::string s;
    if (static_cast<double>(v.rerun_iterations) > n_now)
        s = fmt::format(
            "rerun with more iterations: about {} iterations per run narrow {:g} standard errors to the "
            "{:g}% threshold",
            v.rerun_iterations, o.k_sigma, 100 * o.threshold);
    if (v.spread_too_wide) {
        const double pct = mean_a > 0 ? 100 * v.spread_us / mean_a : INFINITY;
        s += fmt::format(
            "{}the step-to-step spread itself ({:g} pooled standard deviations = {:.1f}% of A's mean) is "
            "wider than the threshold, and iterations narrow it only when it came from a few cold or "
            "disturbed steps: warm up ({}) on a quieter machine, or raise {} above {:.1f}%",
            s.empty() ? "rerun with more iterations after a warm-up: " : "; ", o.spread_z, pct, flag_of("warmup"),
            flag_of("threshold"), pct);
    }
    if (s.empty()) s = "rerun with more iterations";  // a threshold of 0: nothing but a spread of 0 fits it
    return s;
}

// One matched pair of ok points: the step and every phase of either side.
json compare_point(const ReadRun& pa, const ReadRun& pb, const std::string& name_a, const std::string& name_b,
                   const CompareOptions& o) {
    const double na = static_cast<double>(pa.num_samples), nb = static_cast<double>(pb.num_samples);
    Verdict step = classify(pa.step.mean_us, pa.step.stdev_us, na, pb.step.mean_us, pb.step.stdev_us, nb, o);
    json p;
    p[keys::kStep] = verdict_json(step);
    p[keys::kStep]["a_mean_us"] = pa.step.mean_us;
    p[keys::kStep]["b_mean_us"] = pb.step.mean_us;
    p[keys::kStep]["a_p95_us"] = pa.step.p95_us;
    p[keys::kStep]["b_p95_us"] = pb.step.p95_us;
    p[keys::kStep]["n_a"] = na;
    p[keys::kStep]["n_b"] = nb;
    p["throughput_ratio"] = pa.tokens_per_s > 0 ? pb.tokens_per_s / pa.tokens_per_s : 0.0;
    p["a_tokens_per_s"] = pa.tokens_per_s;
    p["b_tokens_per_s"] = pb.tokens_per_s;
    bool regress = step.regression;
    std::string verdict = step.verdict, why;
    if (step.inconclusive) why = "step: " + rerun_advice(step, pa.step.mean_us, std::min(na, nb), o);
    json phases = json::array();
    for (auto name : kPhaseNames) {
        std::string ph(name);
        auto xa = pa.phases.find(ph), xb = pb.phases.find(ph);
        bool in_a = xa != pa.phases.end(), in_b = xb != pb.phases.end();
        if (!in_a && !in_b) continue;
        if (!in_a || !in_b) {
            phases.push_back({{"phase", ph}, {"verdict", in_a ? "only in " + name_a : "only in " + name_b}});
            continue;
        }
        Verdict v =
            classify(xa->second.mean_us, xa->second.stdev_us, na, xb->second.mean_us, xb->second.stdev_us, nb, o);
        json pj = verdict_json(v);
        pj["phase"] = ph;
        pj["a_mean_us"] = xa->second.mean_us;
        pj["b_mean_us"] = xb->second.mean_us;
        phases.push_back(pj);
        if (o.gate_phases && v.regression) regress = true;
        if (o.gate_phases && v.inconclusive && !step.inconclusive && verdict != "inconclusive") {
            verdict = "inconclusive";  // a gated phase that cannot be told apart fails the gate like the step
            why = ph + ": " + rerun_advice(v, xa->second.mean_us, std::min(na, nb), o);
        }
    }
    p[keys::kPhases] = phases;
    p["verdict"] = verdict;
    p["regression"] = regress;
    p["inconclusive"] = verdict == "inconclusive";
    if (!why.empty()) p["why"] = why;
    return p;
}

// "model=tiny-gqa batch=2": every match key of a point, for messages about that one point.
std::string key_label(const json& key) {
    std::string s;
    for (const auto& [k, v] : key.items())
        if (!v.is_null()) s += (s.empty() ? "" : " ") + k + "=" + key_text(v);
    return s;
}

// Matched points that did not both run give no verdict; when none did, the gate compared nothing.
[[noreturn]] void nothing_ran_in_both(const ReadReport& a, const ReadReport& b, const json& points) {
    std::string why;
    for (const auto& p : points) {
        if (why.size() > 200) {
            why += "; ...";
            break;
        }
        why += (why.empty() ? "" : "; ") + p.value("label", "") + ": " + p.value("why", "");
    }
    config_error(a.name + " vs " + b.name, "no matched point ran in both reports, so nothing was compared", why,
                 "compare reports whose points finished (status ok)");
}

}  // namespace

Verdict classify(double mean_a, double sd_a, double n_a, double mean_b, double sd_b, double n_b,
                 const CompareOptions& o) {
    Verdict v;
    v.delta_us = mean_b - mean_a;
    v.ratio = mean_a > 0 ? mean_b / mean_a : (mean_b > 0 ? INFINITY : 1.0);
    double se = std::sqrt((n_a > 0 ? sd_a * sd_a / n_a : 0) + (n_b > 0 ? sd_b * sd_b / n_b : 0));
    // Two runs of the same thing drift apart by more than their standard errors (placement, clocks, a busy
    // neighbour), so a difference inside the central band of the step-to-step spread is also noise.
    double pooled_sd = std::sqrt((sd_a * sd_a + sd_b * sd_b) / 2);
    v.spread_us = o.spread_z * pooled_sd;
    v.noise_us = std::max({o.k_sigma * se, v.spread_us, o.noise_floor * std::fabs(mean_a)});
    if (std::fabs(v.delta_us) <= v.noise_us)
        v.verdict = "same";
    else
        v.verdict = v.delta_us > 0 ? "slower" : "faster";
    v.regression = v.verdict == "slower" && v.ratio - 1.0 > o.threshold;
    // "Same" inside a band wider than the threshold would pass a slowdown beyond the threshold unseen. (Outside the
    // band the verdict stands: slower is then beyond the threshold too, a regression.)
    const double threshold_us = o.threshold * std::fabs(mean_a);
    if (v.verdict == "same" && v.noise_us > threshold_us) {
        v.verdict = "inconclusive";
        v.inconclusive = true;
        // k * sqrt((sd_a^2 + sd_b^2) / n) <= threshold_us  <=>  n >= k^2 (sd_a^2 + sd_b^2) / threshold_us^2
        const double n = o.k_sigma * o.k_sigma * (sd_a * sd_a + sd_b * sd_b) / (threshold_us * threshold_us);
        v.rerun_iterations =
            threshold_us > 0 && n < 1e15 ? std::max<int64_t>(2, static_cast<int64_t>(std::ceil(n))) : 0;
        v.spread_too_wide = v.spread_us > threshold_us;
    }
    return v;
}

double parse_fraction(const std::string& text, const std::string& field, double max_fraction) {
    std::string t = text;
    bool percent = !t.empty() && t.back() == '%';
    if (percent) t.pop_back();
    char* end = nullptr;
    double v = std::strtod(t.c_str(), &end);
    if (t.empty() || end != t.c_str() + t.size() || !std::isfinite(v) || v < 0)
        config_error(field, "must be a non-negative fraction or percentage", text, "write e.g. 5% or 0.05");
    if (percent || v >= 1) v /= 100.0;
    if (v > max_fraction)  // a band or threshold this wide would pass any slowdown: a gate switched off by a typo
        config_error(field, fmt::format("must be at most {:g}%", 100.0 * max_fraction), text, "write e.g. 5% or 0.05");
    return v;
}

json compare_reports(const json& a, const json& b, const CompareOptions& o, const std::string& name_a,
                     const std::string& name_b) {
    return compare_reports(read_report(a, name_a), read_report(b, name_b), o);
}

json compare_reports(const ReadReport& a, const ReadReport& b, const CompareOptions& o) {
    if (o.noise_floor > o.threshold)
        config_error(flag_of("noise_floor"),
                     fmt::format("is wider than {} ({:g}%): every point would be inconclusive", flag_of("threshold"),
                                 100 * o.threshold),
                     fmt::format("{:g}%", 100 * o.noise_floor),
                     fmt::format("lower {} or raise {}", flag_of("noise_floor"), flag_of("threshold")));
    const PointMatch m = match_points(a, b, o.match_keys);
    json points = json::array(), unmatched_a = json::array(), unmatched_b = json::array();
    int n_faster = 0, n_slower = 0, n_same = 0, n_inconclusive = 0, n_regress = 0, n_not_ok = 0, n_failed_b = 0,
        n_missing_b = 0, n_mixed = 0;
    int64_t rerun_max = 0;
    bool spread_too_wide = false;
    for (const auto& [i, j] : m.pairs) {
        const ReadRun &pa = a.runs[i], &pb = b.runs[j];
        json p = {{"key", m.key_a[i]}, {"label", m.label(m.key_a[i])}, {"index_a", i}, {"index_b", j}};
        // What B did not run fails the gate: a point that failed, and one that A ran and B skipped (missing).
        if (pb.status == "failed" || (pa.ok() && !pb.ok())) {
            const bool failed = pb.status == "failed";
            p["verdict"] = failed ? "failed in B" : "missing in B";
            p["why"] = fmt::format("{}: {}{}", b.name, pb.status, pb.reason.empty() ? "" : ": " + pb.reason);
            p["fails_gate"] = failed || !o.allow_missing;
            ++(failed ? n_failed_b : n_missing_b);
            points.push_back(p);
            continue;
        }
        if (!pa.ok() || !pb.ok()) {
            p["verdict"] = "not comparable";
            p["why"] = fmt::format("{}: {}, {}: {}", a.name, pa.status, b.name, pb.status);
            ++n_not_ok;
            points.push_back(p);
            continue;
        }
        // A model is not a run of the same thing: its verdict against a measurement says how far the model is off.
        const bool mixed = (pa.timing_source == "modeled") != (pb.timing_source == "modeled");
        if (mixed && !o.allow_modeled)
            config_error(a.name + " vs " + b.name + ": " + key_label(m.key_a[i]),
                         fmt::format("times are {} (A) vs {} (B): a model is not a run of the same thing, so a verdict "
                                     "would call a modeled figure faster or slower than a measured one",
                                     pa.timing_source, pb.timing_source),
                         "",
                         "compare measured with measured (or modeled with modeled), or pass " +
                             flag_of("allow_modeled") + " to compare them anyway (the verdict then says so)");
        p.update(compare_point(pa, pb, a.name, b.name, o));
        if (mixed) {
            p["sources"] = {{"a", pa.timing_source}, {"b", pb.timing_source}};
            p["note"] = fmt::format("A {} vs B {}: this verdict compares a model with a measurement ({})",
                                    pa.timing_source, pb.timing_source, flag_of("allow_modeled"));
            ++n_mixed;
        }
        const std::string verdict = p["verdict"];
        if (verdict == "faster")
            ++n_faster;
        else if (verdict == "slower")
            ++n_slower;
        else if (verdict == "inconclusive")
            ++n_inconclusive;
        else
            ++n_same;
        if (p["regression"].get<bool>()) ++n_regress;
        if (verdict == "inconclusive") {
            const json& s = p[keys::kStep].value("inconclusive", false) ? p[keys::kStep] : json::object();
            rerun_max = std::max(rerun_max, s.value("rerun_iterations", int64_t{0}));
            spread_too_wide = spread_too_wide || s.value("spread_too_wide", false);
        }
        p["fails_gate"] = p["regression"].get<bool>() || verdict == "inconclusive";
        points.push_back(p);
    }
    if (n_not_ok + n_failed_b + n_missing_b == static_cast<int>(points.size())) nothing_ran_in_both(a, b, points);
    for (size_t i : m.unmatched_a) unmatched_a.push_back(m.label(m.key_a[i]));
    for (size_t j : m.unmatched_b) unmatched_b.push_back(m.label(m.key_b[j]));
    n_missing_b += static_cast<int>(m.unmatched_a.size());
    for (size_t j : m.unmatched_b) n_failed_b += b.runs[j].status == "failed" ? 1 : 0;  // a new point B could not run

    // Why the gate fails, one sentence per cause (the CLI prints them; docs/sweep.md, "Exit code").
    json failures = json::array();
    if (n_regress > 0)
        failures.push_back(
            fmt::format("{} point(s) slower beyond the threshold of {:g}%", n_regress, 100 * o.threshold));
    if (n_inconclusive > 0) {
        std::string s = fmt::format(
            "{} point(s) inconclusive: the noise band is wider than the threshold of {:g}%, so a "
            "slowdown beyond it could pass as noise; ",
            n_inconclusive, 100 * o.threshold);
        if (rerun_max > 0)
            s += fmt::format(
                "rerun with more iterations (about {} iterations per run narrow {:g} standard "
                "errors to the threshold)",
                rerun_max, o.k_sigma);
        else
            s += "rerun with more iterations";
        if (spread_too_wide)
            s += fmt::format(
                "; the step-to-step spread alone is wider than the threshold: warm up ({}) on a quieter "
                "machine, or raise {} (see each point's why)",
                flag_of("warmup"), flag_of("threshold"));
        failures.push_back(s);
    }
    if (n_failed_b > 0) failures.push_back(fmt::format("{} point(s) failed in B", n_failed_b));
    if (n_missing_b > 0 && !o.allow_missing)
        failures.push_back(fmt::format("{} point(s) of A missing from B ({} lets absent or skipped points pass)",
                                       n_missing_b, flag_of("allow_missing")));

    json out;
    out["a"] = a.name;
    out["b"] = b.name;
    out["rule"] = fmt::format(
        "same when |mean_B - mean_A| <= max({} * sqrt(sd_A^2/n_A + sd_B^2/n_B), "
        "{} * sqrt((sd_A^2 + sd_B^2)/2), {}% of mean_A), inconclusive when that band is wider "
        "than the threshold; a regression is slower by more than {}% ({})",
        o.k_sigma, o.spread_z, 100 * o.noise_floor, 100 * o.threshold,
        o.gate_phases ? "step or any phase" : keys::kStep);
    out["threshold"] = o.threshold;
    out["match_keys"] = m.keys;
    out["contrast"] = m.contrast;
    out["warnings"] = environment_warnings(a, b, m);
    out["points"] = points;
    out["unmatched_a"] = unmatched_a;
    out["unmatched_b"] = unmatched_b;
    out["counts"] = {{"matched", points.size()},
                     {"faster", n_faster},
                     {"slower", n_slower},
                     {"same", n_same},
                     {"inconclusive", n_inconclusive},
                     {"not_comparable", n_not_ok},
                     {"failed_in_b", n_failed_b},
                     {"missing_in_b", n_missing_b},
                     {"modeled_vs_measured", n_mixed}};
    out["regressions"] = n_regress;
    out["gate_failures"] = failures;
    out["allow_missing"] = o.allow_missing;
    out["allow_modeled"] = o.allow_modeled;
    out["exit_code"] = failures.empty() ? 0 : 1;
    return out;
}

std::string render_comparison(const json& cmp, const std::string& format) {
    return render_view(cmp, DocKind::comparison, format);
}

}  // namespace moebench
