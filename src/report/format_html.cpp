// SPDX-License-Identifier: Apache-2.0
// HTML view: one self-contained file (inline CSS and SVG, no scripts, no fonts, no network references) with the
// charts of docs/sweep.md: phase stack, throughput/p95 vs batch, expert-load heatmap, tokens per expert,
// co-activation and roofline. Hover text comes from SVG <title> elements.
#include "core/phase.hpp"
#include "core/report_keys.hpp"
#include "report/formats.hpp"
#include "report/html_svg.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace moebench {

using namespace formats_detail;

namespace {

using namespace html_svg;

// ---- chart 1: stacked per-phase latency per point ----
std::string chart_phase_stack(const json& runs) {
    std::vector<size_t> pts;
    for (size_t i = 0; i < runs.size(); ++i)
        if (run_ok(runs[i]) && !run_phases(runs[i]).empty()) pts.push_back(i);
    if (pts.empty()) return not_available("chart-phase-stack", "no point finished with per-phase latency");
    std::vector<std::string> phases;
    for (auto name : kPhaseNames)
        for (size_t i : pts)
            if (find_path(runs[i], {keys::kLatency, keys::kPhases, std::string(name).c_str()})) {
                phases.emplace_back(name);
                break;
            }
    double hi = 0;
    for (size_t i : pts) {
        double sum = 0;
        for (const auto& ph : phases)
            sum += num_at(runs[i], {keys::kLatency, keys::kPhases, ph.c_str(), keys::kMeanUs});
        hi = std::max(hi, sum);
    }
    hi = nice_ticks(hi).back();
    int W = 1200, H = 470;
    Frame f{80, 20, 860, 330};
    std::string s = svg_open("chart-phase-stack", W, H, "stacked per-phase latency per point");
    s += y_axis(f, hi, "mean µs per step (sum of phases)");
    double slot = f.w / static_cast<double>(pts.size()), bw = std::max(2.0, std::min(60.0, slot * 0.7));
    for (size_t k = 0; k < pts.size(); ++k) {
        const json& r = runs[pts[k]];
        double cx = f.x0 + slot * (static_cast<double>(k) + 0.5), y = f.y0 + f.h;
        for (const auto& ph : phases) {
            double v = num_at(r, {keys::kLatency, keys::kPhases, ph.c_str(), keys::kMeanUs});
            if (v <= 0) continue;
            double h = hi > 0 ? v / hi * f.h : 0;
            y -= h;
            s += fmt::format(
                "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.2f}\" fill=\"{}\"><title>{}: {}: "
                "{:.1f} µs ({:.1f}%)</title></rect>\n",
                cx - bw / 2, y, bw, h, phase_color(ph), esc(run_label(r)), ph, v,
                100.0 * num_at(r, {keys::kLatency, keys::kPhases, ph.c_str(), "share"}));
        }
        std::string label = run_label(r);
        if (label.size() > 28) label = label.substr(label.size() - 28);
        s += fmt::format(
            "<text transform=\"translate({:.1f},{:.1f}) rotate(-40)\" text-anchor=\"end\" class=\"small\">{}</text>\n",
            cx + 4, f.y0 + f.h + 14, esc(label));
    }
    // Legend.
    double ly = f.y0;
    for (auto it = phases.rbegin(); it != phases.rend(); ++it) {
        s += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"12\" height=\"12\" fill=\"{}\"/>\n", f.x0 + f.w + 30,
                         ly, phase_color(*it));
        s += text(f.x0 + f.w + 48, ly + 10, *it, "class=\"small\"");
        ly += 17;
    }
    return s + "</svg>\n";
}

