// SPDX-License-Identifier: Apache-2.0
// The compact terminal summary of a report: per-phase latency and share, step, tokens/s, expert load.
#pragma once
#include "common/json_util.hpp"

#include <string>

namespace moebench {

/// One run record (an element of the report's runs[]) as a few lines of text for a terminal.
std::string console_summary(const json& run);

}  // namespace moebench
