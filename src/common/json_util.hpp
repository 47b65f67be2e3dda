// SPDX-License-Identifier: Apache-2.0
// Typed reads from JSON with errors that name the field path, the value and the fix.
#pragma once
#include <nlohmann/json.hpp>

#include "common/read_file.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace moebench {

using json = nlohmann::json;

/// The deepest nesting of [ and { any input may have. Real configs and reports nest fewer than 10 levels; a deeper
/// document is refused before parsing, because nlohmann::json copies, compares and dumps recursively (100000
/// levels overflowed the stack).
inline constexpr int kMaxJsonDepth = 256;

/// The nesting depth of `text` (brackets outside strings), counting no further than `limit` + 1. No recursion.
int json_nesting_depth(std::string_view text, int limit = kMaxJsonDepth);

/// Parses `text` that came from `what` (a path, "line 3 of FILE"): nesting beyond kMaxJsonDepth or invalid JSON ->
/// ConfigError naming `what`. Every parse of outside input goes through here.
json parse_json_text(const std::string& text, const std::string& what);

/// One line of a JSON-lines file (a sweep journal) read at `where` ("FILE:LINE"): its JSON, or nullopt when it is
/// not valid JSON (the caller decides: a torn last line, or an error). Nesting beyond kMaxJsonDepth is a
/// ConfigError naming `where` with `fix`, never parsed.
std::optional<json> parse_json_line(const std::string& line, const std::string& where, const std::string& fix);

/// Parses a whole file as JSON: require_readable_file's checks, a file larger than `max_bytes` or a binary one (a
/// safetensors weight file given as a config) refused before it is read, then parse_json_text. Configs pass
/// kMaxConfigBytes; the default admits reports and journals.
json load_json_file(const std::string& path, int64_t max_bytes = kMaxReportBytes);

/// The ConfigError of reading_input.
[[noreturn]] void input_shape_error(const std::string& what, const std::string& detail);

/// Runs `f`, which reads a document loaded from `what` (a report, two reports); a JSON type or range error
/// inside it (a field of the wrong type in a hand-edited or foreign file) becomes a ConfigError naming `what`,
/// so a malformed input exits 2 with a message instead of an internal error.
template <class F>
decltype(auto) reading_input(const std::string& what, F&& f) {
    try {
        return f();
    } catch (const json::type_error& e) {
        input_shape_error(what, e.what());
    } catch (const json::out_of_range& e) {
        input_shape_error(what, e.what());
    }
}

/// A view on an object being read, with its dotted path for messages ("model.num_experts").
class JsonReader {
public:
    JsonReader(const json& j, std::string path);

    bool has(const std::string& key) const;  // present and not null
    const json& raw() const { return j_; }
    const std::string& path() const { return path_; }
    std::string field(const std::string& key) const;  // "path.key"

    int64_t req_int(const std::string& key) const;
    int64_t opt_int(const std::string& key, int64_t dflt) const;
    int64_t req_positive(const std::string& key) const;              // > 0
    int64_t opt_nonneg(const std::string& key, int64_t dflt) const;  // >= 0
    double req_double(const std::string& key) const;
    double opt_double(const std::string& key, double dflt) const;
    bool opt_bool(const std::string& key, bool dflt) const;
    std::string req_string(const std::string& key) const;
    std::string opt_string(const std::string& key, const std::string& dflt) const;
    JsonReader child(const std::string& key) const;  // required object
    std::optional<JsonReader> opt_child(const std::string& key) const;

private:
    const json& at(const std::string& key) const;  // required; throws naming the field
    const json& j_;
    std::string path_;
};

/// Short, printable form of a JSON value for error messages (at most about 60 characters, whatever the value's
/// size or depth: it never walks more than a few levels).
std::string json_brief(const json& v);

}  // namespace moebench