// Series of ok points (every axis but batch), each sorted by batch: from the sweep block when present.
std::vector<std::vector<size_t>> batch_series(const json& report) {
    const json& runs = report.at(keys::kRuns);
    std::map<std::string, std::vector<size_t>> by_key;
    std::vector<std::string> order;
    for (size_t i = 0; i < runs.size(); ++i) {
        if (!run_ok(runs[i]) || !find_path(runs[i], {keys::kThroughput, keys::kTokensPerS})) continue;
        json a = runs[i].value(keys::kAxes, json::object());
        a.erase("batch");
        std::string k = a.dump();
        if (!by_key.count(k)) order.push_back(k);
        by_key[k].push_back(i);
    }
    std::vector<std::vector<size_t>> out;
    for (const auto& k : order) {
        auto v = by_key[k];
        std::stable_sort(v.begin(), v.end(),
                         [&](size_t a, size_t b) { return num_at(runs[a], {"batch"}) < num_at(runs[b], {"batch"}); });
        out.push_back(v);
    }
    return out;
}

// ---- chart 2: throughput and p95 against batch, golden point and knees marked ----
// One function (~95 lines) on purpose: the frame and its scales (xpos, ty, py) place every axis, line, marker, knee
// and the golden ring; split, each piece would take all of them as arguments.
std::string chart_throughput(const json& report) {
    const json& runs = report.at(keys::kRuns);
    auto series = batch_series(report);
    if (series.empty()) return not_available("chart-throughput-p95", "no point finished ok");
    double bmin = 1e300, bmax = 0, tmax = 0, pmax = 0;
    for (const auto& se : series)
        for (size_t i : se) {
            double b = num_at(runs[i], {"batch"});
            bmin = std::min(bmin, b);
            bmax = std::max(bmax, b);
            tmax = std::max(tmax, num_at(runs[i], {keys::kThroughput, keys::kTokensPerS}));
            pmax = std::max(pmax, num_at(runs[i], {keys::kLatency, keys::kStep, keys::kP95Us}) / 1000.0);
        }
    double slo = num_at(report, {"sweep", "slo_p95_ms"}, 0);
    pmax = std::max(pmax, slo);
    tmax = nice_ticks(tmax).back();
    pmax = nice_ticks(pmax).back();
    bool log_x = bmin > 0 && bmax / bmin >= 8;
    int W = 1200, H = 430;
    Frame f{90, 20, 840, 330};
    auto xpos = [&](double b) {
        if (bmax <= bmin) return f.x0 + f.w / 2;
        double u =
            log_x ? (std::log2(b) - std::log2(bmin)) / (std::log2(bmax) - std::log2(bmin)) : (b - bmin) / (bmax - bmin);
        return f.x0 + 20 + u * (f.w - 40);
    };
    auto ty = [&](double v) { return f.y0 + f.h - (tmax > 0 ? v / tmax : 0) * f.h; };
    auto py = [&](double v) { return f.y0 + f.h - (pmax > 0 ? v / pmax : 0) * f.h; };
    std::string s = svg_open("chart-throughput-p95", W, H, "throughput and p95 step latency against batch size");
    s += y_axis(f, tmax, "throughput, tokens/s (solid)");
    s += y_axis(f, pmax, "p95 step latency, ms (dashed)", true);
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" class=\"axis\"/>\n", f.x0,
                     f.y0 + f.h, f.x0 + f.w);
    std::vector<double> bticks;
    for (const auto& se : series)
        for (size_t i : se) bticks.push_back(num_at(runs[i], {"batch"}));
    std::sort(bticks.begin(), bticks.end());
    bticks.erase(std::unique(bticks.begin(), bticks.end()), bticks.end());
    double last_x = -1e9;
    for (double b : bticks) {
        double x = xpos(b);
        if (x - last_x < 24) continue;
        last_x = x;
        s += text(x, f.y0 + f.h + 18, tick_text(b), "text-anchor=\"middle\"");
    }
    s += text(f.x0 + f.w / 2, f.y0 + f.h + 40, log_x ? "batch (log scale)" : "batch", "text-anchor=\"middle\"");
    if (slo > 0) {
        s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" class=\"slo\"/>\n", f.x0,
                         py(slo), f.x0 + f.w);
        s += text(f.x0 + f.w - 4, py(slo) - 4, fmt::format("SLO p95 {} ms", slo),
                  "text-anchor=\"end\" class=\"small slo-t\"");
    }
    for (size_t k = 0; k < series.size(); ++k) {
        const char* color = kSeriesColors[k % 8];
        std::string tp, pp;
        for (size_t i : series[k]) {
            double b = num_at(runs[i], {"batch"});
            tp += fmt::format("{:.1f},{:.1f} ", xpos(b), ty(num_at(runs[i], {keys::kThroughput, keys::kTokensPerS})));
            pp += fmt::format("{:.1f},{:.1f} ", xpos(b),
                              py(num_at(runs[i], {keys::kLatency, keys::kStep, keys::kP95Us}) / 1000.0));
        }
        s += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n", tp, color);
        s += fmt::format(
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/>\n", pp,
            color);
        for (size_t i : series[k]) {
            double b = num_at(runs[i], {"batch"}), t = num_at(runs[i], {keys::kThroughput, keys::kTokensPerS});
            double p = num_at(runs[i], {keys::kLatency, keys::kStep, keys::kP95Us}) / 1000.0;
            s += fmt::format(
                "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"><title>{}: {:.1f} tokens/s, p95 {:.3f} ms"
                "</title></circle>\n",
                xpos(b), ty(t), color, esc(run_label(runs[i])), t, p);
            s += fmt::format(
                "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"6\" height=\"6\" fill=\"{}\"><title>{}: p95 {:.3f} "
                "ms</title></rect>\n",
                xpos(b) - 3, py(p) - 3, color, esc(run_label(runs[i])), p);
        }
        // Legend entry: the fixed axes of the series that vary in the report.
        std::string name;
        for (const auto& a : varying_axes(report))
            if (a != "batch")
                name += (name.empty() ? "" : " ") + a + "=" +
                        scalar_text(runs[series[k][0]].value(keys::kAxes, json::object()).value(a, json()));
        if (name.empty()) name = "all points";
        s += fmt::format(
            "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"{3}\" stroke-width=\"2\"/>\n",
            f.x0 + f.w + 70, f.y0 + 8 + 18.0 * k, f.x0 + f.w + 90, color);
        s += text(f.x0 + f.w + 95, f.y0 + 12 + 18.0 * k, name.size() > 26 ? name.substr(0, 26) : name,
                  "class=\"small\"");
    }
    // Knees (diamonds) and the golden point (ring + label).
    if (const json* se = find_path(report, {"sweep", "series"}); se && se->is_array())
        for (const auto& one : *se) {
            const json* k = find_path(one, {"knee", "run_index"});
            if (!k || !k->is_number_integer()) continue;
            size_t i = k->get<size_t>();
            if (i >= runs.size()) continue;
            double x = xpos(num_at(runs[i], {"batch"})),
                   y = ty(num_at(runs[i], {keys::kThroughput, keys::kTokensPerS}));
            s += fmt::format(
                "<path d=\"M{0:.1f} {1:.1f} l7 7 l-7 7 l-7 -7 z\" class=\"knee\"><title>knee: {2}</title></path>\n", x,
                y - 7, esc(one["knee"].value("reason", "")));
        }
    long g = golden_run_index(report);
    if (g >= 0 && static_cast<size_t>(g) < runs.size()) {
        const json& r = runs[static_cast<size_t>(g)];
        double x = xpos(num_at(r, {"batch"})), y = ty(num_at(r, {keys::kThroughput, keys::kTokensPerS}));
        s += fmt::format(
            "<circle id=\"golden-point\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"10\" class=\"golden\"><title>golden point: {}"
            "</title></circle>\n",
            x, y, esc(str_at(report, {"sweep", "golden", "reason"})));
        s += text(x, y - 15, "golden", "text-anchor=\"middle\" class=\"golden-t\"");
    }
    return s + "</svg>\n";
}

