// SPDX-License-Identifier: Apache-2.0
// JournalLock: flock(LOCK_EX | LOCK_NB) on a lock file next to the journal; the journal itself is not locked
// because a repair replaces it by rename, which would leave the lock on the old file.
#include "sweep/journal_lock.hpp"

#include "common/error.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

namespace moebench {

namespace {

// The pid the holder wrote into the lock file, or "" when unreadable.
std::string holder_pid(int fd) {
    char buf[32] = {};
    const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    std::string s = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s.find_first_not_of("0123456789") == std::string::npos ? s : "";
}

}  // namespace

JournalLock::JournalLock(const std::string& journal_path) : lock_path_(journal_path + ".lock") {
    // The sweep is validated by now, so its folder may be made (check_output_path only proves that it can be).
    std::error_code ec;
    const std::filesystem::path parent = std::filesystem::path(lock_path_).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    // A holder removes the file on release: if it did so between our open and our flock, we hold a lock on a
    // file no one else will open, so check that the path still names our file, and retry if not.
    for (int attempt = 0; attempt < 100; ++attempt) {
        const int fd = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
            config_error("--journal", "cannot create the sweep's lock file", lock_path_ + ": " + std::strerror(errno),
                         "check the journal's folder is writable");
        if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
            const int err = errno;
            const std::string pid = holder_pid(fd);
            ::close(fd);
            if (err != EWOULDBLOCK)
                config_error("--journal", "cannot lock the sweep journal", lock_path_ + ": " + std::strerror(err),
                             "use a journal on a local file system, or another --journal");
            config_error("--journal",
                         "another sweep is running on this journal" +
                             (pid.empty() ? std::string() : " (process " + pid + ")"),
                         journal_path,
                         "wait for it to finish (then use --resume), stop it, or give this sweep another "
                         "--journal / --out");
        }
        struct stat by_fd {}, by_path {};
        if (::fstat(fd, &by_fd) == 0 && ::stat(lock_path_.c_str(), &by_path) == 0 && by_fd.st_ino == by_path.st_ino &&
            by_fd.st_dev == by_path.st_dev) {
            const std::string pid = std::to_string(::getpid()) + "\n";
            if (::ftruncate(fd, 0) == 0) (void)::pwrite(fd, pid.data(), pid.size(), 0);  // only for the message
            fd_ = fd;
            return;
        }
        ::close(fd);
    }
    config_error("--journal", "could not settle the sweep's lock file", lock_path_,
                 "check that nothing else removes files in the journal's folder");
}

JournalLock::~JournalLock() {
    if (fd_ < 0) return;
    ::unlink(lock_path_.c_str());
    ::close(fd_);
}

}  // namespace moebench
