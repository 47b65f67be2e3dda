// SPDX-License-Identifier: Apache-2.0
#include "common/atomic_file.hpp"

#include "common/checked_stdout.hpp"
#include "common/error.hpp"
#include "common/flag_names.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <vector>

namespace moebench {

// `tmp`: the temporary file to remove on failure, so that a failed write leaves no half file behind.
static void write_all(int fd, std::string_view content, const std::string& path, const std::string& tmp = "") {
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

// Where an output path really writes. A symbolic link is followed to its target (created if missing), so the link
// stays and its target gets the file, as `>` in a shell would; renaming over the link would replace it instead.
static std::filesystem::path resolve_output(const std::filesystem::path& p) {
    namespace fs = std::filesystem;
    fs::path t = p;
    std::error_code ec;
    for (int hops = 0; fs::is_symlink(fs::symlink_status(t, ec)); ++hops) {
        if (hops == 40) config_error(p.string(), "too many levels of symbolic links", "", "give the real file path");
        fs::path next = fs::read_symlink(t, ec);
        if (ec) config_error(p.string(), "cannot read the symbolic link", ec.message(), "give the real file path");
        t = next.is_absolute() ? next : t.parent_path() / next;
    }
    return t;
}

// A path that exists and is not a regular file (a device such as /dev/null, a named pipe, /dev/stdout): a rename
// would replace it with a regular file, so the content is written into it directly. Follows symbolic links.
static bool is_special_file(const std::filesystem::path& p) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::file_status st = fs::status(p, ec);
    return !ec && fs::exists(st) && !fs::is_regular_file(st) && !fs::is_directory(st);
}

// Removes `<target>.tmp.<pid>` files that a killed write left behind: those whose process no longer exists (a live
// pid may be another writer of the same target, mid-write; our own pid is the file about to be written).
static void remove_stale_temporaries(const std::filesystem::path& target) {
    namespace fs = std::filesystem;
    const std::string prefix = target.filename().string() + ".tmp.";
    const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
        const std::string pid_text = name.substr(prefix.size());
        if (pid_text.size() > 9 || pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
        const long pid = std::stol(pid_text);
        if (pid <= 0 || pid == ::getpid()) continue;
        if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
            std::error_code rm_ec;
            fs::remove(it->path(), rm_ec);  // best effort: a file we cannot remove is left as it was
        }
    }
}

void write_file_atomic(const std::string& path, const std::string& content) {
    write_file_atomic_pieces(path, [&](const EmitText& emit) { emit(content); });
}

void write_file_atomic_pieces(const std::string& path, const std::function<void(const EmitText&)>& produce) {
    if (path == "-") {
        produce([](std::string_view piece) { std::cout << piece; });
        if (const std::string why = take_stdout_failure(); !why.empty())
            throw Error("writing to stdout failed: " + why);  // exit 1, as main() reports a failed stdout
        return;
    }
    namespace fs = std::filesystem;
    std::error_code ec;
    if (is_special_file(path)) {
        const int fd = ::open(path.c_str(), O_WRONLY);
        if (fd < 0)
            config_error(path, "cannot open for writing", std::strerror(errno), "check the path and permissions");
        produce([&](std::string_view piece) { write_all(fd, piece, path); });
        if (::close(fd) != 0)
            config_error(path, "write failed", std::strerror(errno), "check the path and permissions");
        return;
    }
    const fs::path p = resolve_output(path);
    const std::string target = p.string();
    if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
    if (fs::is_directory(p, ec) || !p.has_filename())  // "dir/" names a folder even before it exists
        config_error(path, "is a folder", "", "give a file path for the output, e.g. " + (p / "out.json").string());
    remove_stale_temporaries(p);
    std::string tmp = target + ".tmp." + std::to_string(::getpid());
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        config_error(path, "cannot create output file", std::strerror(errno),
                     "check the folder exists and is writable");
    try {
        produce([&](std::string_view piece) {
            for (size_t done = 0; done < piece.size();) {
                const ssize_t n = ::write(fd, piece.data() + done, piece.size() - done);
                if (n < 0 && errno == EINTR) continue;
                if (n < 0) config_error(path, "write failed", std::strerror(errno), "check disk space and permissions");
                done += static_cast<size_t>(n);
            }
        });
    } catch (...) {  // a failed write, or the producer's own error: nothing is left behind
        ::close(fd);
        std::remove(tmp.c_str());
        throw;
    }
    const bool synced = ::fsync(fd) == 0;
    const std::string sync_why = synced ? "" : std::strerror(errno);
    if (::close(fd) != 0 || !synced) {
        const std::string why = synced ? std::strerror(errno) : sync_why;
        std::remove(tmp.c_str());
        config_error(path, "write failed", why, "check disk space and permissions");
    }
    if (std::rename(tmp.c_str(), target.c_str()) != 0) {
        const std::string why = std::strerror(errno);
        std::remove(tmp.c_str());
        config_error(path, "cannot rename the temporary file into place", why, "check the folder is writable");
    }
}

void check_output_path(const std::string& path) {
    if (path.empty() || path == "-") return;
    namespace fs = std::filesystem;
    if (is_special_file(path)) {
        if (::access(path.c_str(), W_OK) != 0)
            config_error(path, "is not writable", std::strerror(errno), "choose another " + flag_of("out"));
        return;
    }
    const fs::path p = resolve_output(path);
    std::error_code ec;
    if (fs::is_directory(p, ec) || !p.has_filename())  // "dir/" names a folder even before it exists
        config_error(path, "is a folder", "", "give a file path for the output, e.g. " + (p / "out.json").string());
    const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
    // The missing folders are created to prove they can be, then removed again: the output is written (and its
    // folders made) only once the work is done, so a run refused on a later check leaves nothing behind.
    std::vector<fs::path> missing;
    for (fs::path d = dir; !d.empty() && !fs::exists(fs::symlink_status(d, ec)); d = d.parent_path()) {
        missing.push_back(d);
        if (d == d.parent_path()) break;
    }
    fs::create_directories(dir, ec);
    const bool made = fs::is_directory(dir, ec);
    const bool writable = made && ::access(dir.c_str(), W_OK) == 0;
    const std::string why = std::strerror(errno);
    for (const fs::path& d : missing) fs::remove(d, ec);  // deepest first; only the (empty) folders made here
    if (!made)
        config_error(path, "cannot create the output folder", dir.string(),
                     "check the path: every part of it must be a folder you can write to");
    if (!writable) config_error(path, "the output folder is not writable", why, "choose another " + flag_of("out"));
}

void append_line_durable(const std::string& path, const std::string& line) {
    namespace fs = std::filesystem;
    fs::path p(path);
    std::error_code ec;
    if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) config_error(path, "cannot open for appending", std::strerror(errno), "check the folder is writable");
    write_all(fd, line + "\n", path);
    // The line counts as written only once it is on the disk: a failed fsync or close (a full disk, an I/O error,
    // NFS) would otherwise pass as a finished point that a crash then loses.
    const bool synced = ::fsync(fd) == 0;
    const std::string sync_why = synced ? "" : std::strerror(errno);
    if (::close(fd) != 0 || !synced)
        config_error(path, "write failed", synced ? std::strerror(errno) : sync_why,
                     "check disk space and permissions");
}

}  // namespace moebench