// The point whose expert load is drawn: the golden point, else the last ok point with load data.
long load_point(const json& report) {
    const json& runs = report.at(keys::kRuns);
    long g = golden_run_index(report);
    if (g >= 0 && static_cast<size_t>(g) < runs.size() &&
        find_path(runs[static_cast<size_t>(g)], {keys::kExpertLoad, keys::kPerLayer}))
        return g;
    for (long i = static_cast<long>(runs.size()) - 1; i >= 0; --i) {
        const json* pl = find_path(runs[static_cast<size_t>(i)], {keys::kExpertLoad, keys::kPerLayer});
        if (run_ok(runs[static_cast<size_t>(i)]) && pl && pl->is_array() && !pl->empty()) return i;
    }
    return -1;
}

// ---- chart 3: expert load heatmap, experts x time windows, one per layer ----
std::string chart_heatmaps(const json& run) {
    const json* pl = find_path(run, {keys::kExpertLoad, keys::kPerLayer});
    std::string s;
    for (const auto& l : *pl) {
        std::string layer = scalar_text(l.value("layer", json()));
        std::string id = "chart-expert-heatmap-layer-" + layer;
        const json* counts = find_path(l, {"windows", "counts"});
        if (!counts || !counts->is_array() || counts->empty() || !(*counts)[0].is_array() || (*counts)[0].empty()) {
            s += not_available(id, "layer " + layer + " has no windowed load counts");
            continue;
        }
        size_t W = counts->size(), E = (*counts)[0].size();
        double maxc = 0;
        for (const auto& w : *counts)
            for (const auto& c : w) maxc = std::max(maxc, c.is_number() ? c.get<double>() : 0.0);
        double cw = std::clamp(860.0 / static_cast<double>(W), 2.0, 40.0),
               ch = std::clamp(420.0 / static_cast<double>(E), 1.0, 14.0);
        int w = std::max(700, static_cast<int>(90 + cw * static_cast<double>(W) + 90)),
            h = static_cast<int>(40 + ch * static_cast<double>(E) + 50);
        s += svg_open(id, w, h, "expert load heatmap, layer " + layer);
        s += text(90, 16,
                  fmt::format("layer {}: tokens routed to each expert per window of {} tokens (max {} per cell)", layer,
                              scalar_text(l["windows"].value("window_tokens", json())), maxc),
                  "class=\"small\"");
        for (size_t t = 0; t < W; ++t)
            for (size_t e = 0; e < E && e < (*counts)[t].size(); ++e) {
                double c = (*counts)[t][e].is_number() ? (*counts)[t][e].get<double>() : 0.0;
                s += fmt::format(
                    "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\"><title>window {} "
                    "expert {}: "
                    "{}</title></rect>\n",
                    90 + cw * t, 30 + ch * e, cw, ch, heat_color(maxc > 0 ? c / maxc : 0), t, e, c);
            }
        for (size_t e = 0; e < E; e += std::max<size_t>(1, E / 8))
            s += text(84, 30 + ch * (e + 0.5) + 4, fmt::format("e{}", e), "text-anchor=\"end\" class=\"small\"");
        s += text(90 + cw * W / 2, 30 + ch * E + 20, "time (window index) →", "text-anchor=\"middle\" class=\"small\"");
        s += "</svg>\n";
    }
    return s;
}

