// SPDX-License-Identifier: Apache-2.0
// Whole-or-nothing file writes: write to a temporary file in the same folder, fsync, then rename. A symbolic link
// is followed to its target; a device or named pipe (e.g. /dev/null) is written into directly, never replaced.
#pragma once
#include <functional>
#include <string>
#include <string_view>

namespace moebench {

/// Writes `content` to `path` atomically; creates parent folders. Throws ConfigError naming the path on failure.
/// `path` "-" writes to stdout. Removes the `<path>.tmp.<pid>` files of earlier writes whose process is gone (killed
/// mid-write).
void write_file_atomic(const std::string& path, const std::string& content);

/// The same for content made piece by piece: `produce` calls its argument with each piece, in order (a sweep report of
/// thousands of points is never held whole in memory).
using EmitText = std::function<void(std::string_view)>;
void write_file_atomic_pieces(const std::string& path, const std::function<void(const EmitText&)>& produce);

/// Before a long run: ConfigError now, not after the run, when `path` ("-" and "" pass) is a folder or its
/// folder cannot be created or written. Leaves nothing behind: folders it had to create to find out are removed
/// again (write_file_atomic makes them when the output is written).
void check_output_path(const std::string& path);

/// Appends one line (a '\n' is added) and fsyncs, so a killed process loses no finished line.
void append_line_durable(const std::string& path, const std::string& line);

}  // namespace moebench
