// SPDX-License-Identifier: Apache-2.0
#include "common/json_util.hpp"

#include "common/error.hpp"
#include "common/host_memory.hpp"
#include "common/read_file.hpp"
#include "common/tensor_file.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace moebench {

int json_nesting_depth(std::string_view text, int limit) {
    int depth = 0, deepest = 0;
    bool in_string = false, escaped = false;
    for (const char c : text) {
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            deepest = std::max(deepest, ++depth);
            if (deepest > limit) return deepest;
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
    return deepest;
}

json parse_json_text(const std::string& text, const std::string& what) {
    if (json_nesting_depth(text) > kMaxJsonDepth)
        config_error(what, fmt::format("nesting too deep: more than {} levels of [ and {{", kMaxJsonDepth), "",
                     "moebench's inputs nest a few levels deep; check that this is the right file");
    // A key given twice in one object: nlohmann keeps the last silently ({"batch": 8, "batch": 0} ran batch 0).
    // Checked on inputs of config size; larger documents are reports moebench wrote.
    std::vector<std::set<std::string>> keys_seen;
    const json::parser_callback_t no_duplicates = [&](int, json::parse_event_t event, json& parsed) {
        if (event == json::parse_event_t::object_start)
            keys_seen.emplace_back();
        else if (event == json::parse_event_t::object_end && !keys_seen.empty())
            keys_seen.pop_back();
        else if (event == json::parse_event_t::key && !keys_seen.empty() &&
                 !keys_seen.back().insert(parsed.get<std::string>()).second)
            config_error(what, "gives a key twice in one object (the last would silently win)",
                         parsed.get<std::string>(), "keep one of them");
        return true;
    };
    try {
        if (static_cast<int64_t>(text.size()) <= kMaxConfigBytes) return json::parse(text, no_duplicates);
        return json::parse(text);
    } catch (const json::exception& e) {  // parse_error, and out_of_range 406 for a number like 1e400
        config_error(what, "is not valid JSON", e.what(), "fix the JSON syntax");
    }
}

std::optional<json> parse_json_line(const std::string& line, const std::string& where, const std::string& fix) {
    if (json_nesting_depth(line) > kMaxJsonDepth)
        config_error(where, "is nested too deeply for a line of JSON",
                     fmt::format("more than {} levels", kMaxJsonDepth), fix);
    try {
        return json::parse(line);
    } catch (const json::exception&) {  // parse_error, and out_of_range 406 for a number like 1e400
        return std::nullopt;
    }
}

json load_json_file(const std::string& path, int64_t max_bytes) {
    // What the file is, from its first bytes, before reading it whole (a weight file can be hundreds of GB).
    const std::string head = peek_file_bytes(path, 16);
    const int64_t size_bytes = file_size_bytes(path);
    if (looks_like_safetensors(head, size_bytes))
        config_error(path, "is a safetensors file (model weights or a routing trace), not JSON", "",
                     "give the JSON file instead: for a model, the config.json next to its *.safetensors weights");
    const std::string what = max_bytes <= kMaxConfigBytes ? "a JSON config" : "a JSON input";
    require_size_at_most(path, max_bytes, what);
    if (head.find('\0') != std::string::npos)
        config_error(path, "is a binary file, not JSON", head.substr(0, 8), "give a JSON file");
    // A parsed document takes several times its text in memory: refuse what this host cannot hold.
    const int64_t avail_bytes = mem_available_bytes();
    if (avail_bytes > 0 && 8.0 * static_cast<double>(size_bytes) > static_cast<double>(avail_bytes))
        config_error(path,
                     fmt::format("is {} of JSON; parsing it needs about {}, more than the {} available",
                                 human_bytes_iec(double(size_bytes)), human_bytes_iec(8.0 * double(size_bytes)),
                                 human_bytes_iec(double(avail_bytes))),
                     "", "free memory or use a smaller file");
    const std::string text = read_file_bytes(path, max_bytes, what);
    return parse_json_text(text, path);
}

void input_shape_error(const std::string& what, const std::string& detail) {
    config_error(
        what, "a field has an unexpected type or is missing", detail,
        "pass a report written by moebench run or sweep, unedited (if it was, this is a bug: please report it)");
}

namespace {

constexpr size_t kBriefChars = 60;
constexpr int kBriefDepth = 4;

// Appends at most about `budget` characters of `v`, descending at most kBriefDepth levels: a value nested 100000
// deep (or a string of gigabytes) must not make the error message itself recurse or copy it all.
void brief_into(const json& v, std::string& out, size_t budget, int depth) {
    const auto dump = [](const json& x) { return x.dump(-1, ' ', false, json::error_handler_t::replace); };
    if (v.is_string()) {
        const auto& s = v.get_ref<const std::string&>();
        out += dump(json(s.size() > budget ? s.substr(0, budget) : s));
        return;
    }
    if (!v.is_structured()) {
        out += dump(v);
        return;
    }
    const bool array = v.is_array();
    if (depth >= kBriefDepth && !v.empty()) {
        out += array ? "[...]" : "{...}";
        return;
    }
    out += array ? '[' : '{';
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
        if (out.size() > budget) {
            out += ",...";
            break;
        }
        if (!first) out += ',';
        first = false;
        if (!array) out += dump(json(it.key().size() > budget ? it.key().substr(0, budget) : it.key())) + ":";
        brief_into(*it, out, budget, depth + 1);
    }
    out += array ? ']' : '}';
}

}  // namespace

