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
#include <sys/stat.h>
#include <time.h>
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

std::string sweep_fingerprint(const json& fixed) { return fnv1a64_hex(fixed.dump()); }

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
                                             printable(l.key), input_noun(field),
                                             json_brief(l.inputs.value(field, json())), json_brief(digest)),
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

namespace {

// One journal line in two pieces, the record last: `head` + record + "}". The record's place in the line is then
// known without searching it.
std::string journal_line_head(const std::string& fingerprint, const std::string& key, const json& point,
                              const json& inputs) {
    json j = {{"journal", kJournalSchema}, {"fingerprint", fingerprint},   {"key", key}, {"point", point},
              {"inputs", inputs},          {"finished_utc", utc_now_iso()}};
    std::string head = j.dump();
    head.pop_back();  // the closing brace
    return head + ",\"record\":";
}

double now_s() {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

void append_journal(const std::string& path, const std::string& fingerprint, const JournalEntry& entry) {
    append_line_durable(
        path, journal_line_head(fingerprint, entry.key, entry.point, entry.inputs) + entry.record.dump() + "}");
}

JournalWriter::JournalWriter(std::string path, std::string fingerprint)
    : path_(std::move(path)), fingerprint_(std::move(fingerprint)) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path p(path_);
    if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0)
        config_error(path_, "cannot open the journal for appending", std::strerror(errno),
                     "check the folder is writable");
    struct stat st {};
    size_ = ::fstat(fd_, &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
    last_sync_s_ = now_s();
}

JournalWriter::~JournalWriter() {
    if (fd_ < 0) return;
    if (dirty_) ::fsync(fd_);
    ::close(fd_);
}

JournalSpan JournalWriter::append(const JournalEntry& entry) {
    return append(entry.key, entry.point, entry.inputs, entry.record.dump());
}

JournalSpan JournalWriter::append(const std::string& key, const json& point, const json& inputs,
                                  const std::string& record_text) {
    MOEBENCH_CHECK(fd_ >= 0, "journal {} is closed", path_);
    const std::string head = journal_line_head(fingerprint_, key, point, inputs);
    std::string line;
    line.reserve(head.size() + record_text.size() + 2);
    line.append(head).append(record_text).append("}\n");
    for (size_t done = 0; done < line.size();) {
        const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) config_error(path_, "write failed", std::strerror(errno), "check disk space and permissions");
        done += static_cast<size_t>(n);
    }
    const JournalSpan span{size_ + static_cast<int64_t>(head.size()),
                           static_cast<int64_t>(line.size() - head.size() - 2)};  // less "}\n"
    size_ += static_cast<int64_t>(line.size());
    dirty_ = true;
    if (now_s() - last_sync_s_ >= kSyncIntervalS) sync();
    return span;
}

void JournalWriter::sync() {
    if (fd_ < 0 || !dirty_) return;
    if (::fsync(fd_) != 0)
        config_error(path_, "write failed", std::strerror(errno), "check disk space and permissions");
    dirty_ = false;
    last_sync_s_ = now_s();
}

void JournalWriter::close() {
    if (fd_ < 0) return;
    sync();
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) config_error(path_, "write failed", std::strerror(errno), "check disk space and permissions");
}

std::string read_journal_span(const std::string& path, const JournalSpan& span) {
    std::string text(static_cast<size_t>(span.length), '\0');
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        config_error(path, "cannot read the journal back", std::strerror(errno), "check the journal is readable");
    size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = ::pread(fd, text.data() + done, text.size() - done,
                                  static_cast<off_t>(span.offset) + static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += static_cast<size_t>(n);
    }
    ::close(fd);
    if (done != text.size())
        config_error(path, "changed while the sweep ran: a point's record is no longer where it was written",
                     fmt::format("bytes {}..{}", span.offset, span.offset + span.length),
                     "leave the journal alone while its sweep runs; the journal holds every finished point");
    return text;
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
