// SPDX-License-Identifier: Apache-2.0
// Sweep axes: value-list parsing, canonical order, cartesian expansion and applying a point to a run config.
#include "sweep/axes.hpp"

#include "common/error.hpp"
#include "config/run_fields.hpp"
#include "harness/validate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

namespace moebench {

namespace {

// Canonical position of an axis; batch is last so that each throughput-vs-batch series is contiguous.
int axis_rank(const std::string& name) {
    static const std::vector<std::string> order = {"model",           "backend",   "mode",   "routing", "ep",
                                                   "capacity_factor", "soft_topn", "layers", "context", "seq_len"};
    for (size_t i = 0; i < order.size(); ++i)
        if (order[i] == name) return static_cast<int>(i);
    if (name == "batch") return 1000;
    return 100;  // unknown names sit between seq_len and batch, alphabetically
}

bool less_axis(const std::string& a, const std::string& b) {
    int ra = axis_rank(a), rb = axis_rank(b);
    return ra != rb ? ra < rb : a < b;
}

std::string trim(const std::string& s) {
    size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
    return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

bool parse_number(const std::string& s, double* out) {
    if (s.empty()) return false;
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size() || !std::isfinite(v)) return false;
    *out = v;
    return true;
}

json number_json(double v) {
    if (std::floor(v) == v && std::fabs(v) < 9e15) return json(static_cast<int64_t>(v));
    return json(v);
}

// Normalises a scalar: whole doubles become integers so "8" and 8.0 are the same point.
json normalize(const json& v) {
    if (v.is_number_float()) return number_json(v.get<double>());
    return v;
}

void parse_range(const std::string& tok, const std::string& field, std::vector<json>* out) {
    size_t dots = tok.find("..");
    std::string lo_s = tok.substr(0, dots), rest = tok.substr(dots + 2), step_s;
    size_t colon = rest.find(':');
    if (colon != std::string::npos) {
        step_s = rest.substr(colon + 1);
        rest = rest.substr(0, colon);
    }
    double lo = 0, hi = 0;
    const std::string fix =
        "write a..b (powers of two), a..b:xF (factor F) or a..b:+S (step S), e.g. 1..1024 or 0..4096:+1024";
    if (!parse_number(lo_s, &lo) || !parse_number(rest, &hi)) config_error(field, "malformed range", tok, fix);
    if (hi < lo) config_error(field, "range end is below its start", tok, "write the smaller bound first");
    bool geometric = true;
    double step = 2;
    if (!step_s.empty()) {
        if (step_s[0] == 'x' || step_s[0] == '*') {
            if (!parse_number(step_s.substr(1), &step) || step <= 1)
                config_error(field, "range factor must be > 1", tok, fix);
        } else if (step_s[0] == '+') {
            geometric = false;
            if (!parse_number(step_s.substr(1), &step) || step <= 0)
                config_error(field, "range step must be > 0", tok, fix);
        } else {
            config_error(field, "unknown range step", tok, fix);
        }
    }
    if (geometric && lo <= 0)
        config_error(field, "a geometric range must start above 0", tok, "start at 1, or use a..b:+S");
    const size_t kMaxValues = 100000;
    for (double v = lo; v <= hi * (1 + 1e-12); v = geometric ? v * step : v + step) {
        out->push_back(number_json(v));
        if (out->size() > kMaxValues) config_error(field, "range has too many values", tok, "use a larger step");
    }
}

}  // namespace

std::vector<json> parse_axis_values(const std::string& text, const std::string& field) {
    std::vector<json> values;
    size_t start = 0;
    while (start <= text.size()) {
        size_t comma = text.find(',', start);
        std::string tok = trim(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (tok.empty())
            config_error(field, "empty value in list", text, "write values separated by commas, e.g. 1,2,4");
        double v = 0;
        size_t dots = tok.find("..");
        if (parse_number(tok, &v)) {
            values.push_back(number_json(v));
        } else if (dots != std::string::npos && dots > 0 && parse_number(tok.substr(0, dots), &v)) {
            parse_range(tok, field, &values);
        } else if (tok == "true" || tok == "false") {
            values.push_back(json(tok == "true"));
        } else {
            values.push_back(json(tok));
        }
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return values;
}

std::string range_meant(const std::string& text) {
    const size_t dash = text.find('-', 1);  // a leading '-' is a sign
    double lo = 0, hi = 0;
    if (dash == std::string::npos || !parse_number(text.substr(0, dash), &lo) ||
        !parse_number(text.substr(dash + 1), &hi) || text[dash + 1] == '-')
        return "";
    return text.substr(0, dash) + ".." + text.substr(dash + 1);
}

void check_axis_types(const SweepAxis& axis, const std::string& field) {
    const RunField* f = find_run_field(axis.name);
    if (!f || (run_field_type(*f) != RunFieldType::whole && run_field_type(*f) != RunFieldType::decimal)) return;
    for (const json& v : axis.values) {
        if (!v.is_string()) continue;  // numbers (a fraction for a whole field is the config reader's to name)
        const std::string text = v.get<std::string>(), meant = range_meant(text);
        config_error(field, std::string("takes numbers: ") + kAxisSyntax, text,
                     meant.empty() ? "write " + axis.name + " as numbers"
                                   : "write " + meant + " (powers of two) or " + meant + ":+1 (every value)");
    }
}

std::vector<json> axis_values_from_json(const json& v, const std::string& field) {
    std::vector<json> values;
    if (v.is_array()) {
        if (v.empty()) config_error(field, "axis has no values", "[]", "give at least one value");
        for (const auto& x : v) {
            if (x.is_string()) {
                for (auto& y : parse_axis_values(x.get<std::string>(), field)) values.push_back(y);
            } else if (x.is_number() || x.is_boolean()) {
                values.push_back(normalize(x));
            } else {
                config_error(field, "axis values must be numbers, strings or booleans", json_brief(x), "");
            }
        }
    } else if (v.is_string()) {
        values = parse_axis_values(v.get<std::string>(), field);
    } else if (v.is_number() || v.is_boolean()) {
        values.push_back(normalize(v));
    } else {
        config_error(field, "must be a list of values or a string such as \"1..1024\"", json_brief(v), "");
    }
    return values;
}

std::vector<SweepAxis> canonical_axes(const std::vector<SweepAxis>& axes) {
    std::map<std::string, SweepAxis> by_name;
    for (const auto& a : axes) by_name[a.name] = a;  // later wins
    std::vector<SweepAxis> out;
    for (auto& [name, a] : by_name) out.push_back(a);
    std::stable_sort(out.begin(), out.end(),
                     [](const SweepAxis& x, const SweepAxis& y) { return less_axis(x.name, y.name); });
    return out;
}

std::vector<json> expand_axes(const std::vector<SweepAxis>& axes) {
    std::vector<json> points{json::object()};
    for (const auto& axis : axes) {
        std::vector<json> uniq;
        std::set<std::string> seen;  // by dump: a linear search made a 100000-value axis quadratic
        for (const auto& v : axis.values) {
            json n = normalize(v);
            if (seen.insert(n.dump()).second) uniq.push_back(n);
        }
        if (uniq.empty()) config_error("axes." + axis.name, "axis has no values", "", "give at least one value");
        // Checked before building the product, so a huge grid is a clear error and not an allocation failure.
        const size_t kMaxPoints = 100000;
        if (points.size() * uniq.size() > kMaxPoints)
            config_error("axes." + axis.name, fmt::format("makes the sweep larger than {} points", kMaxPoints),
                         fmt::format("{} points x {} values", points.size(), uniq.size()),
                         "use fewer values per axis (a larger step or factor)");
        std::vector<json> next;
        next.reserve(points.size() * uniq.size());
        for (const auto& p : points)
            for (const auto& v : uniq) {
                json q = p;
                q[axis.name] = v;
                next.push_back(std::move(q));
            }
        points = std::move(next);
    }
    return points;
}

std::string point_key(const json& point) {
    json n = json::object();
    for (const auto& [k, v] : point.items()) n[k] = normalize(v);
    return n.dump();
}

RunConfig apply_point(const json& base, const json& point) {
    json j = base;
    // An unknown axis name is caught by run_config_from_json, which lists the known fields.
    for (const auto& [k, v] : point.items()) j[k] = v;
    RunConfig cfg;
    try {
        cfg = run_config_from_json(j, "");
        validate_run(cfg);
    } catch (const ConfigError& e) {
        throw ConfigError(std::string("sweep point ") + point_label(point) + ": " + e.what());
    }
    return cfg;
}

std::string point_label(const json& point) {
    std::vector<std::string> names;
    for (const auto& [k, v] : point.items()) names.push_back(k);
    std::stable_sort(names.begin(), names.end(), less_axis);
    std::string s;
    for (const auto& n : names) {
        const json& v = point.at(n);
        s += (s.empty() ? "" : " ") + n + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
    }
    return s.empty() ? "(single point)" : s;
}

}  // namespace moebench
