// SPDX-License-Identifier: Apache-2.0
// 'moebench compare A.json B.json': matched points side by side with noise-aware verdicts; exit 1 when anything
// is slower beyond --threshold, so a CI job can gate on it (docs/sweep.md).
#include "compare/compare.hpp"
#include "cli/commands.hpp"
#include "cli/flag_util.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/file_identity.hpp"
#include "report/formats.hpp"

#include <cstdlib>
#include <iostream>
#include <memory>

namespace moebench::cli {

namespace {

struct CompareFlags {
    std::string a, b, threshold = "5%", format = "text", out, match, noise_floor = "1%";
    double k_sigma = 3.0, spread_z = 1.645;
    bool gate_phases = false, allow_missing = false, allow_modeled = false;
};

// The gate failed without a slowdown (an inconclusive point, a point failed or missing in B): exit 1 and the same
// outcome as a regression for whoever catches one, in its own words.
class GateFailed : public Regression {
public:
    using Regression::Regression;
    const char* label() const override { return "gate failed"; }
};

}  // namespace

void add_compare_command(CLI::App& app) {
    auto* cmd =
        app.add_subcommand("compare", "Compare two reports point by point; exit 1 on a slowdown beyond --threshold");
    cmd->footer(
        "A difference inside the measured noise of both runs is 'same': |mean_B - mean_A| <= max(k * sqrt(sA^2/nA +\n"
        "sB^2/nB), z * sqrt((sA^2 + sB^2)/2), noise-floor * mean_A); inside a band wider than --threshold it is\n"
        "'inconclusive'. Exit 1 when a matched point is slower beyond --threshold or inconclusive, or a point of A\n"
        "failed or is missing in B. Points of different models never match; modeled and measured points only with\n"
        "--allow-modeled; environment differences (machine, threads, dtype, git revision, build) are warnings.\n"
        "Nothing comparable, or a malformed or implausible report: exit 2 (docs/sweep.md).");
    auto f = std::make_shared<CompareFlags>();
    cmd->add_option("A", f->a, "Baseline report (JSON, or a sweep journal .jsonl)")->required();
    cmd->add_option("B", f->b, "Candidate report (JSON, or a sweep journal .jsonl)")->required();
    cmd->add_option("--threshold", f->threshold, "Slowdown that fails the comparison, e.g. 5% (default 5%)");
    cmd->add_option("--format", f->format, format_names_help(DocKind::comparison) + " (default text)")
        ->type_name("FORMAT");
    cmd->add_option("-o,--out", f->out, "Write the comparison to FILE instead of stdout")->type_name("FILE");
    cmd->add_option("--match", f->match,
                    "Comma-separated axes to match points by (default: the model, the hardware and every axis)");
    add_decimal_option(cmd, "--k-sigma", f->k_sigma, "Noise band in standard errors of the difference (default 3)");
    add_decimal_option(cmd, "--spread-z", f->spread_z,
                       "Noise band in pooled step standard deviations (default 1.645; 0 = off)");
    cmd->add_option("--noise-floor", f->noise_floor, "Smallest noise band, fraction of A's mean (default 1%)");
    cmd->add_flag("--gate-phases", f->gate_phases,
                  "Also fail on a phase slower beyond the threshold (or inconclusive)");
    cmd->add_flag("--allow-missing", f->allow_missing,
                  "Points of A absent from B (or skipped there) do not fail the gate; failed ones still do");
    cmd->add_flag("--allow-modeled", f->allow_modeled,
                  "Compare modeled (sim) points with measured ones; each such verdict says so");
    cmd->callback([f] {
        CompareOptions o;
        o.threshold = parse_fraction(f->threshold, "--threshold", /*max_fraction=*/10.0);
        o.noise_floor = parse_fraction(f->noise_floor, "--noise-floor", /*max_fraction=*/1.0);
        // Finite and bounded: an infinite band would call any slowdown noise and pass the gate.
        if (!(f->k_sigma >= 0 && f->k_sigma <= 100))
            config_error("--k-sigma", "must be between 0 and 100", fmt::format("{:g}", f->k_sigma), "use e.g. 3");
        o.k_sigma = f->k_sigma;
        if (!(f->spread_z >= 0 && f->spread_z <= 100))
            config_error("--spread-z", "must be between 0 and 100", fmt::format("{:g}", f->spread_z), "use e.g. 1.645");
        o.spread_z = f->spread_z;
        o.gate_phases = f->gate_phases;
        o.allow_missing = f->allow_missing;
        o.allow_modeled = f->allow_modeled;
        if (!f->match.empty()) {
            size_t start = 0;
            while (true) {
                size_t c = f->match.find(',', start);
                std::string k = f->match.substr(start, c == std::string::npos ? std::string::npos : c - start);
                if (k.empty()) config_error("--match", "empty axis name", f->match, "write e.g. --match batch,context");
                o.match_keys.push_back(k);
                if (c == std::string::npos) break;
                start = c + 1;
            }
        }
        const std::string format = parse_format(f->format, DocKind::comparison, "--format");
        refuse_output_over_input({{"-o", f->out}}, {{"A", f->a}, {"B", f->b}});
        // One strict reader for both sides (and for `report`): a missing or mistyped field is exit 2, never a 0 us.
        const ReadReport report_a = load_report(f->a), report_b = load_report(f->b);
        // Nothing compared (no match, or nothing ran in both) is exit 2 from compare_reports: a gate must not pass it.
        json cmp = reading_input(f->a + " or " + f->b, [&] { return compare_reports(report_a, report_b, o); });
        for (const auto& w : cmp["warnings"])
            std::cerr << "moebench: warning: " << printable(w.value("message", "")) << "\n";
        std::string text =
            reading_input(f->a + " or " + f->b, [&] { return render_view(cmp, DocKind::comparison, format); });
        if (f->out.empty()) {
            std::cout << text;
            std::cout.flush();
        } else {
            write_file_atomic(f->out, text);
        }
        // Exit 1 (moebench::Error) so a CI job can gate on it; the table above says which points.
        if (cmp.value("exit_code", 0) != 0) {
            std::string why;
            for (const auto& g : cmp["gate_failures"]) why += (why.empty() ? "" : "; ") + g.get<std::string>();
            if (cmp.value("regressions", 0) > 0) throw Regression(why);
            throw GateFailed(why);
        }
    });
}

}  // namespace moebench::cli