// ---- chart 4: tokens per expert, bars per layer ----
std::string chart_tokens_per_expert(const json& run) {
    const json* pl = find_path(run, {keys::kExpertLoad, keys::kPerLayer});
    std::string s;
    for (const auto& l : *pl) {
        std::string layer = scalar_text(l.value("layer", json()));
        std::string id = "chart-tokens-per-expert-layer-" + layer;
        const json* tpe = find_path(l, {"tokens_per_expert"});
        if (!tpe || !tpe->is_array() || tpe->empty()) {
            s += not_available(id, "layer " + layer + " has no tokens_per_expert");
            continue;
        }
        size_t E = tpe->size();
        double maxc = 0, sum = 0;
        for (const auto& c : *tpe) {
            double v = c.is_number() ? c.get<double>() : 0;
            maxc = std::max(maxc, v);
            sum += v;
        }
        double hi = nice_ticks(maxc).back(), mean = sum / static_cast<double>(E);
        Frame f{80, 30, 860, 150};
        s += svg_open(id, 1000, 220, "tokens per expert, layer " + layer);
        s += text(80, 16,
                  fmt::format("layer {}: tokens per expert (mean {:.1f}, max/mean {:.2f})", layer, mean,
                              l.value(keys::kMaxOverMean, 0.0)),
                  "class=\"small\"");
        s += y_axis(f, hi, "tokens");
        double bw = f.w / static_cast<double>(E);
        for (size_t e = 0; e < E; ++e) {
            double v = (*tpe)[e].is_number() ? (*tpe)[e].get<double>() : 0;
            double h = hi > 0 ? v / hi * f.h : 0;
            s += fmt::format(
                "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" class=\"bar\"><title>expert {}: {}"
                "</title></rect>\n",
                f.x0 + bw * e, f.y0 + f.h - h, std::max(0.5, bw * 0.85), h, e, v);
        }
        double my = f.y0 + f.h - (hi > 0 ? mean / hi * f.h : 0);
        s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" class=\"mean\"/>\n", f.x0,
                         my, f.x0 + f.w);
        s += text(f.x0 + f.w / 2, f.y0 + f.h + 18, "expert id", "text-anchor=\"middle\" class=\"small\"");
        s += "</svg>\n";
    }
    return s;
}

