// SPDX-License-Identifier: Apache-2.0
// What was made from a file, kept while the file is unchanged: a sweep reads the same model and hardware profile for
// every point, and parsing and checking them again each time cost more than the sim's whole point.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace moebench {

/// A file's identity and version: device, inode, size and modification time (ns). `ok` false: stat failed.
struct FileStamp {
    bool ok = false;
    uint64_t dev = 0, ino = 0;
    int64_t size = 0, mtime_ns = 0;
    bool operator==(const FileStamp& o) const {
        return ok && o.ok && dev == o.dev && ino == o.ino && size == o.size && mtime_ns == o.mtime_ns;
    }
};
FileStamp file_stamp(const std::string& path);

/// The value `make()` built from the file at `path`, reused while the file's stamp is unchanged (a file that cannot be
/// stat'ed is never reused). A failing make() caches nothing. At most `kMaxEntries` paths; then it starts over.
template <class T>
class FileMemo {
public:
    static constexpr size_t kMaxEntries = 64;
    template <class Make>
    T get(const std::string& path, Make&& make) {
        const FileStamp stamp = file_stamp(path);
        {
            std::lock_guard<std::mutex> lock(mu_);
            auto it = entries_.find(path);
            if (it != entries_.end() && it->second.first == stamp) return it->second.second;
        }
        T value = make();
        if (stamp.ok) {
            std::lock_guard<std::mutex> lock(mu_);
            if (entries_.size() >= kMaxEntries) entries_.clear();
            entries_[path] = {stamp, value};
        }
        return value;
    }

private:
    std::mutex mu_;
    std::map<std::string, std::pair<FileStamp, T>> entries_;
};

}  // namespace moebench
