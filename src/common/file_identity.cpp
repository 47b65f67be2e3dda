// SPDX-License-Identifier: Apache-2.0
#include "common/file_identity.hpp"

#include "common/error.hpp"

#include <sys/stat.h>

namespace moebench {

namespace {

// Device and inode of the regular file at `path`, following links; false when there is none.
bool identity_of(const std::string& path, struct stat* st) {
    return !path.empty() && path != "-" && ::stat(path.c_str(), st) == 0 && S_ISREG(st->st_mode);
}

}  // namespace

bool same_file(const std::string& a, const std::string& b) {
    struct stat sa {
    }, sb{};
    return identity_of(a, &sa) && identity_of(b, &sb) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

void refuse_output_over_input(const std::vector<FileArg>& outputs, const std::vector<FileArg>& inputs) {
    for (const FileArg& out : outputs)
        for (const FileArg& in : inputs)
            if (same_file(out.path, in.path))
                config_error(out.flag,
                             "is the same file as the input " + in.flag +
                                 (in.path == out.path ? "" : " (" + in.path + ")") +
                                 "; writing it would destroy that input",
                             out.path, "give " + out.flag + " another path");
}

}  // namespace moebench
