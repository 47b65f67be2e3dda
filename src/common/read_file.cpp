// SPDX-License-Identifier: Apache-2.0
// Input files are read through here so that a folder, a device, a pipe, a missing or an unreadable path is a clear
// error, not an empty read, an endless one (/dev/zero), a hang (a FIFO with no writer) or an iostream exception.
#include "common/read_file.hpp"

#include "common/error.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

namespace moebench {

namespace {

struct PathProblem {
    std::string what, fix;
};

// What is wrong with `path` as an input file, from stat/lstat and errno; nullopt for a readable regular file.
std::optional<PathProblem> path_problem(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        const int err = errno;
        struct stat lst {};
        if (err == ENOENT && ::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode))
            return PathProblem{"is a symbolic link to a missing file", "fix the link or give the real file path"};
        switch (err) {
            case ENOENT: return PathProblem{"file not found", "check the path"};
            case ELOOP:
                return PathProblem{"too many levels of symbolic links (the links form a loop)",
                                   "give the real file path"};
            case EACCES:
                return PathProblem{"permission denied: a folder on the path cannot be entered",
                                   "check the folders' permissions, or copy the file somewhere you can read"};
            case ENOTDIR: return PathProblem{"a part of the path is a file, not a folder", "check the path"};
            case ENAMETOOLONG: return PathProblem{"the path is too long", "check the path"};
            default: return PathProblem{std::string("cannot be checked: ") + std::strerror(err), "check the path"};
        }
    }
    if (S_ISDIR(st.st_mode)) return PathProblem{"is a folder, not a file", "give the path of a file inside it"};
    if (S_ISCHR(st.st_mode))
        return PathProblem{"is a character device (such as /dev/zero or a terminal), not a file",
                           "give the path of a regular file"};
    if (S_ISBLK(st.st_mode)) return PathProblem{"is a block device, not a file", "give the path of a regular file"};
    if (S_ISFIFO(st.st_mode))
        return PathProblem{"is a FIFO (a named pipe or a process substitution), not a file",
                           "save the data to a regular file first and give its path"};
    if (S_ISSOCK(st.st_mode)) return PathProblem{"is a socket, not a file", "give the path of a regular file"};
    if (!S_ISREG(st.st_mode)) return PathProblem{"is not a regular file", "give the path of a regular file"};
    if (::access(path.c_str(), R_OK) != 0) {
        if (errno == EACCES)
            return PathProblem{"permission denied",
                               "make the file readable (chmod +r) or run as a user who can read it"};
        return PathProblem{std::string("cannot be read: ") + std::strerror(errno), "check the file"};
    }
    return std::nullopt;
}

[[noreturn]] void refuse(const std::string& path, const std::string& field, const PathProblem& p) {
    if (field.empty()) config_error(path, p.what, "", p.fix);
    config_error(field, p.what, path, p.fix);
}

[[noreturn]] void refuse_size(const std::string& path, int64_t size, int64_t max_bytes, const std::string& what) {
    config_error(path,
                 fmt::format("is {}, larger than {} can be ({} at most)", human_bytes_iec(double(size)), what,
                             human_bytes_iec(double(max_bytes))),
                 "", "check that this is the right file");
}

// Opens a checked input for reading; `st` gets its fstat. The caller closes the descriptor.
int open_regular(const std::string& path, struct stat& st) {
    if (auto p = path_problem(path)) refuse(path, "", *p);
    // O_NONBLOCK: a path swapped for a FIFO after the check must not block the open.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        if (errno == EACCES) refuse(path, "", {"permission denied", "make the file readable (chmod +r)"});
        config_error(path, "cannot open file", std::strerror(errno), "check that it is readable");
    }
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        config_error(path, "is not a regular file", "", "give the path of a regular file");
    }
    return fd;
}

}  // namespace

std::string human_bytes_iec(double bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (bytes >= 1024.0 && u < 5) {
        bytes /= 1024.0;
        ++u;
    }
    return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, units[u]);
}

void require_size_at_most(const std::string& path, int64_t max_bytes, const std::string& what) {
    const int64_t size = file_size_bytes(path);
    if (size > max_bytes) refuse_size(path, size, max_bytes, what);
}

void require_readable_file(const std::string& path, const std::string& field) {
    if (auto p = path_problem(path)) refuse(path, field, *p);
}

bool path_is_occupied(const std::string& path) {
    struct stat lst {};
    if (::lstat(path.c_str(), &lst) == 0) return true;
    return errno != ENOENT && errno != ENOTDIR;
}

int64_t file_size_bytes(const std::string& path) {
    require_readable_file(path);
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) config_error(path, "cannot be checked", std::strerror(errno), "check the path");
    return static_cast<int64_t>(st.st_size);
}

std::string peek_file_bytes(const std::string& path, size_t n) {
    struct stat st {};
    const int fd = open_regular(path, st);
    std::string out(n, '\0');
    size_t got = 0;
    while (got < n) {
        const ssize_t r = ::read(fd, out.data() + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += static_cast<size_t>(r);
    }
    ::close(fd);
    out.resize(got);
    return out;
}

std::string read_file_bytes(const std::string& path, int64_t max_bytes, const std::string& what) {
    struct stat st {};
    const int fd = open_regular(path, st);
    const auto too_large = [&](int64_t size) {
        ::close(fd);
        refuse_size(path, size, max_bytes, what);
    };
    if (st.st_size > max_bytes) too_large(st.st_size);
    std::string out;
    out.reserve(static_cast<size_t>(st.st_size));
    // Read to the end rather than trusting st_size (a file that grows, a /proc file of size 0), up to the cap.
    char buf[1 << 16];
    while (true) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR) continue;
            const std::string why = std::strerror(errno);
            ::close(fd);
            config_error(path, "read error", why, "check the file and the disk");
        }
        if (n == 0) break;
        out.append(buf, static_cast<size_t>(n));
        if (static_cast<int64_t>(out.size()) > max_bytes) too_large(static_cast<int64_t>(out.size()));
    }
    ::close(fd);
    return out;
}

}  // namespace moebench