std::string json_brief(const json& v) {
    std::string s;
    brief_into(v, s, kBriefChars, 0);
    if (s.size() > kBriefChars) s = s.substr(0, kBriefChars - 3) + "...";
    return s;
}

JsonReader::JsonReader(const json& j, std::string path) : j_(j), path_(std::move(path)) {
    if (!j_.is_object()) config_error(path_.empty() ? "<root>" : path_, "must be a JSON object", json_brief(j_), "");
}

std::string JsonReader::field(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

bool JsonReader::has(const std::string& key) const { return j_.contains(key) && !j_.at(key).is_null(); }

const json& JsonReader::at(const std::string& key) const {
    if (!has(key)) config_error(field(key), "required field is missing", "", "add it to the config");
    return j_.at(key);
}

static int64_t as_int(const json& v, const std::string& field) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        config_error(field, "is out of range (whole numbers up to 9223372036854775807)", json_brief(v),
                     "use a smaller value");  // get<int64_t> would wrap it to a negative number
    if (v.is_number_integer() || v.is_number_unsigned()) return v.get<int64_t>();
    if (v.is_number_float()) {
        double d = v.get<double>();
        if (std::floor(d) == d && std::fabs(d) < 9e18) return static_cast<int64_t>(d);
    }
    config_error(field, "must be an integer", json_brief(v), "write a whole number");
}

int64_t JsonReader::req_int(const std::string& key) const { return as_int(at(key), field(key)); }
int64_t JsonReader::opt_int(const std::string& key, int64_t dflt) const {
    return has(key) ? as_int(j_.at(key), field(key)) : dflt;
}
int64_t JsonReader::req_positive(const std::string& key) const {
    int64_t v = req_int(key);
    if (v <= 0) config_error(field(key), "must be positive", std::to_string(v), "use a value >= 1");
    return v;
}
int64_t JsonReader::opt_nonneg(const std::string& key, int64_t dflt) const {
    int64_t v = opt_int(key, dflt);
    if (v < 0) config_error(field(key), "must not be negative", std::to_string(v), "use a value >= 0");
    return v;
}
double JsonReader::req_double(const std::string& key) const {
    const json& v = at(key);
    if (!v.is_number()) config_error(field(key), "must be a number", json_brief(v), "");
    return v.get<double>();
}
double JsonReader::opt_double(const std::string& key, double dflt) const { return has(key) ? req_double(key) : dflt; }
bool JsonReader::opt_bool(const std::string& key, bool dflt) const {
    if (!has(key)) return dflt;
    const json& v = j_.at(key);
    if (!v.is_boolean()) config_error(field(key), "must be true or false", json_brief(v), "");
    return v.get<bool>();
}
std::string JsonReader::req_string(const std::string& key) const {
    const json& v = at(key);
    if (!v.is_string()) config_error(field(key), "must be a string", json_brief(v), "");
    return v.get<std::string>();
}
std::string JsonReader::opt_string(const std::string& key, const std::string& dflt) const {
    return has(key) ? req_string(key) : dflt;
}
JsonReader JsonReader::child(const std::string& key) const {
    const json& v = at(key);
    if (!v.is_object()) config_error(field(key), "must be a JSON object", json_brief(v), "");
    return JsonReader(v, field(key));
}
std::optional<JsonReader> JsonReader::opt_child(const std::string& key) const {
    if (!has(key)) return std::nullopt;
    return child(key);
}

}  // namespace moebench
