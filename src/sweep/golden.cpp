// SPDX-License-Identifier: Apache-2.0
// Golden point and knee selection over the records of a sweep.
#include "sweep/golden.hpp"

#include "common/flag_names.hpp"
#include "core/report_keys.hpp"
#include "report/formats.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace moebench {

namespace {

double num_at(const json& j, std::initializer_list<const char*> path) {
    const json* cur = &j;
    for (const char* k : path) {
        if (!cur->is_object() || !cur->contains(k)) return NAN;
        cur = &cur->at(k);
    }
    return cur->is_number() ? cur->get<double>() : NAN;
}

std::string fmt_batch(double b) { return fmt::format("{}", static_cast<int64_t>(std::llround(b))); }
std::string pct(double f) { return fmt::format("{:.0f}%", 100.0 * f); }

json axes_of(const json& rec) {
    if (rec.contains(keys::kAxes) && rec[keys::kAxes].is_object()) return rec[keys::kAxes];
    json a = json::object();
    if (rec.contains("batch")) a["batch"] = rec["batch"];
    return a;
}

json describe(const CurvePoint& p, const json& runs, const CurvePoint& peak) {
    return json{{"run_index", p.run_index},
                {keys::kAxes, axes_of(runs.at(p.run_index))},
                {"batch", static_cast<int64_t>(std::llround(p.batch))},
                {keys::kTokensPerS, p.tokens_per_s},
                {"p95_ms", p.p95_us / 1000.0},
                {"share_of_peak", peak.tokens_per_s > 0 ? p.tokens_per_s / peak.tokens_per_s : 0.0},
                {"p95_vs_peak", peak.p95_us > 0 ? p.p95_us / peak.p95_us : 0.0}};
}

// "batch 128: 98% of peak throughput (batch 256, 12345 tok/s) at 76% of the p95 of batch 256; ..."
std::string knee_reason(const std::vector<CurvePoint>& s, size_t k, size_t peak, double fraction) {
    const CurvePoint& p = s[k];
    const CurvePoint& pk = s[peak];
    std::string r;
    if (k == peak) {
        r = fmt::format(
            "batch {}: the peak throughput of this series ({:.0f} tok/s, p95 {:.3f} ms); no smaller batch "
            "reaches {} of it",
            fmt_batch(p.batch), p.tokens_per_s, p.p95_us / 1000.0, pct(fraction));
    } else {
        r = fmt::format(
            "batch {}: {} of peak throughput (batch {}, {:.0f} tok/s) at {} of the p95 of batch {} "
            "({:.3f} ms vs {:.3f} ms); the smallest batch reaching {} of the peak",
            fmt_batch(p.batch), pct(p.tokens_per_s / pk.tokens_per_s), fmt_batch(pk.batch), pk.tokens_per_s,
            pct(pk.p95_us > 0 ? p.p95_us / pk.p95_us : 0), fmt_batch(pk.batch), p.p95_us / 1000.0, pk.p95_us / 1000.0,
            pct(fraction));
    }
    if (k + 1 < s.size()) {
        const CurvePoint& n = s[k + 1];
        r += fmt::format("; the next batch ({}) changes throughput by {:+.0f}% for {:+.0f}% p95", fmt_batch(n.batch),
                         100.0 * (n.tokens_per_s / p.tokens_per_s - 1), 100.0 * (n.p95_us / p.p95_us - 1));
    }
    return r;
}

}  // namespace

std::optional<size_t> knee_index(const std::vector<CurvePoint>& series, double fraction) {
    if (series.empty()) return std::nullopt;
    double best = 0;
    for (const auto& p : series) best = std::max(best, p.tokens_per_s);
    for (size_t i = 0; i < series.size(); ++i)
        if (series[i].tokens_per_s >= fraction * best) return i;
    return std::nullopt;  // unreachable: the best point qualifies
}

