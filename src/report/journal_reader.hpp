// SPDX-License-Identifier: Apache-2.0
// The one reader of sweep journals (JSON Lines, one finished point a line), shared by `sweep --resume`
// (sweep/journal.cpp), `report` and `compare` (report_reader.cpp), so that every reader refuses the same things:
// a line that is not a journal line, a file that joins the journals of two sweeps (mixed fingerprints), a point
// recorded twice. A torn last line (the process died inside the write) is not an error.
#pragma once
#include "common/json_util.hpp"

#include <string>
#include <vector>

namespace moebench {

inline constexpr const char* kJournalSchema = "moebench.sweep-journal/1";

/// One line: {"journal": kJournalSchema, "fingerprint", "key", "point", "inputs", "finished_utc", "record"}.
struct JournalLine {
    size_t line_no = 0;       // 1-based, for messages
    std::string key;          // the point's identity (point_key of its axes)
    std::string fingerprint;  // the sweep's fixed part (sweep_fingerprint)
    json point;               // the sweep axes of this point
    json record;              // the runs[] record (status ok | skipped | failed)
    json inputs;              // content hashes of the files the point read (an object; {} when the line has none)
};

struct JournalText {
    std::vector<JournalLine> lines;  // in file order, each key once
    size_t kept_bytes = 0;           // length of the text up to the end of the last line kept (no torn tail)
    bool torn = false;               // a last line cut short was dropped, or the last line lacks its '\n'
    bool missing_newline = false;    // the last line kept lacks its '\n' (kept_bytes ends on it)
};

/// Checks a journal's text (`path` names it in messages: "j.jsonl:3: ..."). ConfigError (exit 2) for a line that is not
/// a journal line; for a line whose fingerprint differs from the first line's (the file joins two sweeps' journals);
/// for a key recorded again (a point measured twice, or a journal appended to itself). An incomplete last line (no
/// '\n') that does not parse is the tail of a write cut short: dropped, `torn`.
JournalText parse_journal(const std::string& text, const std::string& path);

/// parse_journal of the file at `path`, read whole by the one file reader (its checks: folder, device, size).
JournalText read_journal(const std::string& path);

/// The moebench.report/1 document (not yet checked) whose runs[] are the journal's records in order.
json report_of_journal(const JournalText& journal, const std::string& path);

}  // namespace moebench
