// SPDX-License-Identifier: Apache-2.0
// Noise-aware verdicts of matched points and the text / Markdown / JSON renderings of a comparison (matching:
// point_match.cpp; warnings: environment_diff.cpp).
#include "compare/compare.hpp"
#include "core/report_keys.hpp"

#include "common/error.hpp"
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
    return json{{"verdict", v.verdict}, {"ratio", v.ratio}, {"delta_us", v.delta_us}, {"noise_us", v.noise_us},
                {"regression", v.regression}};
}

// One matched pair of ok points: the step and every phase of either side.
json compare_point(const ReadRun& pa, const ReadRun& pb, const std::string& name_a, const std::string& name_b,
                   const CompareOptions& o) {
    const double na = static_cast<double>(pa.measured_iterations), nb = static_cast<double>(pb.measured_iterations);
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
        Verdict v = classify(xa->second.mean_us, xa->second.stdev_us, na, xb->second.mean_us, xb->second.stdev_us, nb, o);
        json pj = verdict_json(v);
        pj["phase"] = ph;
        pj["a_mean_us"] = xa->second.mean_us;
        pj["b_mean_us"] = xb->second.mean_us;
        phases.push_back(pj);
        if (o.gate_phases && v.regression) regress = true;
    }
    p[keys::kPhases] = phases;
    p["verdict"] = step.verdict;
    p["regression"] = regress;
    return p;
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
        config_error(field, fmt::format("must be at most {:g}%", 100.0 * max_fraction), text,
                     "write e.g. 5% or 0.05");
    return v;
}

json compare_reports(const json& a, const json& b, const CompareOptions& o, const std::string& name_a, const std::string& name_b) {
    return compare_reports(read_report(a, name_a), read_report(b, name_b), o);
}

json compare_reports(const ReadReport& a, const ReadReport& b, const CompareOptions& o) {
    const PointMatch m = match_points(a, b, o.match_keys);
    json points = json::array(), unmatched_a = json::array(), unmatched_b = json::array();
    int n_faster = 0, n_slower = 0, n_same = 0, n_regress = 0, n_not_ok = 0;
    for (const auto& [i, j] : m.pairs) {
        const ReadRun &pa = a.runs[i], &pb = b.runs[j];
        json p = {{"key", m.key_a[i]}, {"label", m.label(m.key_a[i])}, {"index_a", i}, {"index_b", j}};
        if (!pa.ok() || !pb.ok()) {
            p["verdict"] = "not comparable";
            p["why"] = fmt::format("{}: {}, {}: {}", a.name, pa.status, b.name, pb.status);
            ++n_not_ok;
            points.push_back(p);
            continue;
        }
        p.update(compare_point(pa, pb, a.name, b.name, o));
        const std::string verdict = p["verdict"];
        if (verdict == "faster") ++n_faster;
        else if (verdict == "slower") ++n_slower;
        else ++n_same;
        if (p["regression"].get<bool>()) ++n_regress;
        points.push_back(p);
    }
    if (n_not_ok == static_cast<int>(points.size())) nothing_ran_in_both(a, b, points);
    for (size_t i : m.unmatched_a) unmatched_a.push_back(m.label(m.key_a[i]));
    for (size_t j : m.unmatched_b) unmatched_b.push_back(m.label(m.key_b[j]));

    json out;
    out["a"] = a.name;
    out["b"] = b.name;
    out["rule"] = fmt::format("same when |mean_B - mean_A| <= max({} * sqrt(sd_A^2/n_A + sd_B^2/n_B), "
                              "{} * sqrt((sd_A^2 + sd_B^2)/2), {}% of mean_A); a regression is slower by more than {}% ({})",
                              o.k_sigma, o.spread_z, 100 * o.noise_floor, 100 * o.threshold,
                              o.gate_phases ? "step or any phase" : keys::kStep);
    out["threshold"] = o.threshold;
    out["match_keys"] = m.keys;
    out["contrast"] = m.contrast;
    out["warnings"] = environment_warnings(a, b, m);
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
        o += fmt::format("{}contrast: {} = {} (A) vs {} (B)\n", md ? "- " : "", k, key_text(v[0]), key_text(v[1]));
    // The terminal has the warnings on stderr already; a Markdown comparison is a document and carries them.
    if (md)
        for (const auto& w : cmp.value("warnings", json::array())) o += "- warning: " + w.value("message", "") + "\n";
    o += fmt::format("{}rule: {}\n\n", md ? "- " : "", cmp.value("rule", ""));
    if (md) o += "| point | phase | A mean µs | B mean µs | B/A | noise ± µs | verdict |\n|---|---|---:|---:|---:|---:|---|\n";
    else o += fmt::format("{:<36} {:<17} {:>12} {:>12} {:>7} {:>10}  {}\n", "point", "phase", "A mean us", "B mean us", "B/A", "noise us", "verdict");
    auto line = [&](const std::string& pt, const std::string& ph, double ma, double mb, double ratio, double noise, const std::string& verdict) {
        if (md)
            o += fmt::format("| {} | {} | {:.2f} | {:.2f} | {:.3f} | {:.2f} | {} |\n", formats_detail::md_cell(pt), ph, ma, mb,
                             ratio, noise, formats_detail::md_cell(verdict));
        else o += fmt::format("{:<36} {:<17} {:>12.2f} {:>12.2f} {:>7.3f} {:>10.2f}  {}\n", pt.substr(0, 36), ph, ma, mb, ratio, noise, verdict);
    };
    for (const auto& p : cmp["points"]) {
        std::string label = p.value("label", "");
        if (!p.contains(keys::kStep)) {
            if (md)
                o += fmt::format("| {} | step | | | | | {} ({}) |\n", formats_detail::md_cell(label), p.value("verdict", ""),
                                 formats_detail::md_cell(p.value("why", "")));
            else o += fmt::format("{:<36} {:<17} {}\n", label.substr(0, 36), keys::kStep, p.value("verdict", "") + " (" + p.value("why", "") + ")");
            continue;
        }
        const json& s = p[keys::kStep];
        std::string verdict = s.value("verdict", "") + (s.value("regression", false) ? " REGRESSION" : "");
        line(label, keys::kStep, s.value("a_mean_us", 0.0), s.value("b_mean_us", 0.0), s.value("ratio", 0.0), s.value("noise_us", 0.0), verdict);
        for (const auto& ph : p[keys::kPhases]) {
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
