// SPDX-License-Identifier: Apache-2.0
// What every document moebench writes says about where it came from: the tool, the command line, the time and the
// machine. Below every layer that assembles a document (harness: bench documents; report: run reports; plan).
#pragma once
#include "common/json_util.hpp"

#include <string>

namespace moebench {

/// This process's command line as the user typed it (argv joined, shell-quoted where needed), from /proc/self/cmdline.
/// `fallback` is returned where that file cannot be read.
std::string current_command_line(const std::string& fallback = "moebench");

/// Now, as "2026-12-01T05:00:00Z" (`compact` false) or "20261201T050000Z" (`compact` true, for file names).
std::string utc_now(bool compact);

/// {"name": "moebench", "version", "git_rev"}: the build that wrote a document.
json tool_block();

/// A document's context: {"tool": tool_block() and build_type, "command", "created_utc", "environment"}.
json document_context(const std::string& command_line);

}  // namespace moebench