// ---- chart 5: co-activation matrix of the first layer that has one (experts binned above 96) ----
std::string chart_coactivation(const json& run) {
    const json* pl = find_path(run, {keys::kExpertLoad, keys::kPerLayer});
    for (const auto& l : *pl) {
        const json* m = find_path(l, {"coactivation"});
        if (!m || !m->is_array() || m->size() < 2) continue;
        size_t E = m->size(), bin = (E + 95) / 96, N = (E + bin - 1) / bin;
        std::vector<double> cell(N * N, 0.0);
        double maxc = 0;
        for (size_t a = 0; a < E; ++a)
            for (size_t b = 0; b < E && b < (*m)[a].size(); ++b) {
                double& c = cell[(a / bin) * N + b / bin];
                c += (*m)[a][b].is_number() ? (*m)[a][b].get<double>() : 0.0;
                maxc = std::max(maxc, c);
            }
        double cs = std::clamp(560.0 / static_cast<double>(N), 3.0, 40.0);
        std::string layer = scalar_text(l.value("layer", json()));
        int size = static_cast<int>(cs * N);
        std::string s = svg_open("chart-coactivation", size + 140, size + 70, "expert co-activation, layer " + layer);
        s += text(70, 16,
                  fmt::format("layer {}: tokens choosing both experts{}", layer,
                              bin > 1 ? fmt::format(" (experts binned by {})", bin) : std::string()),
                  "class=\"small\"");
        for (size_t a = 0; a < N; ++a)
            for (size_t b = 0; b < N; ++b) {
                double c = cell[a * N + b];
                s += fmt::format(
                    "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\"><title>experts {} "
                    "& {}: "
                    "{}</title></rect>\n",
                    70 + cs * b, 30 + cs * a, cs, cs, heat_color(maxc > 0 ? c / maxc : 0), a * bin, b * bin, c);
            }
        s += text(70 + size / 2.0, 30 + size + 20, "expert", "text-anchor=\"middle\" class=\"small\"");
        s += fmt::format(
            "<text transform=\"translate(50,{:.1f}) rotate(-90)\" text-anchor=\"middle\" "
            "class=\"small\">expert</text>\n",
            30 + size / 2.0);
        return s + "</svg>\n";
    }
    return not_available("chart-coactivation", "no layer of this point has a co-activation matrix");
}

