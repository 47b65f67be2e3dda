// SPDX-License-Identifier: Apache-2.0
// 'moebench report R.json --format FMT [-o FILE]': views of a report (its formats: report/formats.cpp). A sweep
// journal (.jsonl) is accepted too, so the points of a killed sweep can be looked at before it is resumed.
#include "cli/commands.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/file_identity.hpp"
#include "report/formats.hpp"
#include "report/report_reader.hpp"

#include <iostream>
#include <memory>

namespace moebench::cli {

void add_report_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("report", "Render a report as " + format_names_help(DocKind::report, ", ", false));
    cmd->footer("CSV columns: docs/csv-columns.md. HTML is one self-contained file (inline SVG, no network).");
    auto input = std::make_shared<std::string>();
    auto format = std::make_shared<std::string>("md");
    auto out = std::make_shared<std::string>();
    cmd->add_option("REPORT", *input, "moebench.report/1 JSON (or a sweep journal .jsonl)")->required();
    cmd->add_option("--format", *format, format_names_help(DocKind::report) + " (default md)")->type_name("FORMAT");
    cmd->add_option("-o,--out", *out, "Output file (default stdout)")->type_name("FILE");
    cmd->callback([=] {
        const std::string fmt_name = parse_format(*format, DocKind::report, "--format");
        refuse_output_over_input({{"-o", *out}}, {{"REPORT", *input}});
        // The strict reader `compare` uses: a missing or mistyped field is exit 2 naming it, never a blank cell.
        const ReadReport report = load_report(*input);
        std::string text = reading_input(*input, [&] { return render_report(report.doc, fmt_name); });
        if (out->empty() || *out == "-") {
            std::cout << text;
            std::cout.flush();
        } else {
            write_file_atomic(*out, text);
            std::cerr << "wrote " << *out << "\n";
        }
    });
}

}  // namespace moebench::cli
