// SPDX-License-Identifier: Apache-2.0
// 'moebench report R.json --format csv|md|html|trace|prom|json [-o FILE]': views of a report. A sweep journal
// (.jsonl) is accepted too, so the points of a killed sweep can be looked at before it is resumed.
#include "cli/commands.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/read_file.hpp"
#include "report/formats.hpp"
#include "report/report_json.hpp"
#include "sweep/journal.hpp"

#include <fstream>
#include <map>
#include <iostream>
#include <memory>
#include <sstream>

namespace moebench::cli {

namespace {

// A report from a journal: runs[] = the journal's records (later lines for the same point win).
json report_from_journal(const std::string& path) {
    require_readable_file(path);
    std::ifstream in(path);
    json runs = json::array();
    std::map<std::string, size_t> at;
    std::string line;
    size_t n = 0;
    while (std::getline(in, line)) {
        ++n;
        if (line.empty()) continue;
        json j;
        try {
            j = json::parse(line);
        } catch (const json::exception&) {  // parse_error, and out_of_range 406 for a number like 1e400
            if (in.peek() == EOF) break;  // a torn last line: that point did not finish
            config_error(path + ":" + std::to_string(n), "is not a valid journal line", "", "remove that line");
        }
        if (!j.is_object() || !j.contains("record") || !j["record"].is_object() ||
            (j.contains("key") && !j["key"].is_string()))
            config_error(path + ":" + std::to_string(n), "is not a moebench sweep journal line", json_brief(j), "");
        std::string key = j.value("key", std::to_string(n));
        if (at.count(key)) runs[at[key]] = j["record"];
        else {
            at[key] = runs.size();
            runs.push_back(j["record"]);
        }
    }
    json report = {{"schema", kReportSchema}, {"command", "(from sweep journal " + path + ")"}, {"runs", runs}};
    return report;
}

}  // namespace

void add_report_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("report", "Render a report as csv, md, html, trace (Chrome/Perfetto) or prom");
    cmd->footer("CSV columns: docs/csv-columns.md. HTML is one self-contained file (inline SVG, no network).");
    auto input = std::make_shared<std::string>();
    auto format = std::make_shared<std::string>("md");
    auto out = std::make_shared<std::string>();
    cmd->add_option("REPORT", *input, "moebench.report/1 JSON (or a sweep journal .jsonl)")->required();
    cmd->add_option("--format", *format, "csv | md | html | trace | prom | json (default md)");
    cmd->add_option("-o,--out", *out, "Output file (default stdout)");
    cmd->callback([=] {
        std::string fmt_name = parse_format_list(*format, "--format", false).front();
        bool is_journal = input->size() > 6 && input->substr(input->size() - 6) == ".jsonl";
        json report = is_journal ? report_from_journal(*input) : load_json_file(*input);
        if (!is_journal && report.is_object() && report.contains("schema") && report["schema"] != kReportSchema)
            config_error(*input, "has an unknown schema", json_brief(report["schema"]), std::string("expected ") + kReportSchema);
        std::string text = reading_input(*input, [&] { return render_report(report, fmt_name); });
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