// ---- chart 6: roofline placement of each phase (needs counted FLOPs and bytes per phase) ----
std::string chart_roofline(const json& report, long point) {
    if (point < 0) return not_available("chart-roofline", "no point finished ok");
    const json& run = report[keys::kRuns][static_cast<size_t>(point)];
    struct P {
        std::string name;
        double ai, rate;
    };
    std::vector<P> pts;
    for (const auto& ph : run_phases(run)) {
        double flops = num_at(run, {keys::kRoofline, keys::kPhases, ph.c_str(), "flops"},
                              num_at(run, {keys::kLatency, keys::kPhases, ph.c_str(), "flops"}));
        double bytes = num_at(run, {keys::kRoofline, keys::kPhases, ph.c_str(), "bytes"},
                              num_at(run, {keys::kLatency, keys::kPhases, ph.c_str(), "bytes"}));
        double us = num_at(run, {keys::kLatency, keys::kPhases, ph.c_str(), keys::kMeanUs});
        if (flops > 0 && bytes > 0 && us > 0) pts.push_back({ph, flops / bytes, flops / (us * 1e-6)});
    }
    if (pts.empty())
        return not_available("chart-roofline",
                             "this report holds no per-phase FLOPs and bytes (roofline.phases.<phase>.{flops,bytes})");
    double peak =
        num_at(run, {keys::kRoofline, "peak_flops_per_s"}, num_at(report, {"environment", "ceilings", "flops_per_s"}));
    double bw = num_at(run, {keys::kRoofline, "mem_bw_bytes_per_s"},
                       num_at(report, {"environment", "ceilings", "bytes_per_s"}));
    double ai_lo = 1e300, ai_hi = 0, r_lo = 1e300, r_hi = 0;
    for (const auto& p : pts) {
        ai_lo = std::min(ai_lo, p.ai), ai_hi = std::max(ai_hi, p.ai);
        r_lo = std::min(r_lo, p.rate), r_hi = std::max(r_hi, p.rate);
    }
    if (peak > 0) r_hi = std::max(r_hi, peak);
    double lx0 = std::floor(std::log10(ai_lo)) - 0.5, lx1 = std::ceil(std::log10(ai_hi)) + 0.5;
    double ly0 = std::floor(std::log10(r_lo)) - 0.5, ly1 = std::ceil(std::log10(r_hi)) + 0.5;
    Frame f{90, 20, 800, 360};
    auto X = [&](double ai) { return f.x0 + (std::log10(ai) - lx0) / (lx1 - lx0) * f.w; };
    auto Y = [&](double r) { return f.y0 + f.h - (std::log10(r) - ly0) / (ly1 - ly0) * f.h; };
    std::string s = svg_open("chart-roofline", 1100, 440, "roofline placement of each phase");
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" class=\"frame\"/>\n", f.x0, f.y0, f.w, f.h);
    for (double e = std::ceil(lx0); e <= lx1; e += 1)
        s += text(X(std::pow(10, e)), f.y0 + f.h + 16, tick_text(std::pow(10, e)),
                  "text-anchor=\"middle\" class=\"small\"");
    for (double e = std::ceil(ly0); e <= ly1; e += 1)
        s += text(f.x0 - 6, Y(std::pow(10, e)) + 4, tick_text(std::pow(10, e)), "text-anchor=\"end\" class=\"small\"");
    s += text(f.x0 + f.w / 2, f.y0 + f.h + 36, "arithmetic intensity, FLOP/byte (counted)", "text-anchor=\"middle\"");
    s += fmt::format(
        "<text transform=\"translate(30,{:.1f}) rotate(-90)\" text-anchor=\"middle\">achieved FLOP/s ({})</text>\n",
        f.y0 + f.h / 2, esc(times_source(json::array({run}))));
    if (peak > 0 && bw > 0) {
        std::string roof;
        for (double e = lx0; e <= lx1 + 1e-9; e += (lx1 - lx0) / 64) {
            double ai = std::pow(10, e), r = std::min(peak, ai * bw);
            double y = std::clamp(Y(r), f.y0, f.y0 + f.h);
            roof += fmt::format("{:.1f},{:.1f} ", X(ai), y);
        }
        s += fmt::format("<polyline points=\"{}\" class=\"roof\"/>\n", roof);
        s += text(f.x0 + f.w - 4, Y(peak) - 6, fmt::format("peak {} FLOP/s, {} B/s", tick_text(peak), tick_text(bw)),
                  "text-anchor=\"end\" class=\"small\"");
    } else {
        s += text(f.x0 + 8, f.y0 + 16, "ceilings not available: no measured peak FLOP/s and bandwidth in this report",
                  "class=\"small\"");
    }
    for (const auto& p : pts) {
        s += fmt::format(
            "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"6\" fill=\"{}\"><title>{}: {:.3g} FLOP/byte, {:.3g} "
            "FLOP/s</title></circle>\n",
            X(p.ai), Y(p.rate), phase_color(p.name), p.name, p.ai, p.rate);
        s += text(X(p.ai) + 8, Y(p.rate) - 6, p.name, "class=\"small\"");
    }
    return s + "</svg>\n";
}

