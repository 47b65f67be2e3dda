// SPDX-License-Identifier: Apache-2.0
// The views of compare's result (compare/compare.hpp): the terminal table, and Markdown (a document: it carries the
// warnings and why the gate failed, which the terminal has on stderr).
#include "core/report_keys.hpp"

#include "common/flag_names.hpp"
#include "report/formats.hpp"

#include <fmt/format.h>

namespace moebench::formats_detail {

namespace {

std::string comparison(const json& cmp, bool md) {
    // Markdown: every string from the reports (paths, labels, axis values, messages) through md_cell.
    const auto text = [md](const std::string& s) { return md ? md_cell(s) : s; };
    std::string a = text(cmp.value("a", "A")), b = text(cmp.value("b", "B")), o;
    o += md ? "# moebench compare\n\n" : "";
    o += fmt::format("{}A = {}\n{}B = {}\n", md ? "- " : "", a, md ? "- " : "", b);
    for (const auto& [k, v] : cmp["contrast"].items())
        o += fmt::format("{}contrast: {} = {} (A) vs {} (B)\n", md ? "- " : "", text(k), text(key_text(v[0])),
                         text(key_text(v[1])));
    // The terminal has the warnings on stderr already; a Markdown comparison is a document and carries them.
    if (md)
        for (const auto& w : cmp.value("warnings", json::array()))
            o += "- warning: " + text(w.value("message", "")) + "\n";
    o += fmt::format("{}rule: {}\n\n", md ? "- " : "", text(cmp.value("rule", "")));
    if (md)
        o += "| point | phase | A mean µs | B mean µs | B/A | noise ± µs | verdict "
             "|\n|---|---|---:|---:|---:|---:|---|\n";
    else
        o += fmt::format("{:<36} {:<17} {:>12} {:>12} {:>7} {:>10}  {}\n", "point", "phase", "A mean us", "B mean us",
                         "B/A", "noise us", "verdict");
    auto line = [&](const std::string& pt, const std::string& ph, double ma, double mb, double ratio, double noise,
                    const std::string& verdict) {
        if (md)
            o += fmt::format("| {} | {} | {:.2f} | {:.2f} | {:.3f} | {:.2f} | {} |\n", md_cell(pt), text(ph), ma, mb,
                             ratio, noise, md_cell(verdict));
        else
            o += fmt::format("{:<36} {:<17} {:>12.2f} {:>12.2f} {:>7.3f} {:>10.2f}  {}\n", pt.substr(0, 36), ph, ma, mb,
                             ratio, noise, verdict);
    };
    for (const auto& p : cmp["points"]) {
        std::string label = p.value("label", "");
        if (!p.contains(keys::kStep)) {
            if (md)
                o += fmt::format("| {} | step | | | | | {} ({}) |\n", md_cell(label), text(p.value("verdict", "")),
                                 md_cell(p.value("why", "")));
            else
                o += fmt::format("{:<36} {:<17} {}\n", label.substr(0, 36), keys::kStep,
                                 p.value("verdict", "") + " (" + p.value("why", "") + ")");
            continue;
        }
        const json& s = p[keys::kStep];
        std::string verdict = s.value("verdict", "") + (s.value("regression", false) ? " REGRESSION" : "");
        if (p.contains("sources"))  // --allow-modeled: a model against a measurement, said next to the verdict
            verdict += fmt::format(" (A {} vs B {})", p["sources"].value("a", ""), p["sources"].value("b", ""));
        line(label, keys::kStep, s.value("a_mean_us", 0.0), s.value("b_mean_us", 0.0), s.value("ratio", 0.0),
             s.value("noise_us", 0.0), verdict);
        for (const auto& ph : p[keys::kPhases]) {
            if (!ph.contains("ratio")) {
                if (md)
                    o += fmt::format("| | {} | | | | | {} |\n", text(ph.value("phase", "")),
                                     text(ph.value("verdict", "")));
                else
                    o += fmt::format("{:<36} {:<17} {}\n", "", ph.value("phase", ""), ph.value("verdict", ""));
                continue;
            }
            std::string v = ph.value("verdict", "") + (ph.value("regression", false) ? " (beyond threshold)" : "");
            line("", "  " + ph.value("phase", ""), ph.value("a_mean_us", 0.0), ph.value("b_mean_us", 0.0),
                 ph.value("ratio", 0.0), ph.value("noise_us", 0.0), v);
        }
        if (!md)
            o += fmt::format("{:<36} {:<17} {:>12.1f} {:>12.1f} {:>7.3f}\n", "", "tokens/s",
                             p.value("a_tokens_per_s", 0.0), p.value("b_tokens_per_s", 0.0),
                             p.value("throughput_ratio", 0.0));
    }
    for (const char* side : {"unmatched_a", "unmatched_b"})
        for (const auto& u : cmp[side])
            o += fmt::format(
                "{}unmatched (only in {}{}): {}\n", md ? "- " : "", side[10] == 'a' ? a : b,
                side[10] == 'a' && !cmp.value("allow_missing", false) ? "; missing from B fails the gate" : "",
                text(u.get<std::string>()));
    // What an inconclusive point needs, one line each (the table has no room for it).
    for (const auto& p : cmp["points"])
        if (p.value("verdict", "") == "inconclusive")
            o += fmt::format("{}inconclusive: {}: {}\n", md ? "- " : "", text(p.value("label", "")),
                             text(p.value("why", "")));
    const json& c = cmp["counts"];
    std::string extra;
    if (c.value("failed_in_b", 0) + c.value("missing_in_b", 0) > 0)
        extra +=
            fmt::format("; {} failed in B, {} missing from B", c.value("failed_in_b", 0), c.value("missing_in_b", 0));
    if (c.value("modeled_vs_measured", 0) > 0)
        extra += fmt::format("; {} compared a model with a measurement ({})", c.value("modeled_vs_measured", 0),
                             flag_of("allow_modeled"));
    o += fmt::format(
        "\n{}{} matched: {} faster, {} slower, {} same, {} inconclusive, {} not comparable{}; {} regression(s) "
        "beyond {:.1f}% -> exit {}\n",
        md ? "**summary**: " : "summary: ", c.value("matched", 0), c.value("faster", 0), c.value("slower", 0),
        c.value("same", 0), c.value("inconclusive", 0), c.value("not_comparable", 0), extra,
        cmp.value("regressions", 0), 100 * cmp.value("threshold", 0.0), cmp.value("exit_code", 0));
    // Why the gate failed: on stderr from the terminal, in the document for Markdown (as the warnings are).
    if (md)
        for (const auto& g : cmp.value("gate_failures", json::array()))
            o += "- gate failed: " + g.get<std::string>() + "\n";
    return o;
}

}  // namespace

std::string render_comparison_text(const json& cmp) { return comparison(cmp, false); }
std::string render_comparison_md(const json& cmp) { return comparison(cmp, true); }

}  // namespace moebench::formats_detail
