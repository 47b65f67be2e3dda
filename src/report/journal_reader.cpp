// SPDX-License-Identifier: Apache-2.0
// Sweep journals read back: the checks every reader shares, line by line.
#include "report/journal_reader.hpp"

#include "common/error.hpp"
#include "common/read_file.hpp"
#include "core/report_keys.hpp"
#include "report/report_json.hpp"

#include <fmt/format.h>

#include <map>

namespace moebench {

namespace {

// The fields every reader uses, with their types, so that a hand-edited or corrupt line is a ConfigError naming
// the line, not a json type_error later.
JournalLine journal_line_of(const json& j, const std::string& where, size_t line_no) {
    if (!j.is_object() || j.value("journal", json()) != json(kJournalSchema) || !j.contains("key") ||
        !j["key"].is_string() || !j.contains("fingerprint") || !j["fingerprint"].is_string() || !j.contains("point") ||
        !j["point"].is_object() || !j.contains("record") || !j["record"].is_object() ||
        (j.contains("inputs") && !j["inputs"].is_object()))
        config_error(where, "is not a moebench sweep journal line", json_brief(j),
                     "pass the .jsonl journal written by moebench sweep (each line holds journal, fingerprint, key, "
                     "point and record)");
    JournalLine l;
    l.line_no = line_no;
    l.key = j["key"].get<std::string>();
    l.fingerprint = j["fingerprint"].get<std::string>();
    l.point = j["point"];
    l.record = j["record"];
    l.inputs = j.value("inputs", json::object());
    return l;
}

}  // namespace

JournalText parse_journal(const std::string& text, const std::string& path) {
    JournalText out;
    std::map<std::string, size_t> line_of_key;
    size_t start = 0, line_no = 0;
    while (start < text.size()) {
        const size_t nl = text.find('\n', start);
        const bool complete = nl != std::string::npos;
        const std::string line = text.substr(start, complete ? nl - start : std::string::npos);
        const size_t end = complete ? nl + 1 : text.size();
        ++line_no;
        if (line.find_first_not_of(" \t\r") == std::string::npos) {  // blank lines carry nothing
            start = end;
            if (complete) out.kept_bytes = end;
            continue;
        }
        const std::string where = fmt::format("{}:{}", path, line_no);
        std::optional<json> parsed = parse_json_line(line, where, "remove that line or start a new journal");
        if (!parsed) {
            if (!complete) {  // the tail of a write cut short by a kill: that point did not finish
                out.torn = true;
                break;
            }
            config_error(where, "is not a valid journal line", json_brief(json(line)),
                         "remove that line or start a new journal");
        }
        JournalLine l = journal_line_of(*parsed, where, line_no);
        start = end;
        out.kept_bytes = end;
        if (!complete) out.torn = out.missing_newline = true;  // valid, but its '\n' never came: keep it
        if (!out.lines.empty() && l.fingerprint != out.lines.front().fingerprint)
            config_error(where,
                         fmt::format("was written by another sweep than line {} (fingerprint {}, line {}: {}): the "
                                     "file joins the journals of two sweeps with other fixed fields or input files",
                                     out.lines.front().line_no, l.fingerprint, out.lines.front().line_no,
                                     out.lines.front().fingerprint),
                         "", "keep one sweep's lines in a journal (render or compare each journal on its own)");
        const auto [at, first_time] = line_of_key.emplace(l.key, line_no);
        if (!first_time)
            config_error(where,
                         fmt::format("records point {} again (line {} holds it already): a journal holds each point "
                                     "once, so this file was appended to or joined with another",
                                     printable(l.key), at->second),
                         "", fmt::format("keep one of lines {} and {} (or start a new journal)", at->second, line_no));
        out.lines.push_back(std::move(l));
    }
    return out;
}

JournalText read_journal(const std::string& path) { return parse_journal(read_file_bytes(path), path); }

json report_of_journal(const JournalText& journal, const std::string& path) {
    json runs = json::array();
    for (const JournalLine& l : journal.lines) runs.push_back(l.record);
    return json{{"schema", kReportSchema}, {"command", "(from sweep journal " + path + ")"}, {keys::kRuns, runs}};
}

}  // namespace moebench
