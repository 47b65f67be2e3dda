// SPDX-License-Identifier: Apache-2.0
// The checked stdout writer: a streambuf over descriptor 1 whose first failed write (errno) is kept for the end of
// the process. std::cout's stdio buffer loses that errno: glibc drops the data, fflush then returns 0, and only a
// sticky ferror says that something went wrong.
#include "common/checked_stdout.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <streambuf>
#include <vector>

namespace moebench {

namespace {

class CheckedFdBuf : public std::streambuf {
public:
    explicit CheckedFdBuf(int fd) : fd_(fd), line_buffered_(::isatty(fd) == 1), buf_(1 << 16) {
        setp(buf_.data(), buf_.data() + buf_.size());
    }

    // The first failure's reason, once ("" when none, or when it was taken already).
    std::string take_failure() {
        if (failed_errno_ == 0 || reported_) return "";
        reported_ = true;
        return std::strerror(failed_errno_);
    }

protected:
    int_type overflow(int_type ch) override {
        if (!drain()) return traits_type::eof();
        if (!traits_type::eq_int_type(ch, traits_type::eof())) {
            *pptr() = traits_type::to_char_type(ch);
            pbump(1);
            if (line_buffered_ && ch == '\n' && !drain()) return traits_type::eof();
        }
        return traits_type::not_eof(ch);
    }
    std::streamsize xsputn(const char* s, std::streamsize n) override {
        const std::streamsize put = std::streambuf::xsputn(s, n);
        if (line_buffered_ && put > 0 && std::memchr(s, '\n', static_cast<size_t>(put)) && !drain()) return 0;
        return put;
    }
    int sync() override { return drain() ? 0 : -1; }

private:
    // Writes out the buffer. After a failure the rest is dropped (as stdio does) and every later write fails too,
    // so the stream's badbit stays set.
    bool drain() {
        const char* p = pbase();
        size_t left = static_cast<size_t>(pptr() - pbase());
        while (left > 0 && failed_errno_ == 0) {
            const ssize_t n = ::write(fd_, p, left);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                failed_errno_ = n < 0 ? errno : EIO;
                break;
            }
            p += n;
            left -= static_cast<size_t>(n);
        }
        setp(buf_.data(), buf_.data() + buf_.size());
        return failed_errno_ == 0;
    }

    int fd_;
    bool line_buffered_;
    std::vector<char> buf_;
    int failed_errno_ = 0;
    bool reported_ = false;
};

CheckedFdBuf* g_stdout_buf = nullptr;

}  // namespace

void install_checked_stdout() {
    if (g_stdout_buf) return;
    std::cout.flush();
    // Never destroyed: std::cout is flushed by the library after every static object is gone (at exit()).
    g_stdout_buf = new CheckedFdBuf(STDOUT_FILENO);
    std::cout.rdbuf(g_stdout_buf);
}

std::string take_stdout_failure() {
    std::cout.flush();
    if (g_stdout_buf) return g_stdout_buf->take_failure();
    // Not installed (a test calling a writer directly): stdio's state, without its errno.
    return std::cout ? "" : "the stream reported an error";
}

std::string close_stdout() {
    std::string why = take_stdout_failure();
    if (!g_stdout_buf) return why;
    // EBADF: stdout was closed before we started and nothing was written to it; nothing was lost.
    if (::close(STDOUT_FILENO) != 0 && errno != EBADF && why.empty()) why = std::strerror(errno);
    return why;
}

}  // namespace moebench
