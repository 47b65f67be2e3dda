// SPDX-License-Identifier: Apache-2.0
// The sweep journal: one JSON line per finished point, appended and fsynced at once, so a sweep killed at any
// moment (even SIGKILL) loses no finished point and `--resume` can skip what is done.
#pragma once
#include "common/json_util.hpp"

#include <string>
#include <vector>

namespace moebench {

inline constexpr const char* kJournalSchema = "moebench.sweep-journal/1";

/// One journal line: {"journal": kJournalSchema, "fingerprint", "key", "point", "record", "finished_utc"}.
struct JournalEntry {
    std::string key;   // point_key(point)
    json point;        // the sweep axes of this point
    json record;       // the runs[] record (status ok | skipped | failed)
};

/// Identity of the sweep's fixed part (the base run config): FNV-1a 64 of its compact dump, as 16 hex digits.
/// Points are only reused by --resume when the fingerprint matches, so a changed config never mixes results.
std::string sweep_fingerprint(const json& base_run);

/// Reads a journal. A missing file gives no entries. A torn last line (the process died inside the write) is
/// dropped and the file rewritten atomically without it (*repaired = true). A later entry for the same key
/// replaces an earlier one. A line from a sweep with another fingerprint -> ConfigError naming the fix.
std::vector<JournalEntry> load_journal(const std::string& path, const std::string& fingerprint, bool* repaired);

/// Appends one finished point (durable: fsync before returning).
void append_journal(const std::string& path, const std::string& fingerprint, const JournalEntry& entry);

/// Current UTC time as "2026-12-01T05:00:00Z".
std::string utc_now_iso();

}  // namespace moebench
