// SPDX-License-Identifier: Apache-2.0
// Reading an input file whole, with a ConfigError (exit 2) naming the path when it is missing, a folder or unreadable.
#pragma once
#include <string>

namespace moebench {

/// ConfigError unless `path` names an existing regular file that can be opened for reading.
void require_readable_file(const std::string& path);

/// The whole file as bytes (binary); the checks of require_readable_file, and a read error is a ConfigError too.
std::string read_file_bytes(const std::string& path);

}  // namespace moebench
