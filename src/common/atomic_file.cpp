// SPDX-License-Identifier: Apache-2.0
#include "common/atomic_file.hpp"

#include "common/error.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>

namespace moebench {

// `tmp`: the temporary file to remove on failure, so that a failed write leaves no half file behind.
static void write_all(int fd, const std::string& content, const std::string& path, const std::string& tmp = "") {
    size_t done = 0;
    while (done < content.size()) {
        ssize_t n = ::write(fd, content.data() + done, content.size() - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            const std::string why = std::strerror(errno);
            ::close(fd);
            if (!tmp.empty()) std::remove(tmp.c_str());
            config_error(path, "write failed", why, "check disk space and permissions");
        }
        done += static_cast<size_t>(n);
    }
}

void write_file_atomic(const std::string& path, const std::string& content) {
    if (path == "-") {
        std::cout << content;
        std::cout.flush();
        return;
    }
    namespace fs = std::filesystem;
    fs::path p(path);
    std::error_code ec;
    if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
    if (fs::is_directory(p, ec))
        config_error(path, "is a folder", "", "give a file path for the output, e.g. " + (p / "out.json").string());
    std::string tmp = path + ".tmp." + std::to_string(::getpid());
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) config_error(path, "cannot create output file", std::strerror(errno), "check the folder exists and is writable");
    write_all(fd, content, path, tmp);
    const bool synced = ::fsync(fd) == 0;
    const std::string sync_why = synced ? "" : std::strerror(errno);
    if (::close(fd) != 0 || !synced) {
        const std::string why = synced ? std::strerror(errno) : sync_why;
        std::remove(tmp.c_str());
        config_error(path, "write failed", why, "check disk space and permissions");
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        const std::string why = std::strerror(errno);
        std::remove(tmp.c_str());
        config_error(path, "cannot rename the temporary file into place", why, "check the folder is writable");
    }
}

void check_output_path(const std::string& path) {
    if (path.empty() || path == "-") return;
    namespace fs = std::filesystem;
    fs::path p(path);
    std::error_code ec;
    if (fs::is_directory(p, ec))
        config_error(path, "is a folder", "", "give a file path for the output, e.g. " + (p / "out.json").string());
    const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
    fs::create_directories(dir, ec);
    if (!fs::is_directory(dir, ec))
        config_error(path, "cannot create the output folder", dir.string(),
                     "check the path: every part of it must be a folder you can write to");
    if (::access(dir.c_str(), W_OK) != 0)
        config_error(path, "the output folder is not writable", std::strerror(errno), "choose another --out");
}

void append_line_durable(const std::string& path, const std::string& line) {
    namespace fs = std::filesystem;
    fs::path p(path);
    std::error_code ec;
    if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) config_error(path, "cannot open for appending", std::strerror(errno), "check the folder is writable");
    write_all(fd, line + "\n", path);
    ::fsync(fd);
    ::close(fd);
}

}  // namespace moebench
