// SPDX-License-Identifier: Apache-2.0
// One sweep per journal: an exclusive flock on "<journal>.lock", held for the sweep's life. The kernel drops it
// when the process dies, however it dies, so a killed sweep never leaves a lock that blocks --resume.
#pragma once
#include <string>

namespace moebench {

class JournalLock {
public:
    /// Takes the lock, or throws ConfigError naming the journal and the pid of the sweep that holds it.
    explicit JournalLock(const std::string& journal_path);
    /// Removes the lock file (while still holding it, so no other sweep can be holding a lock on it) and releases.
    ~JournalLock();
    JournalLock(const JournalLock&) = delete;
    JournalLock& operator=(const JournalLock&) = delete;

    const std::string& path() const { return lock_path_; }

private:
    std::string lock_path_;
    int fd_ = -1;
};

}  // namespace moebench
