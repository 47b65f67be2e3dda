// SPDX-License-Identifier: Apache-2.0
// `--set FIELD=VALUE`: any run config field from the command line, on run as on sweep. One parser (the field named,
// a near miss answered with "did you mean", the value read as a config file's), and one rule for a field given twice
// (by a flag and a --set, or by two --set): refused naming both, since one of them would be dropped without a word.
#pragma once
#include "common/json_util.hpp"

#include <map>
#include <string>
#include <vector>

namespace moebench::cli {

/// One `--set FIELD=VALUE` as given.
struct SetFlag {
    std::string field;         // the run config field (a key of docs/run-schema.md)
    std::string text;          // VALUE as typed
    std::string as_written;    // "--set batch=8"
    std::vector<json> values;  // VALUE read as a sweep axis: one value, or a list or range's (1,2,4; 1..64)
};

/// Parses each `FIELD=VALUE`: ConfigError naming --set, the value and the fix when it is no FIELD=VALUE or FIELD
/// is no run config field.
std::vector<SetFlag> parse_set_flags(const std::vector<std::string>& sets);

/// One value of --set as JSON, read as a config file's: a number, true/false or a "quoted" string when it parses as
/// JSON, else the text itself (hot:4:0.6).
json set_value(const std::string& text);

/// Which flag set each run config field on this command line.
class FieldClaims {
public:
    /// Records that `as_written` ("--set batch=8", "--batch 4") sets `field`; ConfigError naming `flag` and the
    /// earlier one when another flag already set it (`fix` says how to give it once).
    void claim(const std::string& field, const std::string& flag, const std::string& as_written,
               const std::string& fix);
    bool claimed(const std::string& field) const { return by_field_.count(field) > 0; }

private:
    std::map<std::string, std::string> by_field_;  // field -> the flag that set it, as written
};

}  // namespace moebench::cli
