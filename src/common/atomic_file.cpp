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

static void write_all(int fd, const std::string& content, const std::string& path) {
    size_t done = 0;
    while (done < content.size()) {
        ssize_t n = ::write(fd, content.data() + done, content.size() - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            ::close(fd);
            config_error(path, "write failed", std::strerror(errno), "check disk space and permissions");
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
    std::string tmp = path + ".tmp." + std::to_string(::getpid());
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) config_error(path, "cannot create output file", std::strerror(errno), "check the folder exists and is writable");
    write_all(fd, content, path);
    ::fsync(fd);
    ::close(fd);
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        config_error(path, "cannot rename the temporary file into place", std::strerror(errno), "");
    }
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
