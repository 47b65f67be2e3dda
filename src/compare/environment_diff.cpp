// SPDX-License-Identifier: Apache-2.0
// Environment differences of a comparison, as warnings.
#include "compare/environment_diff.hpp"

#include "common/flag_names.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace moebench {

namespace {

struct Field {
    const char* key;   // in ReadReport::environment
    const char* what;  // in words
    bool machine;      // meaningless when both sides are modeled
};

const Field kReportFields[] = {{"tool.git_rev", "git revision", false},     {"tool.version", "moebench version", false},
                               {"tool.build_type", "build type", false},    {"environment.cpu_model", "CPU", true},
                               {"environment.num_cpus", "CPU count", true}, {"environment.blas", "BLAS", true}};

// Run config fields that only steer measuring or output, or that are compared elsewhere (match keys, threads).
const std::set<std::string> kConfigNotCompared = {
    "out",   "json",    "format",   "dump_tensors",     "iters", "warmup", "min_time_s", "max_iters", "max_noise",
    "check", "threads", "hardware", "measure_ceilings", "model", "backend"};

json warning(const std::string& field, const std::string& a, const std::string& b, const std::string& message) {
    return json{{"field", field}, {"a", a}, {"b", b}, {"message", message}};
}

bool all_modeled(const ReadReport& a, const ReadReport& b, const PointMatch& m) {
    return std::all_of(m.pairs.begin(), m.pairs.end(), [&](const auto& p) {
        return a.runs[p.first].timing_source == "modeled" && b.runs[p.second].timing_source == "modeled";
    });
}

void report_fields(const ReadReport& a, const ReadReport& b, bool modeled, json& out) {
    std::vector<std::string> only_a, only_b;  // recorded in one report only
    for (const Field& f : kReportFields) {
        if (f.machine && modeled) continue;
        auto ia = a.environment.find(f.key), ib = b.environment.find(f.key);
        bool in_a = ia != a.environment.end(), in_b = ib != b.environment.end();
        if (in_a != in_b) (in_a ? only_a : only_b).push_back(f.what);
        if (in_a && in_b && ia->second != ib->second)
            out.push_back(warning(f.key, ia->second, ib->second,
                                  fmt::format("{} differs: {} (A) vs {} (B)", f.what, ia->second, ib->second)));
    }
    for (auto [side, missing] : {std::pair{"A", &only_b}, std::pair{"B", &only_a}}) {
        if (missing->empty()) continue;
        std::string list;
        for (const auto& w : *missing) list += (list.empty() ? "" : ", ") + w;
        out.push_back(warning("environment", "", "",
                              fmt::format("{} does not record its {} (a report rebuilt from a sweep journal?): a "
                                          "difference there cannot be seen",
                                          side, list)));
    }
    auto ta = a.environment.find("tool.build_type"), tb = b.environment.find("tool.build_type");
    if (!modeled && ta != a.environment.end() && tb != b.environment.end() && ta->second == "Debug" &&
        tb->second == "Debug")
        out.push_back(warning("tool.build_type", "Debug", "Debug",
                              "both are Debug builds: their timings say little about a Release build"));
}

// Threads and dtype per compared point: one warning per distinct (A, B) pair of values.
void point_fields(const ReadReport& a, const ReadReport& b, const PointMatch& m, json& out) {
    std::map<std::pair<std::string, std::string>, int> threads, dtype;
    int compared = 0;
    for (const auto& [i, j] : m.pairs) {
        const ReadRun &ra = a.runs[i], &rb = b.runs[j];
        if (!ra.ok() || !rb.ok()) continue;
        ++compared;
        if (!ra.threads.empty() && !rb.threads.empty() && ra.threads != rb.threads) ++threads[{ra.threads, rb.threads}];
        if (!ra.dtype.empty() && !rb.dtype.empty() && ra.dtype != rb.dtype) ++dtype[{ra.dtype, rb.dtype}];
    }
    for (auto [field, what, diffs] : {std::tuple{"threads", "thread count", &threads}, {"dtype", "dtype", &dtype}})
        for (const auto& [ab, n] : *diffs)
            out.push_back(warning(field, ab.first, ab.second,
                                  fmt::format("{} differs: {} (A) vs {} (B) at {} of {} compared points", what,
                                              ab.first, ab.second, n, compared)));
}

void config_fields(const ReadReport& a, const ReadReport& b, const PointMatch& m, json& out) {
    const std::string prefix = "config.run.";
    for (const auto& [key, va] : a.environment) {
        if (key.rfind(prefix, 0) != 0) continue;
        std::string field = key.substr(prefix.size());
        if (kConfigNotCompared.count(field) ||
            std::find(m.all_keys.begin(), m.all_keys.end(), field) != m.all_keys.end())
            continue;
        auto ib = b.environment.find(key);
        if (ib == b.environment.end() || ib->second == va) continue;  // a field of another version: not a difference
        out.push_back(warning(key, va, ib->second,
                              fmt::format("run config {} differs: {} (A) vs {} (B)", field, va, ib->second)));
    }
}

}  // namespace

json environment_warnings(const ReadReport& a, const ReadReport& b, const PointMatch& m) {
    json out = json::array();
    for (const auto& [k, v] : m.contrast.items())
        out.push_back(warning(k, key_text(v[0]), key_text(v[1]),
                              fmt::format("{} differs: {} (A) vs {} (B); compared anyway because {} leaves it out", k,
                                          key_text(v[0]), key_text(v[1]), flag_of("match"))));
    const bool modeled = all_modeled(a, b, m);
    report_fields(a, b, modeled, out);
    point_fields(a, b, m, out);
    config_fields(a, b, m, out);
    return out;
}

}  // namespace moebench
