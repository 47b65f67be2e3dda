// SPDX-License-Identifier: Apache-2.0
// Point matching for compare: keys, contrast, uniqueness, and the message that says why nothing matched.
#include "compare/point_match.hpp"

#include "common/error.hpp"
#include "common/flag_names.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace moebench {

namespace {

// The model, the hardware, then every axis name of either report (alphabetical).
std::vector<std::string> candidate_keys(const ReadReport& a, const ReadReport& b) {
    std::set<std::string> axes;
    for (const ReadReport* r : {&a, &b})
        for (const auto& run : r->runs)
            for (const auto& [k, v] : run.axes.items()) axes.insert(k);
    axes.erase("model");
    axes.erase("hardware");
    std::vector<std::string> out = {"model", "hardware"};
    out.insert(out.end(), axes.begin(), axes.end());
    return out;
}

// The distinct values of one key over a report's points, as canonical JSON text.
std::set<std::string> values_of(const ReadReport& r, const std::string& key) {
    std::set<std::string> out;
    for (const auto& run : r.runs) out.insert(run_key_value(r, run, key).dump());
    return out;
}

std::string join(const std::vector<std::string>& items, const std::string& sep = ", ") {
    std::string s;
    for (const auto& i : items) s += (s.empty() ? "" : sep) + i;
    return s;
}

// "cpu" or "1, 2, 4, 8, ... (7 values)": a key's values in one report, numbers in numeric order, for a message.
std::string values_text(const std::set<std::string>& dumps) {
    std::vector<json> values;
    for (const auto& d : dumps) values.push_back(json::parse(d));
    std::stable_sort(values.begin(), values.end(), [](const json& x, const json& y) {
        if (x.is_number() && y.is_number()) return x.get<double>() < y.get<double>();
        return x.is_number() && !y.is_number();
    });
    std::vector<std::string> shown;
    for (const auto& v : values) {
        if (shown.size() == 4) {
            shown.push_back(fmt::format("... ({} values)", values.size()));
            break;
        }
        shown.push_back(key_text(v));
    }
    return join(shown);
}

std::vector<std::string> choose_keys(const std::vector<std::string>& all, const std::vector<std::string>& match_keys) {
    if (match_keys.empty()) return all;
    std::vector<std::string> keys = {"model"};
    for (const auto& k : match_keys) {
        if (std::find(all.begin(), all.end(), k) == all.end())
            config_error(flag_of("match"), "is not an axis of either report", k,
                         "use axes the reports have: " + join(all));
        if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
    }
    return keys;
}

// Two points of one report under the same keys would make the match depend on their order: refused.
void require_unique(const ReadReport& r, const std::vector<json>& keys, const PointMatch& m,
                    const std::vector<std::string>& all, bool explicit_match) {
    std::map<std::string, size_t> seen;
    for (size_t i = 0; i < keys.size(); ++i) {
        auto [it, fresh] = seen.emplace(keys[i].dump(), i);
        if (fresh) continue;
        std::vector<std::string> differ;
        for (const auto& k : all)
            if (run_key_value(r, r.runs[it->second], k) != run_key_value(r, r.runs[i], k)) differ.push_back(k);
        config_error(fmt::format("{}: runs[{}] and runs[{}]", r.name, it->second, i),
                     "are the same point under the match keys", m.label(keys[i]),
                     explicit_match && !differ.empty()
                         ? "add the axes that tell them apart to " + flag_of("match") + " (" + join(differ) + ")"
                         : "a report holds each point once: remove one of them, or split the report");
    }
}

[[noreturn]] void nothing_matched(const ReadReport& a, const ReadReport& b, const PointMatch& m, bool explicit_match) {
    for (const ReadReport* r : {&a, &b})
        if (r->runs.empty())
            config_error(r->name, "has no points to compare (runs[] is empty)", "",
                         "pass a report with at least one point");
    std::vector<std::string> differ;
    bool model_differs = false;
    for (const auto& k : m.keys) {
        auto va = values_of(a, k), vb = values_of(b, k);
        bool common = std::any_of(va.begin(), va.end(), [&](const std::string& v) { return vb.count(v) > 0; });
        if (common) continue;
        differ.push_back(fmt::format("{} {} (A) vs {} (B)", k, values_text(va), values_text(vb)));
        model_differs = model_differs || k == "model";
    }
    std::string why =
        differ.empty()
            ? "no combination of " + join(std::vector<std::string>(m.shown.begin(), m.shown.end())) + " is in both"
            : "they differ in " + join(differ, "; ");
    std::string fix = model_differs ? "compare reports of the same model: points of different models are never compared"
                      : explicit_match
                          ? "the axes named in " + flag_of("match") +
                                " must take a common value in both reports (the model always matches)"
                          : fmt::format(
                                "compare reports of the same hardware, backend and axes, or name the axes to match "
                                "with {} (e.g. {} batch) to compare across the others",
                                flag_of("match"), flag_of("match"));
    config_error(a.name + " vs " + b.name, "no point of one report matches a point of the other: " + printable(why), "",
                 fix);
}

}  // namespace

std::string PointMatch::label(const json& key) const {
    std::string s;
    for (const auto& [k, v] : key.items()) {
        if (v.is_null() || !shown.count(k)) continue;
        s += (s.empty() ? "" : " ") + k + "=" + key_text(v);
    }
    return s.empty() ? "(single point)" : s;
}

PointMatch match_points(const ReadReport& a, const ReadReport& b, const std::vector<std::string>& match_keys) {
    PointMatch m;
    m.all_keys = candidate_keys(a, b);
    const std::vector<std::string>& all = m.all_keys;
    m.keys = choose_keys(all, match_keys);
    for (const auto& k : all) {
        auto va = values_of(a, k), vb = values_of(b, k);
        bool is_key = std::find(m.keys.begin(), m.keys.end(), k) != m.keys.end();
        if (is_key && (va.size() > 1 || vb.size() > 1)) m.shown.insert(k);
        if (!is_key && va.size() == 1 && vb.size() == 1 && va != vb)
            m.contrast[k] = {json::parse(*va.begin()), json::parse(*vb.begin())};
    }
    auto keys_of = [&](const ReadReport& r) {
        std::vector<json> out;
        for (const auto& run : r.runs) {
            json k = json::object();
            for (const auto& name : m.keys) k[name] = run_key_value(r, run, name);
            out.push_back(k);
        }
        return out;
    };
    m.key_a = keys_of(a);
    m.key_b = keys_of(b);
    require_unique(a, m.key_a, m, all, !match_keys.empty());
    require_unique(b, m.key_b, m, all, !match_keys.empty());

    std::map<std::string, size_t> index_b;
    for (size_t j = 0; j < m.key_b.size(); ++j) index_b.emplace(m.key_b[j].dump(), j);
    std::vector<bool> used_b(m.key_b.size(), false);
    for (size_t i = 0; i < m.key_a.size(); ++i) {
        auto it = index_b.find(m.key_a[i].dump());
        if (it == index_b.end()) {
            m.unmatched_a.push_back(i);
            continue;
        }
        used_b[it->second] = true;
        m.pairs.emplace_back(i, it->second);
    }
    for (size_t j = 0; j < used_b.size(); ++j)
        if (!used_b[j]) m.unmatched_b.push_back(j);
    if (m.pairs.empty()) nothing_matched(a, b, m, !match_keys.empty());
    return m;
}

}  // namespace moebench
