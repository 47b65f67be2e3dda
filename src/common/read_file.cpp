// SPDX-License-Identifier: Apache-2.0
// Input files are read through here so that a folder, a missing or an unreadable path is a clear error, not an
// empty read or an iostream exception.
#include "common/read_file.hpp"

#include "common/error.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace moebench {

void require_readable_file(const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::file_status st = fs::status(path, ec);
    if (ec || !fs::exists(st)) config_error(path, "file not found", "", "check the path");
    if (fs::is_directory(st)) config_error(path, "is a folder, not a file", "", "give the path of a file inside it");
    if (!fs::is_regular_file(st))
        config_error(path, "is not a regular file", "", "give the path of a file (not a device, pipe or socket)");
    std::ifstream in(path, std::ios::binary);
    if (!in) config_error(path, "cannot open file", std::strerror(errno), "check that it is readable");
}

std::string read_file_bytes(const std::string& path) {
    require_readable_file(path);
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    if (in.bad()) config_error(path, "read error", std::strerror(errno), "check the file and the disk");
    return ss.str();
}

}  // namespace moebench
