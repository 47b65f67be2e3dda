// SPDX-License-Identifier: Apache-2.0
// The error hierarchy: every failure the user can cause is a ConfigError (exit 2) naming field, value and fix.
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace moebench {

/// Base of every moebench error. main() maps the subclass to an exit code.
class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
    virtual int exit_code() const { return 1; }
    /// The word main() prints before the message ("moebench: error: ...").
    virtual const char* label() const { return "error"; }
};

/// The outcome a gate asked about, not a fault: compare found points slower than its threshold. Exit 1.
class Regression : public Error {
public:
    using Error::Error;
    const char* label() const override { return "regression"; }
};

/// Bad input: a config, a flag, a file. Exit 2. The message names the field, the value and the fix.
class ConfigError : public Error {
public:
    using Error::Error;
    int exit_code() const override { return 2; }
};

/// A point the backend cannot run (no device, does not fit). Recorded as skipped in sweeps; exit 2 for a single run.
class UnsupportedError : public Error {
public:
    using Error::Error;
    int exit_code() const override { return 2; }
};

/// A --check mismatch between a backend and the CPU reference. Exit 3.
class CheckFailed : public Error {
public:
    using Error::Error;
    int exit_code() const override { return 3; }
};

/// `s` made safe for a one-line terminal message: control bytes and bytes that are not valid UTF-8 become
/// \xNN (a garbage input file must not echo raw binary into the error), and it is cut after about 400 bytes.
inline std::string printable(const std::string& s) {
    std::string out;
    const auto hex = [&](unsigned char c) {
        static const char* digits = "0123456789abcdef";
        out += "\\x";
        out += digits[c >> 4];
        out += digits[c & 15];
    };
    size_t i = 0;
    while (i < s.size() && out.size() < 400) {
        const auto c = static_cast<unsigned char>(s[i]);
        size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
        bool valid = len > 0 && i + len <= s.size() && !(len == 2 && c < 0xc2);
        for (size_t k = 1; valid && k < len; ++k) valid = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
        if (!valid || c < 0x20 || c == 0x7f) {
            hex(c);
            ++i;
        } else {
            out.append(s, i, len);
            i += len;
        }
    }
    if (i < s.size()) out += "...";
    return out;
}

/// Throws ConfigError("<field>: <what> (got <value>); <fix>"). Field and value pass through printable().
[[noreturn]] inline void config_error(const std::string& field, const std::string& what, const std::string& value,
                                      const std::string& fix) {
    std::string msg = printable(field) + ": " + what;
    if (!value.empty()) msg += " (got " + printable(value) + ")";
    if (!fix.empty()) msg += "; " + fix;
    throw ConfigError(msg);
}

}  // namespace moebench

/// Internal invariant; throws moebench::Error with file:line. Not for user input (use config_error).
#define MOEBENCH_CHECK(cond, ...)                                                                                    \
    do {                                                                                                             \
        if (!(cond)) throw ::moebench::Error(fmt::format("{}:{}: ", __FILE__, __LINE__) + fmt::format(__VA_ARGS__)); \
    } while (false)