std::optional<size_t> golden_index(const std::vector<CurvePoint>& points, double slo_p95_us) {
    std::optional<size_t> g;
    for (size_t i = 0; i < points.size(); ++i) {
        const auto& p = points[i];
        if (!(p.p95_us <= slo_p95_us)) continue;
        if (!g || p.tokens_per_s > points[*g].tokens_per_s ||
            (p.tokens_per_s == points[*g].tokens_per_s && p.p95_us < points[*g].p95_us))
            g = i;
    }
    return g;
}

namespace {

// The ok points of a sweep, grouped into series by every axis but batch (in order of first appearance).
struct Series {
    std::vector<CurvePoint> all;
    std::map<std::string, std::vector<CurvePoint>> by_key;
    std::map<std::string, json> fixed_of;
    std::vector<std::string> order;
    std::vector<size_t> not_fitting;  // ok points modeled on GPUs whose memory they do not fit (fits: false)
};

Series group_series(const json& runs) {
    Series g;
    for (size_t i = 0; runs.is_array() && i < runs.size(); ++i) {
        const json& r = runs[i];
        if (r.value(keys::kStatus, "ok") != "ok") continue;
        // A deployment that does not fit its GPUs is no candidate: it is on no curve, never a knee or golden.
        if (r.contains("fits") && r["fits"].is_boolean() && !r["fits"].get<bool>()) {
            g.not_fitting.push_back(i);
            continue;
        }
        CurvePoint p;
        p.run_index = i;
        p.batch = num_at(r, {"batch"});
        if (std::isnan(p.batch)) p.batch = num_at(r, {keys::kAxes, "batch"});
        p.tokens_per_s = num_at(r, {keys::kThroughput, keys::kTokensPerS});
        p.p95_us = num_at(r, {keys::kLatency, keys::kStep, keys::kP95Us});
        if (std::isnan(p.batch) || std::isnan(p.tokens_per_s) || std::isnan(p.p95_us)) continue;
        json fixed = axes_of(r);
        fixed.erase("batch");
        std::string key = fixed.dump();
        if (!g.by_key.count(key)) {
            g.order.push_back(key);
            g.fixed_of[key] = fixed;
        }
        g.by_key[key].push_back(p);
        g.all.push_back(p);
    }
    return g;
}

// " (context=64)": the axes that tell the series of `run` from the sweep's other series; "" with one series.
std::string series_suffix(const Series& g, const json& run) {
    if (g.order.size() < 2) return "";
    json fixed = axes_of(run);
    fixed.erase("batch");
    std::string s;
    for (auto it = fixed.begin(); it != fixed.end(); ++it) {
        bool varies = false;
        for (const auto& [key, other] : g.fixed_of) varies = varies || other.value(it.key(), json()) != it.value();
        if (varies)
            s += (s.empty() ? "" : ", ") + it.key() + "=" + (it->is_string() ? it->get<std::string>() : it->dump());
    }
    return s.empty() ? "" : " (" + s + ")";
}

// Each series with its knee; `golden_no_slo` gets the knee of the series that holds the sweep's peak.
json series_with_knees(const Series& g, const json& runs, double knee_fraction, const CurvePoint& global_peak,
                       json& golden_no_slo) {
    json series_json = json::array();
    for (const auto& key : g.order) {
        auto s = g.by_key.at(key);
        std::stable_sort(s.begin(), s.end(),
                         [](const CurvePoint& a, const CurvePoint& b) { return a.batch < b.batch; });
        size_t peak = 0;
        for (size_t i = 1; i < s.size(); ++i)
            if (s[i].tokens_per_s > s[peak].tokens_per_s) peak = i;
        json sj = {{"fixed", g.fixed_of.at(key)}, {"points", json::array()}};
        for (const auto& p : s) sj["points"].push_back(p.run_index);
        if (auto k = knee_index(s, knee_fraction)) {
            json kj = describe(s[*k], runs, s[peak]);
            kj["reason"] = knee_reason(s, *k, peak, knee_fraction);
            sj["knee"] = kj;
            if (s[peak].run_index == global_peak.run_index) golden_no_slo = kj;
        }
        series_json.push_back(sj);
    }
    return series_json;
}

// The golden point under the SLO, or why there is none.
void golden_under_slo(const Series& series, const json& runs, double slo_p95_ms, const CurvePoint& global_peak,
                      json& out) {
    const std::vector<CurvePoint>& all = series.all;
    const auto name = [&](const CurvePoint& p) {
        return "batch " + fmt_batch(p.batch) + series_suffix(series, runs[p.run_index]);
    };
    const double slo_us = slo_p95_ms * 1000.0;
    auto g = golden_index(all, slo_us);
    if (!g) {
        const CurvePoint* fastest = &all[0];
        for (const auto& p : all)
            if (p.p95_us < fastest->p95_us) fastest = &p;
        out["golden"] = nullptr;
        out["golden_reason"] = fmt::format("no point meets p95 <= {} ms; the lowest p95 is {:.3f} ms at {}", slo_p95_ms,
                                           fastest->p95_us / 1000.0, name(*fastest));
        return;
    }
    const CurvePoint& gp = all[*g];
    json gj = describe(gp, runs, global_peak);
    std::string reason = fmt::format(
        "{}: {:.0f} tok/s, the highest throughput whose p95 {:.3f} ms meets the SLO "
        "of {} ms",
        name(gp), gp.tokens_per_s, gp.p95_us / 1000.0, slo_p95_ms);
    if (gp.run_index != global_peak.run_index)
        reason += fmt::format("; {} of peak throughput ({}, {:.0f} tok/s, p95 {:.3f} ms{}) at {} of its p95",
                              pct(gp.tokens_per_s / global_peak.tokens_per_s), name(global_peak),
                              global_peak.tokens_per_s, global_peak.p95_us / 1000.0,
                              global_peak.p95_us > slo_us ? ", over the SLO" : "", pct(gp.p95_us / global_peak.p95_us));
    else
        reason += "; it is also the peak throughput of the sweep";
    gj["reason"] = reason;
    out["golden"] = gj;
}

}  // namespace

