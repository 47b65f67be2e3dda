// SPDX-License-Identifier: Apache-2.0
// Reading an input file whole, with a ConfigError (exit 2) naming the path when it is missing, a folder, a device,
// a pipe, a link loop, unreadable or larger than its kind of input can be.
#pragma once
#include <cstdint>
#include <string>

namespace moebench {

/// Size caps, checked before a byte is read (a 20 GB file given as a config must be refused at once).
inline constexpr int64_t kMaxConfigBytes = int64_t{64} << 20;  // model, hardware, run and sweep configs (JSON)
inline constexpr int64_t kMaxReportBytes = int64_t{1} << 30;   // reports and sweep journals read back

/// ConfigError unless `path` names an existing regular file that can be opened for reading. The message says what
/// the path really is: missing, a folder, a character or block device, a FIFO, a socket, a symbolic-link loop or a
/// dangling link, or not readable (permission denied). `field` names the option in the message ("--model", the path
/// then follows as the value); empty: the path itself leads the message.
void require_readable_file(const std::string& path, const std::string& field = "");

/// True when something (anything, even a dangling link) is at `path`, or the path cannot be checked (permission,
/// link loop): then require_readable_file has a precise message for it, better than "file not found".
bool path_is_occupied(const std::string& path);

/// The size of the regular file at `path` (after require_readable_file's checks).
int64_t file_size_bytes(const std::string& path);

/// ConfigError naming `what` ("a JSON config") and the cap when the file at `path` is larger than `max_bytes`.
void require_size_at_most(const std::string& path, int64_t max_bytes, const std::string& what);

/// The whole file as bytes (binary), after require_readable_file's checks; a file larger than `max_bytes` is a
/// ConfigError naming `what` ("a JSON config") and the cap, raised before reading. A read error is a ConfigError too.
std::string read_file_bytes(const std::string& path, int64_t max_bytes = kMaxReportBytes,
                            const std::string& what = "an input file");

/// The first `n` bytes of the file (fewer when it is shorter), after require_readable_file's checks: to tell what a
/// file is before reading it whole.
std::string peek_file_bytes(const std::string& path, size_t n);

/// "12.3 MiB": a byte count for messages.
std::string human_bytes_iec(double bytes);

}  // namespace moebench
