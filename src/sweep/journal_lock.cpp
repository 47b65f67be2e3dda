// SPDX-License-Identifier: Apache-2.0
// JournalLock: flock(LOCK_EX | LOCK_NB) on the journal's own open file. A lock on a file named after the path
// ("<journal>.lock") let a second sweep reach the same journal through a link without seeing it; the journal's inode
// is the one thing every spelling shares. A torn last line is therefore repaired in place (load_journal truncates),
// never by replacing the file, which would leave the lock on the old inode.
#include "sweep/journal_lock.hpp"

#include "common/error.hpp"
#include "common/flag_names.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace moebench {

namespace {

// The pid of the process holding a flock on the file `st` names, from /proc/locks (which lists every lock by device
// and inode); "" when it cannot be told (no /proc, another pid namespace).
std::string holder_pid(const struct stat& st) {
    std::ifstream locks("/proc/locks");
    std::string line;
    while (std::getline(locks, line)) {
        if (line.find("->") != std::string::npos) continue;  // a waiter, not a holder
        int pid = 0;
        unsigned maj = 0, min = 0;
        unsigned long long ino = 0;
        if (std::sscanf(line.c_str(), "%*d: FLOCK %*s %*s %d %x:%x:%llu", &pid, &maj, &min, &ino) == 4 &&
            maj == major(st.st_dev) && min == minor(st.st_dev) && ino == static_cast<unsigned long long>(st.st_ino) &&
            pid > 0)
            return std::to_string(pid);
    }
    return "";
}

bool same_inode(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

}  // namespace

JournalLock::JournalLock(const std::string& journal_path) : path_(journal_path) {
    // The sweep is validated by now, so its folder may be made (check_output_path only proves that it can be).
    std::error_code ec;
    const std::filesystem::path parent = std::filesystem::path(path_).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    // A holder that finished no point removes its empty journal on release: if it did so between our open and our
    // flock, we hold a lock on a file no one else will open, so check that the path still names our file.
    for (int attempt = 0; attempt < 100; ++attempt) {
        bool created = true;
        int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno == EEXIST) {  // (also a link, dangling or not: opened through it below)
            created = false;
            fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        }
        if (fd < 0)
            config_error(flag_of("journal"), "cannot open the sweep journal", path_ + ": " + std::strerror(errno),
                         "check the journal's folder is writable, or give another " + flag_of("journal"));
        struct stat by_fd {};
        if (::fstat(fd, &by_fd) != 0 || !S_ISREG(by_fd.st_mode)) {
            ::close(fd);
            config_error(flag_of("journal"), "is not a regular file", path_, "give a file path for the journal");
        }
        if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
            const int err = errno;
            ::close(fd);
            if (err != EWOULDBLOCK)
                config_error(flag_of("journal"), "cannot lock the sweep journal", path_ + ": " + std::strerror(err),
                             "use a journal on a local file system, or another " + flag_of("journal"));
            const std::string pid = holder_pid(by_fd);
            config_error(
                flag_of("journal"),
                "another sweep is running on this journal" + (pid.empty() ? std::string() : " (process " + pid + ")"),
                path_,
                fmt::format("wait for it to finish (then use {}), stop it, or give this sweep another {} / {}",
                            flag_of("resume"), flag_of("journal"), flag_of("out")));
        }
        struct stat by_path {};
        if (::stat(path_.c_str(), &by_path) == 0 && same_inode(by_fd, by_path)) {
            fd_ = fd;
            created_ = created;
            return;
        }
        ::close(fd);
    }
    config_error(flag_of("journal"), "could not settle the sweep journal's lock", path_,
                 "check that nothing else removes files in the journal's folder");
}

JournalLock::~JournalLock() {
    if (fd_ < 0) return;
    struct stat by_fd {
    }, by_path{};
    // Still holding the lock, so no other sweep can be using the file.
    if (created_ && ::fstat(fd_, &by_fd) == 0 && by_fd.st_size == 0 && ::stat(path_.c_str(), &by_path) == 0 &&
        same_inode(by_fd, by_path))
        ::unlink(path_.c_str());
    ::close(fd_);
}

}  // namespace moebench