json analyze_sweep(const json& runs, std::optional<double> slo_p95_ms, double knee_fraction) {
    json out;
    out["knee_rule"] = fmt::format(
        "knee = smallest batch whose throughput reaches {} of the best throughput of its "
        "series (series: points sharing every axis but batch)",
        pct(knee_fraction));
    out["golden_rule"] = (slo_p95_ms ? fmt::format("golden = highest throughput with step p95 <= {} ms", *slo_p95_ms)
                                     : "golden = knee of the series holding the peak throughput (no " +
                                           flag_of("slo_p95_ms") + " given)") +
                         "; points modeled with fits: false (their deployment does not fit its GPUs' memory) are "
                         "left out of every series";
    out["slo_p95_ms"] = slo_p95_ms ? json(*slo_p95_ms) : json(nullptr);
    out["source"] = times_source(runs);  // the curves' times: modeled for a sim sweep
    const Series g = group_series(runs);
    out["not_fitting"] = g.not_fitting;
    if (g.all.empty()) {
        out["series"] = json::array();
        out["golden"] = nullptr;
        out["golden_reason"] = g.not_fitting.empty()
                                   ? "no point finished ok, so there is no golden point"
                                   : fmt::format(
                                         "no point that fits its GPUs' memory finished ok ({} modeled points "
                                         "do not fit: not_fitting), so there is no golden point",
                                         g.not_fitting.size());
        return out;
    }
    const CurvePoint* global_peak = &g.all[0];
    for (const auto& p : g.all)
        if (p.tokens_per_s > global_peak->tokens_per_s) global_peak = &p;
    json golden_no_slo = nullptr;
    out["series"] = series_with_knees(g, runs, knee_fraction, *global_peak, golden_no_slo);
    if (slo_p95_ms) {
        golden_under_slo(g, runs, *slo_p95_ms, *global_peak, out);
        return out;
    }
    out["golden"] = golden_no_slo;
    if (!golden_no_slo.is_null())
        out["golden"]["reason"] = "no " + flag_of("slo_p95_ms") +
                                  " given, so the golden point is the knee of the series holding the peak throughput" +
                                  series_suffix(g, runs[global_peak->run_index]) + ": " +
                                  golden_no_slo["reason"].get<std::string>();
    return out;
}

}  // namespace moebench
