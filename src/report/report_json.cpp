// SPDX-License-Identifier: Apache-2.0
// Assembles the moebench.report/1 document and the environment block; writes it whole or not at all.
#include "report/report_json.hpp"
#include "core/report_keys.hpp"

#include "build_info.hpp"
#include "common/atomic_file.hpp"
#include "config/model_config.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#ifndef MOEBENCH_BUILD_TYPE
#define MOEBENCH_BUILD_TYPE "unknown"
#endif

namespace moebench {

static std::string shell_quote(const std::string& arg) {
    if (!arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") ==
                            std::string::npos)
        return arg;
    std::string q = "'";
    for (char c : arg) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

std::string current_command_line(const std::string& fallback) {
    std::ifstream in("/proc/self/cmdline", std::ios::binary);
    if (!in) return fallback;
    std::stringstream ss;
    ss << in.rdbuf();
    std::string raw = ss.str(), out, arg;
    bool first = true;
    for (char c : raw) {
        if (c != '\0') {
            arg += c;
            continue;
        }
        if (first) {
            // argv[0] may be a full path to the binary: show its file name.
            auto slash = arg.rfind('/');
            arg = slash == std::string::npos ? arg : arg.substr(slash + 1);
        }
        if (!first) out += ' ';  // (not (first ? "" : " ") + ...: GCC 12 -Wrestrict false positive)
        out += shell_quote(arg);
        first = false;
        arg.clear();
    }
    return out.empty() ? fallback : out;
}

std::string utc_now(bool compact) {
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    ::gmtime_r(&now, &tm);
    char buf[32];
    std::strftime(buf, sizeof(buf), compact ? "%Y%m%dT%H%M%SZ" : "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

std::string default_report_path() {
    // Two runs in the same second must not overwrite each other: the first free name of run-<time>[-N].json.
    const std::string stem = "results/run-" + utc_now(true);
    std::string path = stem + ".json";
    for (int n = 2; std::filesystem::exists(path) && n < 1000; ++n) path = fmt::format("{}-{}.json", stem, n);
    return path;
}

json make_report(const json& context, const json& config, const std::vector<json>& runs) {
    json r = json::object();
    r["schema"] = kReportSchema;
    for (const char* key : {"tool", "command", "created_utc", "environment"})
        if (context.contains(key)) r[key] = context.at(key);
    if (!r.contains("environment")) r["environment"] = environment_block();
    r["environment"]["loadavg_1m_end"] = loadavg_now();
    if (!runs.empty()) {
        const json& first = runs.front();
        if (first.contains("backend")) r["environment"]["backend"] = first.at("backend");
        if (first.contains("backend_note")) r["environment"]["backend_note"] = first.at("backend_note");
        if (first.contains(keys::kBackendInfo) && first.at(keys::kBackendInfo).contains("gpus"))
            r["environment"]["gpus"] = first.at(keys::kBackendInfo).at("gpus");
    }
    r["config"] = config;
    r[keys::kRuns] = runs;
    return r;
}

void write_report(const std::string& path, const json& report) { write_file_atomic(path, report.dump(2) + "\n"); }

json report_context(int /*argc_or_0*/, const std::string& command_line) {
    return json{{"tool", {{"name", "moebench"}, {"version", MOEBENCH_VERSION}, {"git_rev", MOEBENCH_GIT_REV},
                          {"build_type", MOEBENCH_BUILD_TYPE}}},
                {"command", command_line},
                {"created_utc", utc_now(false)},
                {"environment", environment_block()}};
}

json resolved_config(const RunConfig& cfg) {
    return json{{"run", run_config_to_json(cfg)}, {"model", model_to_json(load_model(cfg.model))}};
}

}  // namespace moebench
