// SPDX-License-Identifier: Apache-2.0
#include "common/document_context.hpp"

#include "build_info.hpp"
#include "common/host_environment.hpp"

#include <ctime>
#include <fstream>
#include <sstream>

#ifndef MOEBENCH_BUILD_TYPE
#define MOEBENCH_BUILD_TYPE "unknown"
#endif

namespace moebench {

static std::string shell_quote(const std::string& arg) {
    if (!arg.empty() &&
        arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") ==
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

json tool_block() { return json{{"name", "moebench"}, {"version", MOEBENCH_VERSION}, {"git_rev", MOEBENCH_GIT_REV}}; }

json document_context(const std::string& command_line) {
    json tool = tool_block();
    tool["build_type"] = MOEBENCH_BUILD_TYPE;
    return json{{"tool", tool},
                {"command", command_line},
                {"created_utc", utc_now(false)},
                {"environment", environment_block()}};
}

}  // namespace moebench
