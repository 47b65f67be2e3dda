// SPDX-License-Identifier: Apache-2.0
// The sweep journal (JSON Lines): durable appends, tolerant reads, fingerprint check.
#include "sweep/journal.hpp"

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/json_util.hpp"
#include "common/read_file.hpp"

#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace moebench {

std::string sweep_fingerprint(const json& base_run) {
    std::string s = base_run.dump();
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : s) {
        h ^= c;
        h *= 1099511628211ull;
    }
    return fmt::format("{:016x}", h);
}

std::vector<JournalEntry> load_journal(const std::string& path, const std::string& fingerprint, bool* repaired) {
    if (repaired) *repaired = false;
    std::vector<JournalEntry> entries;
    if (!std::filesystem::exists(path)) return entries;
    const std::string text = read_file_bytes(path);

    std::map<std::string, size_t> index_of_key;
    std::string kept;  // the valid lines, for a repair
    bool torn = false;
    size_t start = 0, line_no = 0;
    while (start < text.size()) {
        size_t nl = text.find('\n', start);
        bool complete = nl != std::string::npos;
        std::string line = text.substr(start, complete ? nl - start : std::string::npos);
        start = complete ? nl + 1 : text.size();
        ++line_no;
        if (line.empty()) continue;
        const std::string where = fmt::format("{}:{}", path, line_no);
        std::optional<json> parsed = parse_json_line(line, where, "remove that line or start a new journal");
        if (!parsed) {
            if (!complete) {  // the tail of a write cut short by a kill: the point was not finished
                torn = true;
                break;
            }
            config_error(where, "is not a valid journal line", json_brief(json(line)), "remove that line or start a new journal");
        }
        json& j = *parsed;
        if (!complete) torn = true;  // valid JSON but no newline: keep it, rewrite with its newline
        // Types checked here so that a hand-edited or corrupt line is a ConfigError, not a json type_error later.
        if (!j.is_object() || !j.contains("journal") || j["journal"] != kJournalSchema || !j.contains("point") ||
            !j["point"].is_object() || !j.contains("record") || !j["record"].is_object() ||
            (j.contains("key") && !j["key"].is_string()) ||
            (j.contains("fingerprint") && !j["fingerprint"].is_string()))
            config_error(where, "is not a moebench sweep journal line",
                         json_brief(j), "pass the .jsonl journal written by moebench sweep");
        if (j.value("fingerprint", "") != fingerprint)
            config_error(path, "was written by a sweep with a different base configuration",
                         "fingerprint " + j.value("fingerprint", "?") + ", this sweep " + fingerprint,
                         "use a new --journal (or --out), or rerun with the same config and fixed flags");
        JournalEntry e;
        e.point = j.at("point");
        e.key = j.value("key", "");
        e.record = j.at("record");
        auto it = index_of_key.find(e.key);
        if (it != index_of_key.end()) {
            entries[it->second] = std::move(e);
        } else {
            index_of_key[e.key] = entries.size();
            entries.push_back(std::move(e));
        }
        kept += line + "\n";
    }
    if (torn) {
        write_file_atomic(path, kept);
        if (repaired) *repaired = true;
    }
    return entries;
}

void append_journal(const std::string& path, const std::string& fingerprint, const JournalEntry& entry) {
    json j = {{"journal", kJournalSchema}, {"fingerprint", fingerprint}, {"key", entry.key},
              {"point", entry.point},      {"finished_utc", utc_now_iso()}, {"record", entry.record}};
    append_line_durable(path, j.dump());
}

std::string utc_now_iso() {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

}  // namespace moebench
