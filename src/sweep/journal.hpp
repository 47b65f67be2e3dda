// SPDX-License-Identifier: Apache-2.0
// The sweep journal: one JSON line per finished point, appended and fsynced at once, so a sweep killed at any
// moment (even SIGKILL) loses no finished point and `--resume` can skip what is done. Reading it back is
// report/journal_reader.hpp's, the one journal reader; this file adds what only a sweep checks: that the journal is
// this sweep's (fingerprint) and that the files each point read are unchanged (inputs).
#pragma once
#include "common/json_util.hpp"
#include "config/run_config.hpp"
#include "report/journal_reader.hpp"

#include <map>
#include <string>
#include <vector>

namespace moebench {

/// One journal line: {"journal": kJournalSchema, "fingerprint", "key", "point", "inputs", "finished_utc", "record"}.
struct JournalEntry {
    std::string key;               // point_key(point)
    json point;                    // the sweep axes of this point
    json record;                   // the runs[] record (status ok | skipped | failed)
    json inputs = json::object();  // what the point read, by content (InputDigests::of)
};

/// Identity of the sweep's fixed part: FNV-1a 64 of the compact dump of `fixed`, as 16 hex digits. The caller
/// (plan_sweep) passes the fixed run config fields with every input file replaced by its content digest, so a
/// journal is reused only when the fields and the bytes the sweep reads are the same, wherever the files lie.
std::string sweep_fingerprint(const json& fixed);

/// The input files of a run config (harness/run_inputs.hpp), by content: {"model", "hardware", "routing"
/// (trace:FILE), "placement"} -> FNV-1a 64 of the file's bytes (16 hex digits); short names are resolved as the run
/// resolves them ("olmoe-1b-7b" -> configs/models/olmoe-1b-7b.json). A name that resolves to no readable file gives
/// "unresolved: NAME" (the point then fails as it would have). Each file is read once per InputDigests.
class InputDigests {
public:
    json of(const RunConfig& cfg);

private:
    std::map<std::string, std::string> by_path_;  // resolved path -> digest
};

/// What a resuming sweep expects of its journal.
struct JournalExpectation {
    std::string fingerprint;                    // plan_sweep's
    std::map<std::string, json> inputs_by_key;  // each point of the expansion: InputDigests::of its config
};

/// Reads a journal (parse_journal's checks). A missing or empty file gives no entries. A torn last line (the process
/// died inside the write) is cut off in place (the file keeps its identity, and so the sweep's lock) and
/// *repaired = true. A line of another sweep (fingerprint) -> ConfigError naming the fix; a point whose recorded
/// inputs differ from what it would read now -> ConfigError naming the file that changed.
std::vector<JournalEntry> load_journal(const std::string& path, const JournalExpectation& want, bool* repaired);
std::vector<JournalEntry> load_journal(const std::string& path, const std::string& fingerprint, bool* repaired);

/// Appends one finished point (durable: fsync before returning).
void append_journal(const std::string& path, const std::string& fingerprint, const JournalEntry& entry);

/// Where a point's record lies in its journal line: bytes [offset, offset + length) of the file are its compact JSON.
struct JournalSpan {
    int64_t offset = 0;
    int64_t length = 0;  // 0: not in the journal
};

/// The journal of a running sweep, open for its whole run (one writer per journal: JournalLock). The contract:
/// - each finished point is written (write(2), one line) before the next point starts, so a killed sweep, SIGKILL
///   included, loses at most the point that was running: what was written is in the kernel's page cache;
/// - the file is fsynced once kSyncIntervalS has passed since the last sync, at the next point's end, and when the
///   writer closes, so a machine that crashes or loses power loses at most the points of the last kSyncIntervalS
///   (and the running one). An fsync per point cost 2.6 ms on this project's disks, more than a sim point;
/// - a failed write or fsync is a ConfigError naming the journal (the sweep stops), never a point taken as written.
class JournalWriter {
public:
    static constexpr double kSyncIntervalS = 0.1;
    JournalWriter(std::string path, std::string fingerprint);
    ~JournalWriter();  // syncs and closes; errors there are only reported by close()
    JournalWriter(const JournalWriter&) = delete;
    JournalWriter& operator=(const JournalWriter&) = delete;
    /// Appends one finished point; returns where its record lies in the file.
    JournalSpan append(const JournalEntry& entry);
    /// The same with the record already written as compact JSON (`record_text`, from json::dump()).
    JournalSpan append(const std::string& key, const json& point, const json& inputs, const std::string& record_text);
    /// fsync now (ConfigError on failure).
    void sync();
    /// sync and close (ConfigError on failure); the destructor then does nothing.
    void close();

private:
    std::string path_, fingerprint_;
    int fd_ = -1;
    int64_t size_ = 0;    // the file's length: where the next line starts
    bool dirty_ = false;  // written since the last sync
    double last_sync_s_ = 0;
};

/// The record text at `span` of the journal at `path` (what JournalWriter::append wrote).
std::string read_journal_span(const std::string& path, const JournalSpan& span);

/// Current UTC time as "2026-12-01T05:00:00Z".
std::string utc_now_iso();

}  // namespace moebench
