// SPDX-License-Identifier: Apache-2.0
#include "common/json_util.hpp"

#include "common/error.hpp"
#include "common/read_file.hpp"

#include <cmath>
#include <fstream>
#include <sstream>

namespace moebench {

json load_json_file(const std::string& path) {
    const std::string text = read_file_bytes(path);
    try {
        return json::parse(text);
    } catch (const json::exception& e) {  // parse_error, and out_of_range 406 for a number like 1e400
        config_error(path, "is not valid JSON", e.what(), "fix the JSON syntax");
    }
}

void input_shape_error(const std::string& what, const std::string& detail) {
    config_error(what, "a field has an unexpected type or is missing", detail,
                 "pass a report written by moebench run or sweep, unedited (if it was, this is a bug: please report it)");
}

std::string json_brief(const json& v) {
    // replace: a string holding invalid UTF-8 (a corrupt input) must not make the error message itself throw.
    std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
    if (s.size() > 60) s = s.substr(0, 57) + "...";
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
double JsonReader::opt_double(const std::string& key, double dflt) const {
    return has(key) ? req_double(key) : dflt;
}
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
