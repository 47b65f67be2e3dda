// SPDX-License-Identifier: Apache-2.0
// One sweep per journal: an exclusive flock on the journal file itself, held for the sweep's life. The lock belongs
// to the file (its device and inode), not to the path as spelt, so a symbolic link, a hard link or another spelling
// of the path reaches the same lock. The kernel drops it when the process dies, however it dies, so a killed sweep
// never leaves a lock that blocks --resume.
#pragma once
#include <string>

namespace moebench {

class JournalLock {
public:
    /// Opens (creating when missing) and locks the journal, or throws ConfigError naming the journal and the pid of
    /// the sweep that holds it.
    explicit JournalLock(const std::string& journal_path);
    /// Releases the lock; a journal this lock created that is still empty (no point finished) is removed first, as
    /// if the sweep had never started.
    ~JournalLock();
    JournalLock(const JournalLock&) = delete;
    JournalLock& operator=(const JournalLock&) = delete;

private:
    std::string path_;
    int fd_ = -1;
    bool created_ = false;
};

}  // namespace moebench