const char* kCss = R"(body{font-family:sans-serif;margin:24px;color:#222;max-width:1300px}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
td:first-child,th:first-child,td.l{text-align:left}.note{color:#555;font-size:13px}
svg{display:block;margin:8px 0;background:#fff}svg text{font-size:12px;fill:#222}svg text.small{font-size:10px}
svg text.na{fill:#a00;font-size:14px}.axis{stroke:#444}.grid{stroke:#eee}.bar{fill:#4a78b0}
.mean{stroke:#d62728;stroke-dasharray:4 3}.slo{stroke:#d62728;stroke-dasharray:8 4}svg text.slo-t{fill:#d62728}
.golden{fill:none;stroke:#e0a000;stroke-width:3}svg text.golden-t{fill:#b07800;font-weight:bold}
.knee{fill:#fff;stroke:#222;stroke-width:1.5}.frame{fill:none;stroke:#444}.roof{fill:none;stroke:#444;stroke-width:2}
)";

}  // namespace

namespace formats_detail {

std::string render_html(const json& report) {
    const json& runs = report.at(keys::kRuns);
    bool is_sweep = report.contains("sweep");
    std::string h =
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>moebench report</title>\n<style>";
    h += kCss;
    h += "</style></head><body>\n<h1>moebench " + std::string(is_sweep ? "sweep" : "run") + " report</h1>\n";
    h += "<table>\n";
    auto row = [&](const std::string& k, const std::string& v) {
        h += "<tr><th>" + esc(k) + "</th><td class=\"l\">" + esc(v) + "</td></tr>\n";
    };
    row("command", str_at(report, {"command"}, "?"));
    row("tool", fmt::format("moebench {} ({}), {} build", str_at(report, {"tool", "version"}, "?"),
                            str_at(report, {"tool", "git_rev"}, "?"), str_at(report, {"tool", "build_type"}, "?")));
    row("created", str_at(report, {"created_utc"}, "?"));
    row("machine", fmt::format("{}, {} CPUs, backend {}", str_at(report, {"environment", "cpu_model"}, "?"),
                               scalar_text(report.value("environment", json::object()).value("num_cpus", json())),
                               str_at(report, {"environment", "backend"}, "?")));
    row("model", runs.empty() || !runs[0].contains("model") ? str_at(report, {"config", "run", "model"}, "?")
                                                            : scalar_text(runs[0]["model"]));
    if (is_sweep) {
        const json& s = report["sweep"];
        row("points",
            fmt::format("{} ({} ok, {} skipped, {} failed), stop: {}", scalar_text(s.value("num_points", json())),
                        scalar_text(s.value("ok", json())), scalar_text(s.value("skipped", json())),
                        scalar_text(s.value("failed", json())), s.value("stop_reason", "done")));
        if (s.contains("golden") && !s["golden"].is_null())
            row("golden point", s["golden"].value("reason", ""));
        else if (s.contains("golden_reason"))
            row("golden point", "none: " + s.value("golden_reason", ""));
    }
    h += "</table>\n";

    h += "<h2>Points</h2>\n<table><tr><th>#</th><th>point</th><th>status</th><th>step mean ms</th><th>p50 "
         "ms</th><th>p95 ms</th>"
         "<th>p99 ms</th><th>tokens/s</th><th>J/token</th><th>conditions</th></tr>\n";
    for (size_t i = 0; i < runs.size(); ++i) {
        const json& r = runs[i];
        if (!run_ok(r)) {
            std::string why =
                r.value(keys::kStatus, "") == "skipped" ? r.value("skip_reason", "") : r.value("error", "");
            h += fmt::format("<tr><td>{}</td><td class=\"l\">{}</td><td class=\"l\" colspan=\"8\">{}: {}</td></tr>\n",
                             i, esc(run_label(r)), esc(r.value(keys::kStatus, "")), esc(why));
            continue;
        }
        // "~": a percentile from fewer samples than it needs (docs/report-schema.md, low_confidence).
        const json* step = find_path(r, {keys::kLatency, keys::kStep});
        const std::vector<std::string> weak = step ? low_confidence_keys(*step) : std::vector<std::string>{};
        const auto pct = [&](const char* key) {
            const bool low = std::find(weak.begin(), weak.end(), key) != weak.end();
            return fmt::format("{}{:.3f}", low ? "~" : "", num_at(r, {keys::kLatency, keys::kStep, key}) / 1e3);
        };
        const EnergyPerToken energy = energy_per_token(r);
        const bool noisy = tri_state(r, {keys::kConditions, "host", "contended"}) == "yes" ||
                           tri_state(r, {keys::kConditions, "host", "throttled"}) == "yes" ||
                           tri_state(r, {keys::kConditions, "device", "throttled"}) == "yes";
        h += fmt::format(
            "<tr><td>{}</td><td class=\"l\">{}</td><td class=\"l\">ok</td><td>{:.3f}</td><td>{:.3f}</td><td>{}</td>"
            "<td>{}</td><td>{:.1f}</td><td>{}</td><td class=\"l\">{}</td></tr>\n",
            i, esc(run_label(r)), num_at(r, {keys::kLatency, keys::kStep, keys::kMeanUs}) / 1e3,
            num_at(r, {keys::kLatency, keys::kStep, keys::kP50Us}) / 1e3, pct(keys::kP95Us), pct(keys::kP99Us),
            num_at(r, {keys::kThroughput, keys::kTokensPerS}),
            energy.available ? fmt::format("{:.4g}", energy.joules_per_token) : "n/a",
            noisy ? esc("not quiet: " + str_at(r, {keys::kConditions, "host", "note"})) : "");
    }
    h += "</table>\n";

    const std::string source = esc(times_source(runs));
    h += "<h2>Per-phase latency per point</h2>\n<p class=\"note\">Mean µs of each phase per step (" + source +
         "), stacked in execution order.</p>\n<div id=\"sec-phase-stack\">" + chart_phase_stack(runs) + "</div>\n";
    h += "<h2>Throughput and p95 against batch size</h2>\n<p class=\"note\">Solid: tokens/s; dashed: p95 of the step "
         "(both " +
         source + "). Ring: golden point; diamonds: knees.</p>\n<div id=\"sec-throughput\">" +
         chart_throughput(report) + "</div>\n";
    long lp = load_point(report);
    std::string which = lp >= 0 ? run_label(runs[static_cast<size_t>(lp)]) : "";
    h += "<h2>Expert load over time (experts × time), per layer</h2>\n<p class=\"note\">Counted from the final expert "
         "ids of "
         "the measured steps of " +
         esc(which.empty() ? "no point" : which) + ".</p>\n<div id=\"chart-expert-heatmap\">";
    h += lp >= 0 ? chart_heatmaps(runs[static_cast<size_t>(lp)])
                 : not_available("chart-expert-heatmap-none", "no point has expert load");
    h += "</div>\n<h2>Tokens per expert</h2>\n<div id=\"chart-tokens-per-expert\">";
    h += lp >= 0 ? chart_tokens_per_expert(runs[static_cast<size_t>(lp)])
                 : not_available("chart-tokens-per-expert-none", "no point has expert load");
    h += "</div>\n<h2>Co-activation</h2>\n<div id=\"sec-coactivation\">";
    h += lp >= 0 ? chart_coactivation(runs[static_cast<size_t>(lp)])
                 : not_available("chart-coactivation", "no point has expert load");
    h += "</div>\n<h2>Ranks: phase times and bytes between them</h2>\n<div id=\"sec-ranks\">" +
         html_ranks_section(report);
    h += "</div>\n<h2>Roofline placement of each phase</h2>\n<div id=\"sec-roofline\">";
    long rp = lp;
    if (rp < 0)
        for (size_t i = 0; i < runs.size() && rp < 0; ++i)
            if (run_ok(runs[i])) rp = static_cast<long>(i);
    h += chart_roofline(report, rp);
    h += "</div>\n<p class=\"note\">Generated by moebench report from the moebench.report/1 document; every figure is "
         "labelled measured, counted, counter, modeled or extrapolated there.</p>\n</body></html>\n";
    return h;
}

}  // namespace formats_detail

}  // namespace moebench
