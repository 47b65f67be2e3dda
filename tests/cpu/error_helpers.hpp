// SPDX-License-Identifier: Apache-2.0
// Catching the ConfigError a bad input must raise, so that tests can check what its message names.
#pragma once
#include "common/error.hpp"

#include <functional>
#include <string>

namespace moebench::test {

/// The message of the ConfigError that `f` throws; "" when it throws none (any other exception propagates).
inline std::string config_error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "";
}

}  // namespace moebench::test
