// SPDX-License-Identifier: Apache-2.0
// Views of a moebench.deploy/1 document (`moebench deploy`, docs/deploy.md): text (the terminal's), csv (one row per
// configuration), html (the frontier of each hardware on one chart, a point's layout on hover); json is the document.
// Registered in the format table (formats.cpp, DocKind::deploy), which parses --format.
#include "report/formats.hpp"

#include "common/flag_names.hpp"
#include "report/html_svg.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace moebench {

namespace {

using formats_detail::scalar_text;
using formats_detail::str_at;

double num(const json& j, const char* key) {
    return j.contains(key) && j[key].is_number() ? j[key].get<double>() : NAN;
}

std::string fixed(double v, int digits) { return std::isfinite(v) ? fmt::format("{:.{}f}", v, digits) : "n/a"; }

std::string gib(double bytes) { return fmt::format("{:.1f} GiB", bytes / (1024.0 * 1024 * 1024)); }

std::string text_of(const json& j, const char* key) { return j.contains(key) ? scalar_text(j[key]) : ""; }

std::string point_label(const json& p) {
    return fmt::format("{} x {} ({}), concurrency {}", text_of(p, "num_gpus"), str_at(p, {"hardware"}, "?"),
                       str_at(p, {"layout", "describe"}, "?"), text_of(p, "concurrency"));
}

std::string figures_text(const json& p) {
    std::string s;
    const double overhead_ms = num(p, "request_overhead_ms");
    s += fmt::format("  TTFT          {} ms{}\n", fixed(num(p, "ttft_ms"), 1),
                     overhead_ms > 0
                         ? fmt::format(" (of which {} ms {})", fixed(overhead_ms, 1), flag_of("request_overhead_ms"))
                         : std::string());
    s += fmt::format("  TPOT          {} ms mean, {} ms p90 ({} tokens/s/user)\n", fixed(num(p, "tpot_ms"), 2),
                     fixed(num(p, "tpot_p90_ms"), 2), fixed(num(p, "output_tokens_per_s_per_user"), 1));
    s += fmt::format("  throughput    {} output tokens/s/GPU, {} input tokens/s/GPU\n",
                     fixed(num(p, "output_tokens_per_s_per_gpu"), 1), fixed(num(p, "input_tokens_per_s_per_gpu"), 1));
    s += fmt::format("  memory        {} of {} per GPU ({})\n", gib(num(p, "memory_per_gpu_bytes")),
                     gib(num(p, "memory_capacity_bytes")), p.value("fits", false) ? "fits" : "DOES NOT FIT");
    const double usd = num(p, "usd_per_million_output_tokens");
    const std::string price_flag = flag_of("price");
    s += fmt::format("  cost          {}\n",
                     std::isfinite(usd) ? fmt::format("${:.3f} per million output tokens (${}/GPU-hour, {})", usd,
                                                      fixed(num(p, "price_per_gpu_hour"), 2),
                                                      text_of(p, "price_source") == price_flag
                                                          ? price_flag
                                                          : "the profile's price_per_gpu_hour: price_source")
                                        : "not available: no price (give " + price_flag + " USD per GPU-hour)");
    const double j = num(p, "joules_per_output_token");
    s += fmt::format("  energy        {}\n", std::isfinite(j) ? fmt::format("{:.3f} J per output token (every board at "
                                                                            "its TDP, {} W)",
                                                                            j, fixed(num(p, "tdp_w"), 0))
                                                              : std::string("not available: the profile has no tdp_w"));
    if (p.contains("phase_groups_us") && p["phase_groups_us"].is_object()) {
        std::string g;
        for (const auto& [k, v] : p["phase_groups_us"].items())
            if (v.is_number()) g += fmt::format("{}{} {:.2f} ms", g.empty() ? "" : ", ", k, v.get<double>() / 1e3);
        s += "  step (mean)   " + g + "\n";
    }
    return s;
}

const std::vector<std::string> kCsvColumns = {"hardware",
                                              "num_gpus",
                                              "tp",
                                              "attention_dp",
                                              "moe_tp",
                                              "moe_ep",
                                              "concurrency",
                                              "ttft_ms",
                                              "tpot_ms",
                                              "tpot_p90_ms",
                                              "output_tokens_per_s_per_gpu",
                                              "output_tokens_per_s_per_user",
                                              "input_tokens_per_s_per_gpu",
                                              "memory_per_gpu_bytes",
                                              "fits",
                                              "usd_per_million_output_tokens",
                                              "joules_per_output_token",
                                              "on_frontier"};

std::string csv_cell(const json& p, const std::string& col) {
    if (col == "tp" || col == "attention_dp" || col == "moe_tp" || col == "moe_ep")
        return p.contains("layout") ? text_of(p["layout"], col.c_str()) : "";
    if (col == "on_frontier") return p.value("on_frontier", false) ? "true" : "false";
    std::string v = text_of(p, col.c_str());
    if (v.find_first_of(",\"\n") != std::string::npos) {
        std::string q = "\"";
        for (char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
        return q + "\"";
    }
    return v;
}

}  // namespace

namespace formats_detail {

std::string render_deploy_text(const json& doc) {
    const std::string kind = str_at(doc, {"kind"}, "point");
    std::string s = fmt::format(
        "moebench deploy: {}, isl {}, osl {}, chunk budget {} tokens; every figure modeled "
        "(sim steps)\n",
        str_at(doc, {"model"}, "?"), text_of(doc, "isl"), text_of(doc, "osl"), text_of(doc, "max_prefill_tokens"));
    if (kind == "point") {
        s += point_label(doc) + "\n" + figures_text(doc);
        if (doc.contains("cycle")) {
            const json& c = doc["cycle"];
            s += fmt::format("  cycle         {} steps: {} with prompt chunks, decode batch {} at context {}{}\n",
                             text_of(c, "steps"), text_of(c, "prefill_steps"), text_of(c, "decode_batch"),
                             text_of(c, "decode_context"),
                             c.value("prefill_bound", false) ? "; prefill-bound (the chunk budget sets the pace)" : "");
        }
        return s;
    }
    if (kind == "disagg") {
        s += fmt::format("disaggregated: prefill {} GPUs ({}), decode {} GPUs ({}) of {}, concurrency {}\n",
                         text_of(doc["prefill_pool"], "gpus"), str_at(doc, {"prefill_pool", "layout", "describe"}),
                         text_of(doc["decode_pool"], "gpus"), str_at(doc, {"decode_pool", "layout", "describe"}),
                         str_at(doc, {"hardware"}), text_of(doc, "concurrency"));
        s += figures_text(doc);
        s += fmt::format("  KV transfer   {} ms per request\n  balance       {}\n",
                         fixed(num(doc, "kv_transfer_ms"), 2), str_at(doc, {"balance"}));
        return s;
    }
    // search
    const json& points = doc.at("points");
    s += fmt::format("search: {} points that fit ({} layouts, {} points not fitting), {:.2f} s\n", points.size(),
                     text_of(doc["search"], "layouts"), text_of(doc["search"], "points_not_fitting"),
                     num(doc["search"], "seconds"));
    for (const auto& [hw, idx] : doc.at("frontier").items()) {
        s += fmt::format("\nfrontier on {} (output tokens/s/GPU against tokens/s/user):\n", hw);
        s += fmt::format("  {:>5} {:<44} {:>6} {:>10} {:>10} {:>10} {:>9}\n", "GPUs", "layout", "conc", "tok/s/user",
                         "tok/s/GPU", "TTFT ms", "TPOT ms");
        for (const json& i : idx) {
            const json& p = points.at(i.get<size_t>());
            s += fmt::format("  {:>5} {:<44} {:>6} {:>10} {:>10} {:>10} {:>9}\n", text_of(p, "num_gpus"),
                             str_at(p, {"layout", "describe"}), text_of(p, "concurrency"),
                             fixed(num(p, "output_tokens_per_s_per_user"), 1),
                             fixed(num(p, "output_tokens_per_s_per_gpu"), 1), fixed(num(p, "ttft_ms"), 1),
                             fixed(num(p, "tpot_ms"), 2));
        }
    }
    const json& limits = doc.at("limits");
    const std::string lim = fmt::format("TTFT <= {} ms, TPOT <= {} ms",
                                        limits["ttft_ms"].is_null() ? "any" : scalar_text(limits["ttft_ms"]),
                                        limits["tpot_ms"].is_null() ? "any" : scalar_text(limits["tpot_ms"]));
    if (doc["best"].is_null()) {
        s += "\nbest under " + lim + ": none: " + str_at(doc, {"none_fits"}) + "\n";
    } else {
        const json& b = points.at(doc["best"].get<size_t>());
        s += "\nbest under " + lim + ": " + point_label(b) + "\n" + figures_text(b);
    }
    return s;
}

std::string render_deploy_csv(const json& doc) {
    std::string s;
    for (size_t i = 0; i < kCsvColumns.size(); ++i) {
        if (i) s += ',';
        s += kCsvColumns[i];
    }
    s += "\n";
    const auto row = [&](const json& p) {
        for (size_t i = 0; i < kCsvColumns.size(); ++i) {
            if (i) s += ',';
            s += csv_cell(p, kCsvColumns[i]);
        }
        s += "\n";
    };
    if (doc.contains("points") && doc["points"].is_array())
        for (const json& p : doc["points"]) row(p);
    else
        row(doc);
    return s;
}

std::string render_deploy_html(const json& doc) {
    using namespace html_svg;
    std::string h =
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>moebench deploy</title>\n"
        "<style>body{font-family:sans-serif;margin:20px}text{font-size:12px}.axis{stroke:#333}"
        ".grid{stroke:#ddd}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;"
        "text-align:right}</style></head><body>\n";
    h += "<h1>moebench deploy: " + esc(str_at(doc, {"model"}, "?")) + "</h1>\n<p>isl " + esc(text_of(doc, "isl")) +
         ", osl " + esc(text_of(doc, "osl")) + ", chunk budget " + esc(text_of(doc, "max_prefill_tokens")) +
         " tokens. Every figure is modeled (steps priced by the sim backend; docs/deploy.md).</p>\n";
    json points = doc.contains("points") ? doc["points"] : json::array({doc});
    double xmax = 0, ymax = 0;
    for (const json& p : points) {
        xmax = std::max(xmax, num(p, "output_tokens_per_s_per_user"));
        ymax = std::max(ymax, num(p, "output_tokens_per_s_per_gpu"));
    }
    const int W = 900, H = 520;
    const Frame f{80, 30, 760, 420};
    const double xhi = nice_ticks(xmax > 0 ? xmax : 1).back() >= xmax ? nice_ticks(xmax > 0 ? xmax : 1).back() : xmax;
    const double yhi = nice_ticks(ymax > 0 ? ymax : 1).back() >= ymax ? nice_ticks(ymax > 0 ? ymax : 1).back() : ymax;
    const auto px = [&](double x) { return f.x0 + (xhi > 0 ? x / xhi : 0) * f.w; };
    const auto py = [&](double y) { return f.y0 + f.h - (yhi > 0 ? y / yhi : 0) * f.h; };
    std::string svg = svg_open("frontier", W, H, "output tokens/s/GPU against tokens/s/user");
    svg += y_axis(f, yhi, "output tokens/s/GPU");
    svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" class=\"axis\"/>\n", f.x0,
                       f.y0 + f.h, f.x0 + f.w, f.y0 + f.h);
    for (double v : nice_ticks(xhi)) svg += text(px(v), f.y0 + f.h + 16, tick_text(v), "text-anchor=\"middle\"");
    svg += text(f.x0 + f.w / 2, f.y0 + f.h + 40, "tokens/s/user (1000 / TPOT ms)", "text-anchor=\"middle\"");
    // Hardware in the order of the frontier block (or the one point's).
    std::vector<std::string> hws;
    if (doc.contains("frontier"))
        for (const auto& [hw, idx] : doc["frontier"].items()) hws.push_back(hw);
    for (const json& p : points)
        if (std::find(hws.begin(), hws.end(), str_at(p, {"hardware"})) == hws.end())
            hws.push_back(str_at(p, {"hardware"}));
    for (size_t k = 0; k < hws.size(); ++k) {
        const std::string color = kSeriesColors[k % 8];
        for (const json& p : points) {
            if (str_at(p, {"hardware"}) != hws[k]) continue;
            svg += fmt::format(
                "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\" fill-opacity=\"{}\"><title>{}: "
                "{:.1f} tok/s/user, {:.1f} tok/s/GPU, TTFT {:.1f} ms</title></circle>\n",
                px(num(p, "output_tokens_per_s_per_user")), py(num(p, "output_tokens_per_s_per_gpu")),
                p.value("on_frontier", false) ? 4 : 2.5, color, p.value("on_frontier", false) ? 1.0 : 0.3,
                esc(point_label(p)), num(p, "output_tokens_per_s_per_user"), num(p, "output_tokens_per_s_per_gpu"),
                num(p, "ttft_ms"));
        }
        if (doc.contains("frontier") && doc["frontier"].contains(hws[k])) {
            std::string pts;
            for (const json& i : doc["frontier"][hws[k]]) {
                const json& p = points.at(i.get<size_t>());
                pts += fmt::format("{:.1f},{:.1f} ", px(num(p, "output_tokens_per_s_per_user")),
                                   py(num(p, "output_tokens_per_s_per_gpu")));
            }
            svg +=
                fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n", pts, color);
        }
        svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"10\" height=\"10\" fill=\"{}\"/>\n",
                           f.x0 + f.w - 150, f.y0 + 8 + 16.0 * static_cast<double>(k), color);
        svg += text(f.x0 + f.w - 135, f.y0 + 17 + 16.0 * static_cast<double>(k), hws[k]);
    }
    svg += "</svg>\n";
    h += "<h2>Output tokens/s/GPU against tokens/s/user (the frontier of each hardware drawn; hover a point for its "
         "layout)</h2>\n" +
         svg;
    h += "<h2>Configurations</h2>\n<table>\n<tr>";
    for (const std::string& c : kCsvColumns) h += "<th>" + esc(c) + "</th>";
    h += "</tr>\n";
    for (const json& p : points) {
        h += "<tr>";
        for (const std::string& c : kCsvColumns) h += "<td>" + esc(csv_cell(p, c)) + "</td>";
        h += "</tr>\n";
    }
    h += "</table>\n</body></html>\n";
    return h;
}

}  // namespace formats_detail

}  // namespace moebench
