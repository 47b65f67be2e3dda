// SPDX-License-Identifier: Apache-2.0
// Which file a path really names (device and inode, after symbolic links), so that no command writes its output over
// one of its inputs: `trace convert g.jsonl -o g.jsonl` would destroy the recording it reads.
#pragma once
#include <string>
#include <vector>

namespace moebench {

/// A file a command reads or writes, and the flag (or argument) that named it: "--config", "REPORT".
struct FileArg {
    std::string flag;
    std::string path;
};

/// True when `a` and `b` name one existing regular file: the same device and inode once symbolic links are followed
/// (so a link, a hard link or another spelling of the path counts as the same file).
bool same_file(const std::string& a, const std::string& b);

/// Before anything runs: ConfigError (exit 2) naming both flags when an output is the same file as an input. Outputs
/// "" and "-" (stdout), and inputs that are not existing regular files (short names, devices), are passed over.
void refuse_output_over_input(const std::vector<FileArg>& outputs, const std::vector<FileArg>& inputs);

}  // namespace moebench
