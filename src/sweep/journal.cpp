// SPDX-License-Identifier: Apache-2.0
// The sweep journal (JSON Lines): durable appends, the fingerprint and input digests, repair of a torn tail in place.
#include "sweep/journal.hpp"

#include "common/atomic_file.hpp"
#include "common/content_hash.hpp"
#include "common/error.hpp"
#include "common/flag_names.hpp"
#include "common/json_util.hpp"
#include "common/read_file.hpp"
#include "harness/run_inputs.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>

namespace moebench {

namespace {

// What each digested run config field is, for messages.
std::string input_noun(const std::string& field) {
    if (field == "model") return "model file";
    if (field == "hardware") return "hardware profile";
    if (field == "routing") return "routing trace";
    if (field == "placement") return "placement file";
    return field;
}

// Cuts a torn tail off the journal in place: truncate to the lines kept, and end the last one with its '\n'.
void repair_in_place(const std::string& path, const JournalText& j) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    bool ok = fd >= 0 && ::ftruncate(fd, static_cast<off_t>(j.kept_bytes)) == 0;
    if (ok && j.missing_newline) ok = ::pwrite(fd, "\n", 1, static_cast<off_t>(j.kept_bytes)) == 1;
    if (ok) ok = ::fsync(fd) == 0;
    const std::string why = ok ? "" : std::strerror(errno);
    if (fd >= 0 && ::close(fd) != 0 && ok) ok = false;
    if (!ok)
        config_error(path, "cannot cut the torn last line off the journal", why.empty() ? std::strerror(errno) : why,
                     "check the journal is writable");
}

}  // namespace

std::string sweep_fingerprint(const json& fixed) {
    return fnv1a64_hex(fixed.dump());
}

json InputDigests::of(const RunConfig& cfg) {
    json in = json::object();
    for (const RunInput& file : run_input_files(cfg)) {
        std::string digest;
        if (!file.path.empty()) {
            auto it = by_path_.find(file.path);
            digest = it != by_path_.end() ? it->second : (by_path_[file.path] = file_fnv1a64_hex(file.path));
        }
        in[file.field] = digest.empty() ? "unresolved: " + file.name : digest;
    }
    return in;
}

std::vector<JournalEntry> load_journal(const std::string& path, const std::string& fingerprint, bool* repaired) {
    return load_journal(path, JournalExpectation{fingerprint, {}}, repaired);
}

std::vector<JournalEntry> load_journal(const std::string& path, const JournalExpectation& want, bool* repaired) {
    if (repaired) *repaired = false;
    std::vector<JournalEntry> entries;
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return entries;
    const JournalText j = read_journal(path);
    for (const JournalLine& l : j.lines) {
        const std::string where = fmt::format("{}:{}", path, l.line_no);
        // The inputs first: when a file changed, say which (the fingerprint then differs too, saying less).
        auto now = want.inputs_by_key.find(l.key);
        if (now != want.inputs_by_key.end() && !l.inputs.empty())
            for (const auto& [field, digest] : now->second.items())
                if (l.inputs.value(field, json()) != digest)
                    config_error(where,
                                 fmt::format("point {} was measured with another {}: its content changed since "
                                             "(digest {}, now {})",
                                             printable(l.key), input_noun(field), json_brief(l.inputs.value(field, json())),
                                             json_brief(digest)),
                                 "",
                                 fmt::format("restore the file, or start a new sweep: another {} / {}, without {} "
                                             "(one report must not mix results of two versions of a file)",
                                             flag_of("journal"), flag_of("out"), flag_of("resume")));
        if (l.fingerprint != want.fingerprint)
            config_error(path, "was written by a sweep with other fixed fields or other input files",
                         "fingerprint " + l.fingerprint + ", this sweep " + want.fingerprint,
                         fmt::format("use a new {} (or {}), or rerun with the same config, fixed flags and files",
                                     flag_of("journal"), flag_of("out")));
        entries.push_back(JournalEntry{l.key, l.point, l.record, l.inputs});
    }
    if (j.torn) {
        repair_in_place(path, j);
        if (repaired) *repaired = true;
    }
    return entries;
}

void append_journal(const std::string& path, const std::string& fingerprint, const JournalEntry& entry) {
    json j = {{"journal", kJournalSchema}, {"fingerprint", fingerprint}, {"key", entry.key},
              {"point", entry.point},      {"inputs", entry.inputs},    {"finished_utc", utc_now_iso()},
              {"record", entry.record}};
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
