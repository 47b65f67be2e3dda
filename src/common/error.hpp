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

/// Throws ConfigError("<field>: <what> (got <value>); <fix>").
[[noreturn]] inline void config_error(const std::string& field, const std::string& what,
                                      const std::string& value, const std::string& fix) {
    std::string msg = field + ": " + what;
    if (!value.empty()) msg += " (got " + value + ")";
    if (!fix.empty()) msg += "; " + fix;
    throw ConfigError(msg);
}

}  // namespace moebench

/// Internal invariant; throws moebench::Error with file:line. Not for user input (use config_error).
#define MOEBENCH_CHECK(cond, ...)                                                              \
    do {                                                                                       \
        if (!(cond))                                                                           \
            throw ::moebench::Error(fmt::format("{}:{}: ", __FILE__, __LINE__) +               \
                                    fmt::format(__VA_ARGS__));                                 \
    } while (false)
