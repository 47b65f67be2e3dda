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
    std::string key;              // point_key(point)
    json point;                   // the sweep axes of this point
    json record;                  // the runs[] record (status ok | skipped | failed)
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
    std::string fingerprint;                     // plan_sweep's
    std::map<std::string, json> inputs_by_key;   // each point of the expansion: InputDigests::of its config
};

/// Reads a journal (parse_journal's checks). A missing or empty file gives no entries. A torn last line (the process
/// died inside the write) is cut off in place (the file keeps its identity, and so the sweep's lock) and
/// *repaired = true. A line of another sweep (fingerprint) -> ConfigError naming the fix; a point whose recorded
/// inputs differ from what it would read now -> ConfigError naming the file that changed.
std::vector<JournalEntry> load_journal(const std::string& path, const JournalExpectation& want, bool* repaired);
std::vector<JournalEntry> load_journal(const std::string& path, const std::string& fingerprint, bool* repaired);

/// Appends one finished point (durable: fsync before returning).
void append_journal(const std::string& path, const std::string& fingerprint, const JournalEntry& entry);

/// Current UTC time as "2026-12-01T05:00:00Z".
std::string utc_now_iso();

}  // namespace moebench
