// SPDX-License-Identifier: Apache-2.0
// Flags over config values: a flag replaces a config field only when the user gave it on the command line
// (shared by `run` and `sweep`, so both treat an absent flag the same way).
#pragma once
#include <CLI/CLI.hpp>

namespace moebench::cli {

/// Sets `field` from `value` only when `opt` appeared on the command line.
template <typename T, typename U>
void override_if(const CLI::Option* opt, T& field, const U& value) {
    if (opt->count() > 0) field = static_cast<T>(value);
}

}  // namespace moebench::cli
